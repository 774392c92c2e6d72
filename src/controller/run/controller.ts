import { Counter, type Registry } from 'prom-client';
import type { Run } from '../../crd/run.ts';
import { Reasons } from '../../crd/reasons.ts';
import { Dependencies, type DependencyHealth } from '../../health/dependencies.ts';
import {
  objectKey,
  splitKey,
  type EventRecorder,
  type EventSource,
  type KubeClient,
} from '../../kube/index.ts';
import type { Logger } from '../../log/index.ts';
import {
  defaultControllerRateLimiter,
  runWorkers,
  withReconcileDeadline,
  WorkQueue,
  type ReconcileResult,
} from '../../queue/index.ts';
import { RecordError, type Recorder } from '../../recorder/index.ts';
import { REPAIR_CHANNEL, type Vault } from '../../vault/index.ts';
import type { LeaderLoop, Term } from '../term.ts';
import { kubeRunApi } from './kube-api.ts';
import { OwnWrites } from './own-writes.ts';
import { reconcileRun } from './reconciler.ts';
import { runsMissingRecords } from './sweep.ts';
import type { ResourcePolicy } from './resources.ts';

/** Longest wait between retries of one Run (see the work queue below). */
export const RUN_MAX_BACKOFF_MS = 30_000;

export const DEFAULT_RECONCILE_TIMEOUT_MS = 120_000;

export interface RunControllerDeps {
  readonly client: KubeClient;
  readonly vault: Vault;
  readonly recorder: Recorder;
  readonly events: EventRecorder;
  readonly logger: Logger;
  readonly registry: Registry;
  readonly observeAibomSeconds: (seconds: number) => void;
  readonly workers?: number;
  /** Only repair requests of this namespace concern this controller (WATCH_NAMESPACE). */
  readonly watchNamespace?: string;
  /** RECONCILE_TIMEOUT_MS, default {@link DEFAULT_RECONCILE_TIMEOUT_MS}: a backstop per reconcile. */
  readonly reconcileTimeoutMs?: number;
  /** Told which dependency a failed reconcile failed on (/readyz, /metrics). */
  readonly health?: DependencyHealth;
  /** ATTESTATION_RESOURCES and ATTESTATION_RESOURCE_RETENTION (resources.ts); default perRecord, kept. */
  readonly resources?: ResourcePolicy;
}

/**
 * The Run controller, a loop of the leader: the term's Run cache → keyed work queue → reconcile
 * workers (src/controller/run/reconciler.ts), plus the manifest repairs the API asks for.
 */
export function runController(deps: RunControllerDeps): LeaderLoop {
  const log = deps.logger;
  // Created once, with the process: /metrics lists it before this replica first leads.
  const overruns = new Counter({
    name: 'aibom_vault_reconcile_deadline_exceeded_total',
    help: 'Reconciles of a Run that held a worker past RECONCILE_TIMEOUT_MS (the worker was released)',
    registers: [deps.registry],
  });
  const timeoutMs = deps.reconcileTimeoutMs ?? DEFAULT_RECONCILE_TIMEOUT_MS;
  return {
    name: 'run controller',
    run: async ({ signal, runs }: Term) => {
      // Failures here are mostly a dependency being down (PostgreSQL, the object store): once it is back, a
      // Run should not sit out client-go's 1000 s maximum backoff, so per-key retries cap at 30 s.
      const workers = deps.workers ?? 4;
      const queue = new WorkQueue({
        name: 'runs',
        registry: deps.registry,
        rateLimiter: defaultControllerRateLimiter(Date.now, RUN_MAX_BACKOFF_MS),
        // One worker is kept for fresh changes: a Run that finishes during a backlog of thousands
        // starts at once instead of waiting for a backlog reconcile to end (issue 29).
        backlogLimit: Math.max(1, workers - 1),
      });
      // The Runs as the reconciler left them, this term: the events of its own writes are not
      // reconciled again (ADR 0017).
      const written = new OwnWrites();
      // A watch event is a Run that changed just now (one that finished after a restart, say): it
      // goes before the backlog of the initial list, relists and resyncs, which after a restart
      // into a large cluster is every Run (mostly converged, some terminal and not recorded yet).
      const enqueue = (r: Run, source: EventSource): void =>
        queue.add(objectKey(r), source === 'watch' ? 'normal' : 'backlog');
      const removeHandler = runs.addHandler({
        onAdd: enqueue,
        onUpdate: (_o, n, source) => enqueue(n, source),
        onDelete: enqueue,
      });
      const requested = (key: string): void => {
        // Not a change of the Run: the next reconcile runs in full, or it could take the Run for the
        // echo of a status write (one in flight now, say) and skip the repair (own-writes.ts).
        written.force(key);
        queue.add(key);
      };
      // Runs whose status shows records the vault no longer holds (docs/failover.md): reconciled
      // now, at the start of the term (the cache is synced) and after every reconnect to the vault.
      const sweep = (): void => {
        runsMissingRecords(runs.list(), (ids) => deps.vault.losses.recordCounts(ids)).then(
          (missing) => {
            if (missing.length === 0) return;
            log.error(
              { runs: missing.length, sample: missing.slice(0, 5).map(objectKey) },
              'Runs show records the vault does not hold: reconciling them to record what was lost again',
            );
            for (const r of missing) requested(objectKey(r));
          },
          (err: unknown) =>
            log.warn({ err }, 'could not compare the Runs with the vault; retried on the next reconnect'),
        );
      };
      const unsubscribeRepairs = await subscribeRepairs(deps, requested, sweep);
      sweep();
      const api = kubeRunApi(deps.client, deps.events, (ns, name) => runs.get(`${ns}/${name}`));
      const resources = deps.resources !== undefined ? { resources: deps.resources } : {};
      const reconcile = async (key: string): Promise<ReconcileResult | undefined> => {
        const { namespace, name } = splitKey(key);
        const { vault, recorder } = deps;
        const observeAibom = deps.observeAibomSeconds;
        try {
          const ctx = { api, vault, recorder, logger: log, observeAibom, written, ...resources };
          const result = await reconcileRun(ctx, namespace ?? '', name);
          deps.health?.ok(Dependencies.vault);
          return result;
        } catch (err) {
          if (err instanceof RecordError) {
            if (err.code === Reasons.VaultUnavailable) deps.health?.failed(Dependencies.vault);
            if (err.code === Reasons.ObjectStoreUnavailable) deps.health?.failed(Dependencies.objectStore);
          }
          throw err;
        }
      };
      try {
        await runWorkers(
          queue,
          workers,
          withReconcileDeadline(reconcile, timeoutMs, (key) => {
            overruns.inc();
            log.error(
              { key, timeoutMs },
              'reconcile exceeded its deadline; the worker moves on and the Run is retried with backoff',
            );
          }),
          { logger: log, registry: deps.registry, name: 'runs', signal },
        );
      } finally {
        unsubscribeRepairs();
        removeHandler();
      }
    },
  };
}

/**
 * Manifest repairs the API asked for (any replica's sidecar): the Run is reconciled, and its plan
 * then holds the open request. After a (re)connect, the runs with an open request are read again.
 */
function subscribeRepairs(
  deps: Pick<RunControllerDeps, 'vault' | 'logger' | 'watchNamespace'>,
  requested: (key: string) => void,
  reconnected: () => void,
): Promise<() => void> {
  const repairRequested = (key: string): void => {
    if (!key.includes('/')) return;
    if (deps.watchNamespace !== undefined && !key.startsWith(`${deps.watchNamespace}/`)) return;
    requested(key);
  };
  return deps.vault.listener.subscribe(REPAIR_CHANNEL, {
    onNotify: repairRequested,
    resync: () => {
      deps.vault.manifestRepairs.openRunKeys().then(
        (keys) => keys.forEach(repairRequested),
        (err: unknown) =>
          deps.logger.warn({ err }, 'could not list open manifest repairs; retried on the next reconnect'),
      );
      reconnected();
    },
  });
}
