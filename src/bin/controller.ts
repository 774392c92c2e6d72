#!/usr/bin/env node
import { Registry, collectDefaultMetrics } from 'prom-client';
import { loadConfig } from '../config/index.ts';
import { startController } from '../controller/manager.ts';
import { isNotFound, kubeClient, resourcePath } from '../controller/runtime/index.ts';
import { DependencyHealth } from '../health/dependencies.ts';
import { runUntilSignal } from './lifecycle.ts';
import { createLogger } from '../log/index.ts';
import { startOpsServer } from './ops-server.ts';
import { signerFromTlsSecretData } from '../signing/index.ts';
import { namespaceSigners } from '../signing/namespace-signers.ts';
import {
  blobStoreFrom,
  fatalConfig,
  kubeConfigFrom,
  loadServiceSigner,
  openVaultFrom,
  transparencyFrom,
} from './common.ts';

const config = fatalConfig(() => loadConfig('controller'));
const logger = createLogger('controller', config.LOG_LEVEL);

await runUntilSignal(logger, async () => {
  const registry = new Registry();
  collectDefaultMetrics({ register: registry });
  const kc = kubeConfigFrom(config);
  const vault = await openVaultFrom(config, logger, 'aibom-vault-controller');
  const blobs = blobStoreFrom(config);
  const signer = await loadServiceSigner(config, kc);
  logger.info({ keyId: signer.keyId, algorithm: signer.algorithm }, 'service signer loaded');
  // Every request of the controller to the API server has a deadline (watches: the watchdog).
  const client = kubeClient(kc, { timeoutMs: config.KUBE_TIMEOUT_MS });
  const envelopeSigner = namespaceSigners(
    signer,
    async (namespace) => {
      try {
        const s = await client.request<{ data?: Record<string, string> }>({
          method: 'GET',
          path: resourcePath(
            { group: '', version: 'v1', plural: 'secrets', kind: 'Secret' },
            { namespace, name: config.CUSTOMER_SIGNER_SECRET },
          ),
        });
        return s.data ?? null;
      } catch (err) {
        if (isNotFound(err)) return null;
        throw err;
      }
    },
    (data) => signerFromTlsSecretData(data),
  );
  const transparency = config.SERVICE_TRANSPARENCY_WRITER
    ? await transparencyFrom(config, kc, vault, signer, logger)
    : undefined;
  if (transparency) logger.info({ backend: config.SCITT_BACKEND }, 'transparency writer on');
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
    vault,
    blobs,
    runtimeSigner: signer,
    envelopeSigner,
    capabilityTokens: config.SERVICE_CAPABILITY_TOKENS,
    logger,
    registry,
    namespace: config.POD_NAMESPACE,
    leaseName: config.LEADER_ELECTION_LEASE,
    checkpoints: { intervalMs: config.VAULT_CHECKPOINT_INTERVAL_SECONDS * 1000 },
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
  logger.info({ port: ops.port }, 'controller started');
  return async () => {
    await controller.stop();
    await ops.close();
    await vault.close();
  };
});
