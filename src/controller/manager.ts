import { randomBytes } from 'node:crypto';
import { Counter, type Registry } from 'prom-client';
import type { Run } from '../api/run.ts';
import type { BlobStore } from '../blob/store.ts';
import { Reasons } from '../api/reasons.ts';
import { Dependencies, type DependencyHealth } from '../health/dependencies.ts';
import { runCheckpointer } from '../checkpoint/checkpointer.ts';
import { bucketWitness, witnessKey } from '../checkpoint/witness.ts';
import type { Logger } from '../log/index.ts';
import { recordingMetrics, signerMetrics, transparencyMetrics } from '../metrics/domain.ts';
import { createRecorder, RecordError, type Recorder } from '../recorder/index.ts';
import type { KeySigner, Signer } from '../signing/index.ts';
import type { Timestamper } from '../timestamp/index.ts';
import { createStamper } from '../timestamp/stamper.ts';
import type { Transparency } from '../transparency/setup.ts';
import { createWorker } from '../transparency/worker.ts';
import { REPAIR_CHANNEL, TRANSPARENCY_CHANNEL, type Vault } from '../vault/index.ts';
import { kubeRunApi, RUN_TYPE } from './run/kube-api.ts';
import type { Written } from './run/plan.ts';
import { reconcileRun } from './run/reconciler.ts';
import { runsMissingRecords } from './run/sweep.ts';
import {
  defaultControllerRateLimiter,
  eventRecorder,
  Informer,
  kubeLeaseStore,
  kubeListerWatcher,
  LeaderElector,
  objectKey,
  resourcePath,
  runWorkers,
  splitKey,
  withoutManagedFields,
  WorkQueue,
  type EventRecorder,
  type KubeClient,
  type ReconcileResult,
} from './runtime/index.ts';
import { kubeProjectionApi } from './transparency/kube-api.ts';
import { mayNeedProjection, projectionTargetsChanged, projectRun } from './transparency/projection.ts';

/** Longest wait between retries of one Run (see the work queue below). */
export const RUN_MAX_BACKOFF_MS = 30_000;

export interface ControllerDeps {
  readonly client: KubeClient;
  readonly vault: Vault;
  readonly blobs: BlobStore;
  /** The runtime trust signer; a function when it follows its Secret (read once per AIBOM). */
  readonly runtimeSigner: KeySigner | (() => KeySigner);
  readonly envelopeSigner: (namespace: string) => Promise<Signer>;
  /**
   * TSA_URL: time-stamps on every AIBOM's C2PA manifest and runtime signature, and on every
   * record's signature (the stamper runs in every replica: ADR 0015).
   */
  readonly timestamper?: Timestamper;
  readonly logger: Logger;
  readonly registry: Registry;
  /** Namespace of the leader-election Lease. */
  readonly namespace: string;
  /** Pod name; a random suffix keeps two processes of one pod name apart. */
  readonly podName?: string;
  readonly workers?: number;
  /** Watch Runs of one namespace only (WATCH_NAMESPACE); all namespaces when unset. */
  readonly watchNamespace?: string;
  /**
   * Watch only Runs matching this label selector (shards of Runs across controller deployments;
   * tests scope a controller watching every namespace to their own Runs with it).
   */
  readonly runLabelSelector?: string;
  /** Name of the leader-election Lease (one per independent controller deployment). */
  readonly leaseName?: string;
  /**
   * SERVICE_TRANSPARENCY_WRITER=1: records enqueue SCITT jobs, the worker publishes them (every
   * replica) and the leader projects their state onto the resources.
   */
  readonly transparency?: Transparency;
  /**
   * Signed checkpoints of the vault (src/checkpoint): the leader signs one every `intervalMs` when
   * the head moved, when asked (POST /v1/chain/checkpoint) and at the start of its term, with the
   * runtime signer; registered in the transparency log when `transparency` is set.
   */
  readonly checkpoints?: {
    readonly intervalMs: number;
    /** VAULT_ACCEPT_LOST_CHECKPOINT: a kept checkpoint accepted as lost (docs/failover.md). */
    readonly acceptLost?: { readonly treeSize: number; readonly rootHash: string };
  };
  /** SERVICE_CAPABILITY_TOKENS (default on): mint VC and Biscuit projections of capability chains. */
  readonly capabilityTokens?: boolean;
  /** Shorter lease timings for tests. */
  readonly lease?: { durationSeconds: number; renewDeadlineSeconds: number; retryPeriodSeconds: number };
  /**
   * Longest one reconcile may hold a worker (RECONCILE_TIMEOUT_MS, default
   * {@link DEFAULT_RECONCILE_TIMEOUT_MS}). A backstop: every call inside has its own deadline.
   */
  readonly reconcileTimeoutMs?: number;
  /** Told which dependency a failed reconcile failed on (/readyz, /metrics). */
  readonly health?: DependencyHealth;
}

export const DEFAULT_RECONCILE_TIMEOUT_MS = 120_000;

/** A reconcile that did not return within its deadline; its key is retried with backoff. */
export class ReconcileTimeoutError extends Error {}

/**
 * Wraps a reconciler so that no key holds a worker longer than `timeoutMs`. A reconcile past its
 * deadline keeps running in the background (its own calls have deadlines and will end it), but the
 * worker is released to other keys at once; while it runs, the same key is not reconciled a second
 * time concurrently, only requeued with backoff.
 */
export function withReconcileDeadline(
  reconcile: (key: string) => Promise<ReconcileResult | undefined | void>,
  timeoutMs: number,
  onOverrun: (key: string) => void,
): (key: string) => Promise<ReconcileResult | undefined | void> {
  const overrunning = new Set<string>();
  return async (key) => {
    if (overrunning.has(key)) return { requeue: true };
    const run = reconcile(key);
    let timer: ReturnType<typeof setTimeout> | undefined;
    const deadline = new Promise<'timeout'>((resolve) => {
      timer = setTimeout(resolve, timeoutMs, 'timeout');
    });
    try {
      const outcome = await Promise.race([run.then((result) => ({ result })), deadline]);
      if (outcome !== 'timeout') return outcome.result;
    } finally {
      clearTimeout(timer);
    }
    overrunning.add(key);
    run
      .catch(() => undefined)
      .finally(() => overrunning.delete(key))
      .catch(() => undefined);
    onOverrun(key);
    throw new ReconcileTimeoutError(`reconcile of ${key} did not finish within ${timeoutMs} ms`);
  };
}

export interface RunningController {
  /** Ready = not leading (a warm standby), or leading with a synced informer. */
  ready(): Promise<void>;
  isLeader(): boolean;
  stop(): Promise<void>;
}

/**
 * The transparency projection of one leadership term: a keyed queue of run ids fed by the vault's
 * job notifications (from any replica) and by Run updates that add resources to project onto.
 */
async function runProjection(
  deps: ControllerDeps,
  recorder: Recorder,
  informer: Informer<Run>,
  events: EventRecorder,
  log: Logger,
  signal: AbortSignal,
): Promise<void> {
  const queue = new WorkQueue({
    name: 'transparency',
    registry: deps.registry,
    rateLimiter: defaultControllerRateLimiter(Date.now, RUN_MAX_BACKOFF_MS),
  });
  const api = kubeProjectionApi(deps.client, events, (ns, name) => informer.get(`${ns}/${name}`));
  const rescan = (): void => {
    for (const run of informer.list()) if (mayNeedProjection(run)) queue.add(run.metadata.uid);
  };
  const removeHandler = informer.addHandler({
    onUpdate: (old, next) => {
      if (projectionTargetsChanged(old, next)) queue.add(next.metadata.uid);
    },
  });
  const unsubscribe = await deps.vault.listener.subscribe(TRANSPARENCY_CHANNEL, {
    onNotify: (payload) => {
      if (payload === '*') return rescan();
      for (const id of payload.split(',')) if (id !== '') queue.add(id);
    },
    // (Re)connected: notifications sent meanwhile are lost; project whatever may lag.
    resync: rescan,
  });
  try {
    await runWorkers(
      queue,
      2,
      (runId) =>
        projectRun(
          {
            api,
            jobs: deps.vault.transparencyJobs,
            logger: log,
            refreshAibomMetadata: (id, entry) => recorder.refreshAibomMetadata(id, entry),
          },
          runId,
        ),
      {
        logger: log,
        registry: deps.registry,
        name: 'transparency',
        signal,
      },
    );
  } finally {
    unsubscribe();
    removeHandler();
  }
}

/**
 * Leader election → (while leading) Run informer → keyed work queue → reconcile workers, and the
 * transparency projection beside them. Only the leader reconciles; on lost leadership the term's
 * signal stops the workers and the informer (a standby keeps no cache: see ADR 0002). The SCITT
 * worker runs in every replica.
 */
export function startController(deps: ControllerDeps): RunningController {
  const identity = `${deps.podName ?? 'controller'}-${randomBytes(3).toString('hex')}`;
  // Children bind only keys their parent lacks: pino writes a key once per binding, and strict log
  // pipelines refuse a line with a duplicate key (test/integration/observability.test.ts).
  const log = deps.logger.child({ component: 'controller', identity });
  const metrics = recordingMetrics(deps.registry);
  const currentRuntimeSigner = (): KeySigner =>
    typeof deps.runtimeSigner === 'function' ? deps.runtimeSigner() : deps.runtimeSigner;
  signerMetrics(deps.registry, { service: currentRuntimeSigner });
  transparencyMetrics(
    deps.registry,
    {
      stats: () => deps.vault.transparencyJobs.stats(),
      oldestQueuedAgeSeconds: () => deps.vault.transparencyJobs.oldestQueuedAgeSeconds(),
    },
    (err) => log.warn({ err }, 'transparency metrics not read'),
  );
  const reconcileOverruns = new Counter({
    name: 'aibom_vault_reconcile_deadline_exceeded_total',
    help: 'Reconciles of a Run that held a worker past RECONCILE_TIMEOUT_MS (the worker was released)',
    registers: [deps.registry],
  });
  const events = eventRecorder({
    client: deps.client,
    reportingController: 'vault.service.dev/controller',
    reportingInstance: identity,
    logger: log,
  });
  const recorder = createRecorder({
    vault: deps.vault,
    blobs: deps.blobs,
    runtimeSigner: deps.runtimeSigner,
    envelopeSigner: deps.envelopeSigner,
    ...(deps.timestamper ? { timestamper: deps.timestamper } : {}),
    enqueueTransparency: deps.transparency !== undefined,
    signers: deps.vault.signers,
    ...(deps.capabilityTokens !== undefined ? { capabilityTokens: deps.capabilityTokens } : {}),
    logger: log,
    observer: metrics,
  });
  let informer: Informer<Run> | undefined;

  const lead = async (signal: AbortSignal): Promise<void> => {
    log.info('leading: starting the Run informer and workers');
    // Failures here are mostly a dependency being down (PostgreSQL, MinIO): once it is back, a Run
    // should not sit out client-go's 1000 s maximum backoff, so per-key retries cap at 30 s.
    const queue = new WorkQueue({
      name: 'runs',
      registry: deps.registry,
      rateLimiter: defaultControllerRateLimiter(Date.now, RUN_MAX_BACKOFF_MS),
    });
    const inf = new Informer<Run>({
      name: 'runs',
      listerWatcher: kubeListerWatcher<Run>(
        deps.client,
        resourcePath(RUN_TYPE, { namespace: deps.watchNamespace }),
        // The reconcilers read the cache, never managedFields.
        {
          transform: withoutManagedFields,
          ...(deps.runLabelSelector !== undefined ? { labelSelector: deps.runLabelSelector } : {}),
        },
      ),
      logger: log,
      registry: deps.registry,
    });
    informer = inf;
    const api = kubeRunApi(deps.client, events, (ns, name) => inf.get(`${ns}/${name}`));
    // The Runs as the reconciler left them, this term: the events of its own writes are not
    // reconciled again (ADR 0017).
    const written = new Map<string, Written>();
    const enqueue = (r: Run): void => queue.add(objectKey(r));
    inf.addHandler({ onAdd: enqueue, onUpdate: (_o, n) => enqueue(n), onDelete: enqueue });
    inf.start();
    // Manifest repairs the API asked for (any replica's sidecar): reconcile the Run, whose plan then
    // holds the open request. After a (re)connect, the runs with an open request are read again.
    // Not a change of the Run: its entry in `written` goes, or the reconcile would take the Run for
    // the echo of its own status write and skip the repair.
    const repairRequested = (key: string): void => {
      if (!key.includes('/')) return;
      if (deps.watchNamespace !== undefined && !key.startsWith(`${deps.watchNamespace}/`)) return;
      written.delete(key);
      queue.add(key);
    };
    // Runs whose status shows records the vault no longer holds (docs/failover.md): reconciled now.
    let synced = false;
    const sweep = (): void => {
      if (!synced) return;
      runsMissingRecords(inf.list(), (ids) => deps.vault.losses.recordCounts(ids)).then(
        (runs) => {
          if (runs.length === 0) return;
          log.error(
            { runs: runs.length, sample: runs.slice(0, 5).map(objectKey) },
            'Runs show records the vault does not hold: reconciling them to record what was lost again',
          );
          for (const r of runs) repairRequested(objectKey(r));
        },
        (err: unknown) =>
          log.warn({ err }, 'could not compare the Runs with the vault; retried on the next reconnect'),
      );
    };
    const unsubscribeRepairs = await deps.vault.listener.subscribe(REPAIR_CHANNEL, {
      onNotify: repairRequested,
      resync: () => {
        deps.vault.manifestRepairs.openRunKeys().then(
          (keys) => keys.forEach(repairRequested),
          (err: unknown) =>
            log.warn({ err }, 'could not list open manifest repairs; retried on the next reconnect'),
        );
        sweep();
      },
    });
    try {
      await inf.waitForSync(signal);
      synced = true;
      sweep();
      const reconcile = async (key: string): Promise<ReconcileResult | undefined> => {
        const { namespace, name } = splitKey(key);
        try {
          const result = await reconcileRun(
            {
              api,
              vault: deps.vault,
              recorder,
              logger: log,
              observeAibom: (s) => metrics.observeAibomSeconds(s),
              written,
            },
            namespace ?? '',
            name,
          );
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
      const timeoutMs = deps.reconcileTimeoutMs ?? DEFAULT_RECONCILE_TIMEOUT_MS;
      const runs = runWorkers(
        queue,
        deps.workers ?? 4,
        withReconcileDeadline(reconcile, timeoutMs, (key) => {
          reconcileOverruns.inc();
          log.error(
            { key, timeoutMs },
            'reconcile exceeded its deadline; the worker moves on and the Run is retried with backoff',
          );
        }),
        { logger: log, registry: deps.registry, name: 'runs', signal },
      );
      const projection = deps.transparency
        ? runProjection(
            deps,
            recorder,
            inf,
            events,
            deps.logger.child({ component: 'transparency-projection', identity }),
            signal,
          )
        : Promise.resolve();
      const checkpoints = deps.checkpoints
        ? runCheckpointer(
            {
              vault: deps.vault,
              signer: currentRuntimeSigner,
              caCertificates: () => currentRuntimeSigner().caCertificates,
              intervalMs: deps.checkpoints.intervalMs,
              // The newest checkpoint is also kept in the object store: a database that lost
              // acknowledged records is seen before anything is signed over them.
              witness: bucketWitness(
                deps.blobs,
                () => currentRuntimeSigner().caCertificates ?? [],
                log,
                witnessKey(deps.vault.deriveKey('checkpoint-witness').subarray(0, 16).toString('hex')),
              ),
              ...(deps.checkpoints.acceptLost ? { acceptLost: deps.checkpoints.acceptLost } : {}),
              ...(deps.transparency ? { publisher: deps.transparency.publisher } : {}),
              logger: log,
              registry: deps.registry,
            },
            signal,
          )
        : Promise.resolve();
      await Promise.all([runs, projection, checkpoints]);
    } finally {
      unsubscribeRepairs();
      informer = undefined;
      await inf.stop();
      log.info('term ended: informer and workers stopped');
    }
  };

  const elector = new LeaderElector({
    store: kubeLeaseStore(deps.client, deps.namespace, deps.leaseName ?? 'aibom-vault-controller'),
    identity,
    // The elector binds the lease and the identity itself.
    logger: deps.logger.child({ component: 'leader-election' }),
    registry: deps.registry,
    onStartedLeading: lead,
    ...(deps.lease
      ? {
          leaseDurationSeconds: deps.lease.durationSeconds,
          renewDeadlineSeconds: deps.lease.renewDeadlineSeconds,
          retryPeriodSeconds: deps.lease.retryPeriodSeconds,
        }
      : {}),
  });
  const stopping = new AbortController();
  const running = elector
    .run(stopping.signal)
    .catch((err: unknown) => log.error({ err }, 'leader election ended'));
  // The SCITT worker runs in every replica (jobs are claimed with SKIP LOCKED), leader or not, and
  // is woken by jobs enqueued in any of them.
  let worker: Promise<void> = Promise.resolve();
  if (deps.transparency) {
    worker = createWorker({
      jobs: deps.vault.transparencyJobs,
      listener: deps.vault.listener,
      publisher: deps.transparency.publisher,
      // The worker binds its own component.
      logger: deps.logger.child({ identity }),
    })
      .run(stopping.signal)
      .catch((err: unknown) => log.error({ err }, 'transparency worker ended'));
  }
  // The record stamper too (ADR 0015): jobs are claimed with SKIP LOCKED, and every replica hears
  // of records stored by any of them.
  let stamper: Promise<void> = Promise.resolve();
  if (deps.timestamper) {
    stamper = createStamper({
      timestamps: deps.vault.timestamps,
      attestations: deps.vault.attestations,
      signers: deps.vault.signers,
      tsa: deps.timestamper,
      listener: deps.vault.listener,
      logger: deps.logger,
      registry: deps.registry,
    })
      .run(stopping.signal)
      .catch((err: unknown) => log.error({ err }, 'record stamper ended'));
  }
  return {
    ready: () =>
      elector.isLeader() && informer && !informer.hasSynced()
        ? Promise.reject(new Error('Run informer not synced'))
        : Promise.resolve(),
    isLeader: () => elector.isLeader(),
    stop: async () => {
      stopping.abort(new Error('shutdown'));
      await running;
      await worker;
      await stamper;
      // Pending event counts (series) are written before the process exits.
      await events.close();
    },
  };
}
