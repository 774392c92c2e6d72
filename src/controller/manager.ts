import { randomBytes } from 'node:crypto';
import { Histogram, type Registry } from 'prom-client';
import type { Run } from '../api/run.ts';
import type { BlobStore } from '../blob/store.ts';
import type { Logger } from '../log/index.ts';
import type { KeySigner, Signer } from '../signing/index.ts';
import type { Transparency } from '../transparency/setup.ts';
import { createWorker } from '../transparency/worker.ts';
import type { Vault } from '../vault/index.ts';
import { kubeRunApi, RUN_TYPE } from './run/kube-api.ts';
import { reconcileRun } from './run/reconciler.ts';
import {
  eventRecorder,
  Informer,
  kubeLeaseStore,
  kubeListerWatcher,
  LeaderElector,
  objectKey,
  resourcePath,
  runWorkers,
  splitKey,
  defaultControllerRateLimiter,
  withoutManagedFields,
  WorkQueue,
  type KubeClient,
} from './runtime/index.ts';

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
  /** SERVICE_TRANSPARENCY_WRITER=1: enqueue with every append, run the SCITT worker, reflect state. */
  readonly transparency?: Transparency;
  /** Shorter lease timings for tests. */
  readonly lease?: { durationSeconds: number; renewDeadlineSeconds: number; retryPeriodSeconds: number };
}

export interface RunningController {
  /** Re-reconcile the Run an attestation belongs to (e.g. after its SCITT job was published). */
  touchAttestation(attestationId: string): Promise<void>;
  /** Ready = not leading (a warm standby), or leading with a synced informer. */
  ready(): Promise<void>;
  isLeader(): boolean;
  stop(): Promise<void>;
}

/**
 * Leader election → (while leading) Run informer → keyed work queue → reconcile workers. Only the
 * leader reconciles; on lost leadership the term's signal stops the workers and the informer.
 */
export function startController(deps: ControllerDeps): RunningController {
  const identity = `${deps.podName ?? 'controller'}-${randomBytes(3).toString('hex')}`;
  const log = deps.logger.child({ component: 'controller', identity });
  const pipeline = new Histogram({
    name: 'aibom_pipeline_seconds',
    help: 'Time from starting the AIBOM pipeline of a terminal Run to the AIBOM being recorded',
    buckets: [0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2, 5, 10],
    registers: [deps.registry],
  });
  const events = eventRecorder({
    client: deps.client,
    reportingController: 'vault.service.dev/controller',
    reportingInstance: identity,
    logger: log,
  });
  const api = kubeRunApi(deps.client, events);
  let informer: Informer<Run> | undefined;
  let activeQueue: WorkQueue | undefined;

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
        {
          // Reconciles re-read the live Run: the cache only needs to know what exists and changed.
          transform: withoutManagedFields,
        },
      ),
      logger: log,
      registry: deps.registry,
    });
    informer = inf;
    activeQueue = queue;
    const enqueue = (r: Run): void => queue.add(objectKey(r));
    inf.addHandler({ onAdd: enqueue, onUpdate: (_o, n) => enqueue(n), onDelete: enqueue });
    inf.start();
    try {
      await inf.waitForSync(signal);
      await runWorkers(
        queue,
        deps.workers ?? 4,
        async (key) => {
          const { namespace, name } = splitKey(key);
          return reconcileRun(
            {
              api,
              vault: deps.vault,
              blobs: deps.blobs,
              runtimeSigner: deps.runtimeSigner,
              envelopeSigner: deps.envelopeSigner,
              logger: log,
              observePipeline: (s) => pipeline.observe(s),
              ...(deps.transparency
                ? {
                    transparency: {
                      onAppend: deps.transparency.enqueueInTransaction,
                      committed: deps.transparency.committed,
                    },
                  }
                : {}),
            },
            namespace ?? '',
            name,
          );
        },
        { logger: log, registry: deps.registry, name: 'runs', signal },
      );
    } finally {
      informer = undefined;
      activeQueue = undefined;
      await inf.stop();
      log.info('term ended: informer and workers stopped');
    }
  };

  const elector = new LeaderElector({
    store: kubeLeaseStore(deps.client, deps.namespace, deps.leaseName ?? 'aibom-vault-controller'),
    identity,
    logger: log,
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
  // The SCITT worker runs in every replica (jobs are claimed with SKIP LOCKED), leader or not.
  let worker: Promise<void> = Promise.resolve();
  if (deps.transparency) {
    const w = createWorker({
      pool: deps.vault.pool,
      publisher: deps.transparency.publisher,
      logger: log.child({ component: 'scitt-worker' }),
    });
    // Jobs enqueued by this process are claimed as soon as their append commits, not after a poll.
    deps.transparency.onCommitted(() => w.wake());
    worker = w.run(stopping.signal).catch((err: unknown) => log.error({ err }, 'transparency worker ended'));
  }
  return {
    ready: () =>
      elector.isLeader() && informer && !informer.hasSynced()
        ? Promise.reject(new Error('Run informer not synced'))
        : Promise.resolve(),
    isLeader: () => elector.isLeader(),
    touchAttestation: async (attestationId) => {
      const queue = activeQueue;
      if (!queue) return;
      const { rows } = await deps.vault.pool.query<{ namespace: string; name: string }>(
        'SELECT r.namespace, r.name FROM attestations a JOIN runs r ON r.id = a.run_id WHERE a.id = $1',
        [attestationId],
      );
      if (rows[0]) queue.add(`${rows[0].namespace}/${rows[0].name}`);
    },
    stop: async () => {
      stopping.abort(new Error('shutdown'));
      await running;
      await worker;
      // Pending event counts (series) are written before the process exits.
      await events.close();
    },
  };
}
