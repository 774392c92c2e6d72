import { readFile } from 'node:fs/promises';
import { collectDefaultMetrics, Registry } from 'prom-client';
import { startHeapRelease } from './heap-release.ts';
import { startOpsServer } from './ops-server.ts';
import { parseCertificates } from '../signing/index.ts';
import type { Config } from '../config/index.ts';
import { buildApp } from '../http/app.ts';
import { kubernetesAuthorizer } from '../http/auth/authorizer.ts';
import { kubePolicyPackSource } from '../http/sources/policy-packs.ts';
import { DependencyHealth } from '../health/dependencies.ts';
import type { Logger } from '../log/index.ts';
import { signerMetrics } from '../metrics/domain.ts';
import { createWorker } from '../transparency/worker.ts';
import { Drain, type Stop } from './lifecycle.ts';
import {
  blobStoreFrom,
  kubeConfigFrom,
  growingAnchors,
  openVaultFrom,
  serviceSignerFrom,
  transparencyFrom,
  tsaTrustAnchorsFrom,
} from './common.ts';

/**
 * The sidecar process from its configuration and root logger: everything src/bin/sidecar.ts
 * starts, returning how to stop it. Apart from the entry point so that a test can run the very same
 * wiring in-process (test/integration/logs.test.ts reads every logger it creates).
 */
export async function startSidecarProcess(config: Config, logger: Logger): Promise<Stop> {
  const vault = await openVaultFrom(config, logger, 'aibom-vault-sidecar');
  const kc = await kubeConfigFrom(config);
  const blobs = blobStoreFrom(config);
  const registry = new Registry();
  collectDefaultMetrics({ register: registry });
  // The signer's CAs are the trust anchors every outgoing C2PA manifest must chain to: all of them
  // since start (a renewal may bring a new CA; manifests signed under the old one still leave).
  const signer = await serviceSignerFrom(config, kc, logger, registry);
  const trustAnchors = growingAnchors(signer);
  const tsaTrustAnchors = await tsaTrustAnchorsFrom(config);
  // Always wired: the sidecar serves this deployment's local log over SCRAPI and answers
  // POST /v1/attestations/scitt; only the controller enqueues (SERVICE_TRANSPARENCY_WRITER).
  const transparency = await transparencyFrom(config, kc, vault, signer, logger);
  const extra =
    config.SCITT_TRUST_ANCHORS !== undefined
      ? parseCertificates(await readFile(config.SCITT_TRUST_ANCHORS, 'utf8'), 'SCITT_TRUST_ANCHORS')
      : [];
  // /readyz (API and ops port): PostgreSQL and the object store answer within their deadlines.
  const health = new DependencyHealth({
    registry,
    probes: { vault: () => vault.ping(), object_store: () => blobs.ping() },
  });
  signerMetrics(registry, { service: () => signer.current() });
  const drain = new Drain(config.SHUTDOWN_DELAY_SECONDS * 1000);
  const ready = async (): Promise<void> => {
    drain.check();
    await health.check();
  };
  const app = await buildApp({
    registry,
    transparency,
    transparencyWriter: config.SERVICE_TRANSPARENCY_WRITER,
    scrapiTrustAnchors: growingAnchors(signer, extra),
    logger,
    vault,
    blobs,
    authorizer: kubernetesAuthorizer(kc, { registry }),
    timeouts: {
      requestMs: config.HTTP_REQUEST_TIMEOUT_MS,
      headersMs: config.HTTP_HEADERS_TIMEOUT_MS,
      keepAliveMs: config.HTTP_KEEP_ALIVE_TIMEOUT_MS,
      idleMs: config.HTTP_IDLE_TIMEOUT_MS,
    },
    listNamespaces: () => vault.attestations.namespaces(),
    requireSignedExports: config.SERVICE_REQUIRE_SIGNED_EXPORTS,
    trustAnchors,
    tsaTrustAnchors,
    signer: () => signer.current(),
    exportLimit: config.EXPORT_MAX_ATTESTATIONS,
    exportConcurrency: config.EXPORT_CONCURRENCY,
    exportMinBytesPerSecond: config.EXPORT_MIN_BYTES_PER_SECOND,
    tlogPublic: config.TLOG_PUBLIC,
    tlogWitnesses: config.TLOG_WITNESSES,
    policyPacks: kubePolicyPackSource(kc, {
      timeoutMs: config.KUBE_TIMEOUT_MS,
      logger: logger.child({ component: 'policy-packs' }),
    }),
    ready,
    draining: () => drain.draining,
  });
  // The SCITT worker runs here too, whatever SERVICE_TRANSPARENCY_WRITER says: a push
  // (POST /v1/attestations/scitt) that the backend answers later, and an export with `scitt: true`,
  // enqueue jobs even with the writer off, and every queued job must be published by someone (the
  // controller runs its workers only with the writer on). Claims are SKIP LOCKED under a lease, so
  // any number of sidecar and controller replicas share the queue (docs/transparency.md).
  const stopWorker = new AbortController();
  const worker = createWorker({
    jobs: vault.transparencyJobs,
    listener: vault.listener,
    publisher: transparency.publisher,
    logger,
  });
  const working = worker
    .run(stopWorker.signal)
    .catch((err: unknown) => logger.error({ err }, 'transparency worker ended'));
  const address = await app.listen({ host: config.HTTP_HOST, port: config.HTTP_PORT });
  // /metrics (and its own /healthz, /readyz) on METRICS_PORT, apart from the authenticated API.
  const ops = await startOpsServer({
    logger: logger.child({ component: 'ops' }),
    host: config.METRICS_HOST,
    port: config.METRICS_PORT,
    registry,
    ready,
  });
  // Large exports and queries raise its heap for a while; the pages it empties go back afterwards.
  const heapRelease = startHeapRelease({ logger: logger.child({ component: 'heap' }) });
  logger.info(
    { address, metricsPort: ops.port, requireSignedExports: config.SERVICE_REQUIRE_SIGNED_EXPORTS },
    'sidecar listening',
  );
  return async () => {
    // Not ready, still serving for SHUTDOWN_DELAY_SECONDS, then the listeners close.
    await drain.start(logger);
    heapRelease.stop();
    stopWorker.abort();
    await working;
    await ops.close();
    await app.close();
    await signer.stop();
    await vault.close();
  };
}
