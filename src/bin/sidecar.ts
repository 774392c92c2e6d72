#!/usr/bin/env node
import { readFile } from 'node:fs/promises';
import { collectDefaultMetrics, Registry } from 'prom-client';
import { startOpsServer } from './ops-server.ts';
import { parseCertificates } from '../signing/index.ts';
import { loadConfig } from '../config/index.ts';
import { buildApp } from '../http/app.ts';
import { kubernetesAuthorizer } from '../http/auth/authorizer.ts';
import { runUntilSignal } from './lifecycle.ts';
import { createLogger } from '../log/index.ts';
import { signerMetrics } from '../metrics/domain.ts';
import {
  blobStoreFrom,
  fatalConfig,
  kubeConfigFrom,
  loadServiceSigner,
  openVaultFrom,
  transparencyFrom,
} from './common.ts';

const config = fatalConfig(() => loadConfig('sidecar'));
const logger = createLogger('sidecar', config.LOG_LEVEL);

await runUntilSignal(logger, async () => {
  const vault = await openVaultFrom(config, logger, 'aibom-vault-sidecar');
  const kc = kubeConfigFrom(config);
  const blobs = blobStoreFrom(config);
  // The signer's CA is the trust anchor every outgoing C2PA manifest must chain to.
  const signer = await loadServiceSigner(config, kc);
  // Always wired: the sidecar serves this deployment's local log over SCRAPI and answers
  // POST /v1/attestations/scitt; only the controller enqueues (SERVICE_TRANSPARENCY_WRITER).
  const transparency = await transparencyFrom(config, kc, vault, signer, logger);
  const extra =
    config.SCITT_TRUST_ANCHORS !== undefined
      ? parseCertificates(await readFile(config.SCITT_TRUST_ANCHORS, 'utf8'), 'SCITT_TRUST_ANCHORS')
      : [];
  const registry = new Registry();
  collectDefaultMetrics({ register: registry });
  signerMetrics(registry, { service: signer });
  const app = await buildApp({
    registry,
    transparency,
    scrapiTrustAnchors: [...signer.caCertificates, ...extra],
    logger,
    vault,
    blobs,
    authorizer: kubernetesAuthorizer(kc),
    listNamespaces: () => vault.attestations.namespaces(),
    requireSignedExports: config.SERVICE_REQUIRE_SIGNED_EXPORTS,
    trustAnchors: signer.caCertificates,
    ready: async () => {
      await vault.ping();
      await blobs.ping();
    },
  });
  const address = await app.listen({ host: config.HTTP_HOST, port: config.HTTP_PORT });
  // /metrics (and its own /healthz, /readyz) on METRICS_PORT, apart from the authenticated API.
  const ops = await startOpsServer({
    logger: logger.child({ component: 'ops' }),
    port: config.METRICS_PORT,
    registry,
  });
  logger.info(
    { address, metricsPort: ops.port, requireSignedExports: config.SERVICE_REQUIRE_SIGNED_EXPORTS },
    'sidecar listening',
  );
  return async () => {
    await ops.close();
    await app.close();
    await vault.close();
  };
});
