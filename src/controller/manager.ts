import { randomBytes } from 'node:crypto';
import type { Registry } from 'prom-client';
import type { Run } from '../api/run.ts';
import type { BlobStore } from '../blob/store.ts';
import type { Logger } from '../log/index.ts';
import { recordingMetrics, signerMetrics, transparencyMetrics } from '../metrics/domain.ts';
import { createRecorder } from '../recorder/index.ts';
import type { KeySigner, Signer } from '../signing/index.ts';
import type { Transparency } from '../transparency/setup.ts';
import { createWorker } from '../transparency/worker.ts';
import { TRANSPARENCY_CHANNEL, type Vault } from '../vault/index.ts';
import { kubeRunApi, RUN_TYPE } from './run/kube-api.ts';
import type { Written } from './run/plan.ts';
import { reconcileRun } from './run/reconciler.ts';
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
} from './runtime/index.ts';
import { kubeProjectionApi } from './transparency/kube-api.ts';
import { mayNeedProjection, projectionTargetsChanged, projectRun } from './transparency/projection.ts';

/** Longest wait between retries of one Run (see the work queue below). */
export const RUN_MAX_BACKOFF_MS = 30_000;

export interface ControllerDeps {
  readonly client: KubeClient;
  readonly vault: Vault;
  readonly blobs: BlobStore;
  readonly runtimeSigner: KeySigner;
  readonly envelopeSigner: (namespace: string) => Promise<Signer>;
  readonly logger: Logger;
  readonly registry: Registry;
  /** Namespace of the leader-election Lease. */
  readonly namespace: string;
  /** Pod name; a random suffix keeps two processes of one pod name apart. */
  readonly podName?: string;
  readonly workers?: number;
  /** Watch Runs of one namespace only (WATCH_NAMESPACE); all namespaces when unset. */
  readonly watchNamespace?: string;
  /** Name of the leader-election Lease (one per independent controller deployment). */
  readonly leaseName?: string;
  /**
   * SERVICE_TRANSPARENCY_WRITER=1: records enqueue SCITT jobs, the worker publishes them (every
   * replica) and the leader projects their state onto the resources.
   */
  readonly transparency?: Transparency;
  /** Shorter lease timings for tests. */
  readonly lease?: { durationSeconds: number; renewDeadlineSeconds: number; retryPeriodSeconds: number };
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
      (runId) => projectRun({ api, jobs: deps.vault.transparencyJobs, logger: log }, runId),
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
  signerMetrics(deps.registry, { service: deps.runtimeSigner });
  transparencyMetrics(
    deps.registry,
    {
      stats: () => deps.vault.transparencyJobs.stats(),
      oldestQueuedAgeSeconds: () => deps.vault.transparencyJobs.oldestQueuedAgeSeconds(),
    },
    (err) => log.warn({ err }, 'transparency metrics not read'),
  );
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
    enqueueTransparency: deps.transparency !== undefined,
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
        { transform: withoutManagedFields },
      ),
      logger: log,
      registry: deps.registry,
    });
    informer = inf;
    const api = kubeRunApi(deps.client, events, (ns, name) => inf.get(`${ns}/${name}`));
    // The Runs as the reconciler left them, this term: the events of its own writes are not
    // reconciled again (ADR 0009).
    const written = new Map<string, Written>();
    const enqueue = (r: Run): void => queue.add(objectKey(r));
    inf.addHandler({ onAdd: enqueue, onUpdate: (_o, n) => enqueue(n), onDelete: enqueue });
    inf.start();
    try {
      await inf.waitForSync(signal);
      const runs = runWorkers(
        queue,
        deps.workers ?? 4,
        async (key) => {
          const { namespace, name } = splitKey(key);
          await reconcileRun(
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
        },
        { logger: log, registry: deps.registry, name: 'runs', signal },
      );
      const projection = deps.transparency
        ? runProjection(
            deps,
            inf,
            events,
            deps.logger.child({ component: 'transparency-projection', identity }),
            signal,
          )
        : Promise.resolve();
      await Promise.all([runs, projection]);
    } finally {
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
      // Pending event counts (series) are written before the process exits.
      await events.close();
    },
  };
}
