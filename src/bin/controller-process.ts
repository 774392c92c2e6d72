import { Registry, collectDefaultMetrics } from 'prom-client';
import type { Config } from '../config/index.ts';
import { CONTROLLER_PLANS, startController } from '../controller/manager.ts';
import { kubeClient } from '../kube/index.ts';
import { DependencyHealth } from '../health/dependencies.ts';
import type { Logger } from '../log/index.ts';
import { startHeapRelease } from './heap-release.ts';
import { startOpsServer } from './ops-server.ts';
import { namespaceSigners } from '../signing/namespace-signers.ts';
import { watchCustomerSigners } from '../signing/watch.ts';
import type { Stop } from './lifecycle.ts';
import {
  blobStoreFrom,
  kubeConfigFrom,
  openVaultFrom,
  serviceSignerFrom,
  timestamperFrom,
  noteKeyFrom,
  transparencyFrom,
} from './common.ts';

/**
 * The controller process from its configuration and root logger: everything src/bin/controller.ts
 * starts, returning how to stop it. Apart from the entry point so that a test can run the very same
 * wiring in-process (test/integration/logs.test.ts reads every logger it creates).
 */
export async function startControllerProcess(config: Config, logger: Logger): Promise<Stop> {
  const registry = new Registry();
  collectDefaultMetrics({ register: registry });
  const kc = await kubeConfigFrom(config);
  const vault = await openVaultFrom(config, logger, 'aibom-vault-controller', {
    plans: CONTROLLER_PLANS,
  });
  const blobs = blobStoreFrom(config);
  // Both follow their Secrets while running (renewals need no restart): src/signing/watch.ts.
  const signer = await serviceSignerFrom(config, kc, logger, registry);
  logger.info(
    { keyId: signer.current().keyId, algorithm: signer.current().algorithm },
    'service signer loaded',
  );
  // Every request of the controller to the API server has a deadline (watches: the watchdog).
  const client = kubeClient(kc, { timeoutMs: config.KUBE_TIMEOUT_MS });
  const customers = watchCustomerSigners({
    client,
    name: config.CUSTOMER_SIGNER_SECRET,
    logger: logger.child({ component: 'customer-signers' }),
    registry,
  });
  const envelopeSigner = namespaceSigners(
    () => signer.current(),
    (namespace) => customers.signerOf(namespace),
  );
  const timestamper = await timestamperFrom(config);
  if (timestamper) logger.info({ tsa: timestamper.url }, 'AIBOM signatures and records are time-stamped');
  const transparency = config.SERVICE_TRANSPARENCY_WRITER
    ? await transparencyFrom(config, kc, vault, signer, logger)
    : undefined;
  if (transparency) logger.info({ backend: config.SCITT_BACKEND }, 'transparency writer on');
  // Witnessed logs: C2SP checkpoints of both trees, pushed to TLOG_WITNESSES (docs/transparency.md).
  const noteKey = await noteKeyFrom(config, kc);
  if (noteKey) {
    logger.info(
      { origin: config.TLOG_ORIGIN, witnesses: config.TLOG_WITNESSES.map((w) => w.url) },
      'C2SP checkpoints signed and pushed to witnesses',
    );
  }
  // /readyz: the informer (when leading), and PostgreSQL and the object store answering within
  // their deadlines; reconciles that fail on either mark it down too (aibom_vault_dependency_up).
  const health = new DependencyHealth({
    registry,
    probes: { vault: () => vault.ping(), object_store: () => blobs.ping() },
  });
  const controller = startController({
    ...(transparency ? { transparency } : {}),
    client,
    health,
    reconcileTimeoutMs: config.RECONCILE_TIMEOUT_MS,
    attestationResources: {
      mode: config.ATTESTATION_RESOURCES,
      ...(config.ATTESTATION_RESOURCE_RETENTION !== undefined
        ? { retentionMs: config.ATTESTATION_RESOURCE_RETENTION }
        : {}),
    },
    vault,
    blobs,
    runtimeSigner: () => signer.current(),
    envelopeSigner,
    ...(timestamper ? { timestamper } : {}),
    capabilityTokens: config.SERVICE_CAPABILITY_TOKENS,
    logger,
    registry,
    namespace: config.POD_NAMESPACE,
    leaseName: config.LEADER_ELECTION_LEASE,
    checkpoints: {
      intervalMs: config.VAULT_CHECKPOINT_INTERVAL_SECONDS * 1000,
      ...(config.VAULT_ACCEPT_LOST_CHECKPOINT ? { acceptLost: config.VAULT_ACCEPT_LOST_CHECKPOINT } : {}),
    },
    partitions: {
      ahead: config.VAULT_PARTITIONS_AHEAD,
      months: config.VAULT_RETENTION_MONTHS,
      drop: config.VAULT_RETENTION_DROP,
      prefix: config.VAULT_ARCHIVE_PREFIX,
      intervalMs: 3_600_000,
    },
    ...(noteKey
      ? {
          witnessing: {
            noteKey,
            originPrefix: config.TLOG_ORIGIN,
            witnesses: config.TLOG_WITNESSES,
            timeoutMs: config.TLOG_WITNESS_TIMEOUT_MS,
            intervalMs: config.VAULT_CHECKPOINT_INTERVAL_SECONDS * 1000,
          },
        }
      : {}),
    ...(config.POD_NAME !== undefined ? { podName: config.POD_NAME } : {}),
    ...(config.WATCH_NAMESPACE !== undefined ? { watchNamespace: config.WATCH_NAMESPACE } : {}),
  });
  const ops = await startOpsServer({
    logger: logger.child({ component: 'ops' }),
    host: config.METRICS_HOST,
    port: config.METRICS_PORT,
    registry,
    ready: async () => {
      await controller.ready();
      await health.check();
    },
  });
  // Its heap peaks while it lists and records a large cluster, then shrinks to its cache.
  const heapRelease = startHeapRelease({ logger: logger.child({ component: 'heap' }) });
  logger.info({ port: ops.port }, 'controller started');
  return async () => {
    heapRelease.stop();
    await controller.stop();
    await customers.stop();
    await signer.stop();
    await ops.close();
    await vault.close();
  };
}
