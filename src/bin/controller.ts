#!/usr/bin/env node
import { CoreV1Api } from '@kubernetes/client-node';
import { Registry, collectDefaultMetrics } from 'prom-client';
import { loadConfig } from '../config/index.ts';
import { startController } from '../controller/manager.ts';
import { kubeClient } from '../controller/runtime/index.ts';
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
  const core = kc.makeApiClient(CoreV1Api);
  const envelopeSigner = namespaceSigners(
    signer,
    async (namespace) => {
      try {
        const s = await core.readNamespacedSecret({ namespace, name: config.CUSTOMER_SIGNER_SECRET });
        return s.data ?? null;
      } catch (err) {
        if ((err as { code?: number }).code === 404) return null;
        throw err;
      }
    },
    (data) => signerFromTlsSecretData(data),
  );
  const transparency = config.SERVICE_TRANSPARENCY_WRITER
    ? await transparencyFrom(config, kc, vault, signer, logger)
    : undefined;
  if (transparency) logger.info({ backend: config.SCITT_BACKEND }, 'transparency writer on');
  const controller = startController({
    ...(transparency ? { transparency } : {}),
    client: kubeClient(kc),
    vault,
    blobs,
    runtimeSigner: signer,
    envelopeSigner,
    logger,
    registry,
    namespace: config.POD_NAMESPACE,
    leaseName: config.LEADER_ELECTION_LEASE,
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
      await vault.ping();
    },
  });
  logger.info({ port: ops.port }, 'controller started');
  return async () => {
    await controller.stop();
    await ops.close();
    await vault.close();
  };
});
