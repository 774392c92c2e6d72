import { randomBytes } from 'node:crypto';
import type { Registry } from 'prom-client';
import type { BlobStore } from '../blob/store.ts';
import { checkpointerLoop } from '../checkpoint/checkpointer.ts';
import { partitionLoop, type PartitionLoopConfig } from '../export/retention-loop.ts';
import { exportKeys } from '../export/service-keys.ts';
import { bucketWitness, witnessKey } from '../checkpoint/witness.ts';
import type { Run } from '../crd/run.ts';
import type { DependencyHealth } from '../health/dependencies.ts';
import {
  eventRecorder,
  kubeLeaseStore,
  LeaderElector,
  type EventRecorder,
  type Informer,
  type KubeClient,
  type LeaderElectorOptions,
} from '../kube/index.ts';
import type { Logger } from '../log/index.ts';
import { recordingMetrics, signerMetrics, transparencyMetrics } from '../metrics/domain.ts';
import type { Loop } from '../queue/index.ts';
import { CLAIM_GENERATOR, createRecorder, type Recorder } from '../recorder/index.ts';
import type { KeySigner } from '../signing/index.ts';
import type { EnvelopeSigner } from '../signing/namespace-signers.ts';
import type { Timestamper } from '../timestamp/index.ts';
import { createStamper } from '../timestamp/stamper.ts';
import type { Transparency } from '../transparency/setup.ts';
import { createWorker } from '../transparency/worker.ts';
import type { PlanCacheMode, Vault } from '../vault/index.ts';
import { runController } from './run/controller.ts';
import { runInformer } from './run/informer.ts';
import { whileLeading, type LeaderLoop } from './term.ts';
import { alarmEvents, witnessingLoop, type WitnessingConfig } from '../witness/loop.ts';
import { projectionController } from './transparency/controller.ts';

import type { ResourcePolicy } from './run/resources.ts';
/**
 * How the controller's vault sessions plan their statements (src/vault/pool.ts `plans`): generic
 * plans where PostgreSQL estimates them no dearer than custom ones. The controller has none of the
 * API's array filters: a Run's reconcile makes equality lookups on indexed columns (a Run's records
 * by run id, records and claims by key, the chain head), whose plans do not depend on the values;
 * planning one over every attached partition cost several times its execution (about 0.5 ms against
 * 0.1 ms for a Run's records, 5 partitions), and the append's probe is planned while the chain head
 * is locked. The API keeps custom plans for its filters.
 */
export const CONTROLLER_PLANS: PlanCacheMode = 'auto';

export { DEFAULT_RECONCILE_TIMEOUT_MS, RUN_MAX_BACKOFF_MS } from './run/controller.ts';

/** What the controller process is given (src/bin/controller.ts reads it from the configuration). */
export interface ControllerDeps {
  readonly client: KubeClient;
  readonly vault: Vault;
  readonly blobs: BlobStore;
  /** The runtime trust signer; a function when it follows its Secret (read once per AIBOM). */
  readonly runtimeSigner: KeySigner | (() => KeySigner);
  /** A namespace's envelope signer and whose key it is (src/signing/namespace-signers.ts). */
  readonly envelopeSigner: (namespace: string) => Promise<EnvelopeSigner>;
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
  /**
   * The vault's monthly partitions (src/export/retention-loop.ts): the leader creates them ahead and
   * retires the ones past VAULT_RETENTION_MONTHS to the object store.
   */
  readonly partitions?: PartitionLoopConfig;
  /**
   * Witnessed logs (src/witness, TLOG_NOTE_SECRET): the leader signs C2SP checkpoints of both trees
   * and pushes them to the configured witnesses; an alarm is a Warning Event on the Lease.
   */
  readonly witnessing?: WitnessingConfig;
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
  /**
   * Which Attestation resources Runs get and for how long (ATTESTATION_RESOURCES,
   * ATTESTATION_RESOURCE_RETENTION; src/controller/run/resources.ts). Default: perRecord, kept.
   */
  readonly attestationResources?: ResourcePolicy;
}

export interface RunningController {
  /** Ready = not leading (a warm standby), or leading with a synced informer. */
  ready(): Promise<void>;
  isLeader(): boolean;
  stop(): Promise<void>;
}

/**
 * The controller process: builds its two lists of loops and hands them to the manager. While
 * leading: the Run controller, the transparency projection (SERVICE_TRANSPARENCY_WRITER) and the
 * checkpointer. On every replica, leader or not: the SCITT worker and the record stamper (TSA_URL),
 * whose jobs are claimed with SKIP LOCKED and which are woken by work enqueued in any replica
 * (ADR 0015).
 */
export function startController(deps: ControllerDeps): RunningController {
  const identity = `${deps.podName ?? 'controller'}-${randomBytes(3).toString('hex')}`;
  // Children bind only keys their parent lacks: pino writes a key once per binding, and strict log
  // pipelines refuse a line with a duplicate key (test/integration/observability.test.ts).
  const log = deps.logger.child({ component: 'controller', identity });
  const shared = sharedServices(deps, identity, log);
  return manage({
    elector: {
      store: kubeLeaseStore(deps.client, deps.namespace, deps.leaseName ?? 'aibom-vault-controller'),
      identity,
      // The elector binds the lease and the identity itself.
      logger: deps.logger.child({ component: 'leader-election' }),
      registry: deps.registry,
      ...(deps.lease
        ? {
            leaseDurationSeconds: deps.lease.durationSeconds,
            renewDeadlineSeconds: deps.lease.renewDeadlineSeconds,
            retryPeriodSeconds: deps.lease.retryPeriodSeconds,
          }
        : {}),
    },
    runCache: () =>
      runInformer({
        client: deps.client,
        logger: log,
        registry: deps.registry,
        ...(deps.watchNamespace !== undefined ? { watchNamespace: deps.watchNamespace } : {}),
        ...(deps.runLabelSelector !== undefined ? { labelSelector: deps.runLabelSelector } : {}),
      }),
    whileLeading: leaderLoops(deps, shared),
    everyReplica: replicaLoops(deps, identity),
    logger: log,
    // Pending event counts (series) are written before the process exits.
    onStopped: () => shared.events.close(),
  });
}

/** What the leader's loops share: the process's Event recorder, recorder and metrics. */
interface Shared {
  readonly identity: string;
  readonly log: Logger;
  readonly events: EventRecorder;
  readonly recorder: Recorder;
  readonly observeAibomSeconds: (seconds: number) => void;
  readonly currentRuntimeSigner: () => KeySigner;
}

function sharedServices(deps: ControllerDeps, identity: string, log: Logger): Shared {
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
  const observeAibomSeconds = (s: number): void => metrics.observeAibomSeconds(s);
  return { identity, log, events, recorder, observeAibomSeconds, currentRuntimeSigner };
}

/** The loops that run while this replica leads. */
function leaderLoops(deps: ControllerDeps, shared: Shared): LeaderLoop[] {
  const { client, vault, registry } = deps;
  const { events, recorder, log } = shared;
  const loops: LeaderLoop[] = [
    runController({
      client,
      vault,
      recorder,
      events,
      logger: log,
      registry,
      observeAibomSeconds: shared.observeAibomSeconds,
      ...(deps.workers !== undefined ? { workers: deps.workers } : {}),
      ...(deps.watchNamespace !== undefined ? { watchNamespace: deps.watchNamespace } : {}),
      ...(deps.reconcileTimeoutMs !== undefined ? { reconcileTimeoutMs: deps.reconcileTimeoutMs } : {}),
      ...(deps.health !== undefined ? { health: deps.health } : {}),
      ...(deps.attestationResources !== undefined ? { resources: deps.attestationResources } : {}),
    }),
  ];
  if (deps.transparency) {
    const logger = deps.logger.child({ component: 'transparency-projection', identity: shared.identity });
    loops.push(projectionController({ client, vault, recorder, events, logger, registry }));
  }
  if (deps.checkpoints) {
    const publisher = deps.transparency?.publisher;
    const checkpointer = checkpointerLoop({
      vault,
      signer: shared.currentRuntimeSigner,
      caCertificates: () => shared.currentRuntimeSigner().caCertificates,
      intervalMs: deps.checkpoints.intervalMs,
      ...(publisher ? { publisher } : {}),
      logger: log,
      registry,
      // The newest checkpoint is also kept in the object store: a database that lost acknowledged
      // records is seen before anything is signed over the new history (docs/failover.md).
      witness: bucketWitness(
        deps.blobs,
        () => shared.currentRuntimeSigner().caCertificates ?? [],
        log,
        witnessKey(vault.deriveKey('checkpoint-witness').subarray(0, 16).toString('hex')),
      ),
      ...(deps.checkpoints.acceptLost ? { acceptLost: deps.checkpoints.acceptLost } : {}),
    });
    loops.push(whileLeading(checkpointer));
  }
  if (deps.partitions) {
    const keys = exportKeys({
      vault,
      signer: shared.currentRuntimeSigner,
      ...(deps.transparency ? { transparency: deps.transparency } : {}),
    });
    loops.push(
      whileLeading(
        partitionLoop(
          {
            vault,
            blobs: deps.blobs,
            signer: shared.currentRuntimeSigner,
            logKeys: [],
            ensureServiceKeys: keys.ensureServiceKeys,
            claimGenerator: CLAIM_GENERATOR,
            // Archives are the records as stored: the export guard's artifact checks do not apply to
            // a retirement (nothing leaves to a caller), so signed manifests are not required here.
            requireSignedExports: false,
            trustAnchors: [],
            logger: log,
          },
          deps.partitions,
        ),
      ),
    );
  }
  if (deps.witnessing) {
    const lease = { namespace: deps.namespace, name: deps.leaseName ?? 'aibom-vault-controller' };
    loops.push(
      whileLeading(
        witnessingLoop({
          vault,
          config: deps.witnessing,
          logger: log,
          registry,
          onAlarm: alarmEvents(events, lease),
        }),
      ),
    );
  }
  return loops;
}

/** The loops that run on every replica, leader or not. */
function replicaLoops(deps: ControllerDeps, identity: string): Loop[] {
  const { vault } = deps;
  const loops: Loop[] = [];
  if (deps.transparency) {
    // The worker binds its own component.
    const logger = deps.logger.child({ identity });
    const publisher = deps.transparency.publisher;
    loops.push(createWorker({ jobs: vault.transparencyJobs, listener: vault.listener, publisher, logger }));
  }
  if (deps.timestamper) {
    loops.push(
      createStamper({
        timestamps: vault.timestamps,
        attestations: vault.attestations,
        signers: vault.signers,
        tsa: deps.timestamper,
        listener: vault.listener,
        logger: deps.logger,
        registry: deps.registry,
      }),
    );
  }
  return loops;
}

export interface ManagerOptions {
  /** The Lease and its timings; the manager supplies what a term runs. */
  readonly elector: Omit<LeaderElectorOptions, 'onStartedLeading'>;
  /** A new Run cache for each term (an informer runs once). */
  readonly runCache: () => Informer<Run>;
  /** Run while this replica leads, once the term's cache has synced. */
  readonly whileLeading: readonly LeaderLoop[];
  /** Run on every replica, leader or not, from start to stop. */
  readonly everyReplica: readonly Loop[];
  readonly logger: Logger;
  /** After every loop has ended, on stop. */
  readonly onStopped?: () => Promise<void>;
}

/**
 * Leader election and two lists of loops. Each term: a fresh Run cache, started and synced, then
 * every leader loop with the term; on lost leadership the term's signal stops them and the cache
 * is dropped (a standby keeps no cache: see ADR 0002). The other list runs on every replica until
 * stop. A loop that fails is logged; the others keep running.
 */
export function manage(options: ManagerOptions): RunningController {
  const log = options.logger;
  let informer: Informer<Run> | undefined;

  const lead = async (signal: AbortSignal): Promise<void> => {
    log.info('leading: starting the Run informer and workers');
    const runs = options.runCache();
    informer = runs;
    runs.start();
    try {
      await runs.waitForSync(signal);
      await Promise.all(options.whileLeading.map((loop) => loop.run({ signal, runs })));
    } finally {
      informer = undefined;
      await runs.stop();
      log.info('term ended: informer and workers stopped');
    }
  };

  const elector = new LeaderElector({ ...options.elector, onStartedLeading: lead });
  const stopping = new AbortController();
  const running = elector
    .run(stopping.signal)
    .catch((err: unknown) => log.error({ err }, 'leader election ended'));
  const replicas = options.everyReplica.map((loop) =>
    loop.run(stopping.signal).catch((err: unknown) => log.error({ err }, `${loop.name} ended`)),
  );
  return {
    ready: () =>
      elector.isLeader() && informer && !informer.hasSynced()
        ? Promise.reject(new Error('Run informer not synced'))
        : Promise.resolve(),
    isLeader: () => elector.isLeader(),
    stop: async () => {
      stopping.abort(new Error('shutdown'));
      await running;
      await Promise.all(replicas);
      await options.onStopped?.();
    },
  };
}
