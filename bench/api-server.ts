/**
 * The sidecar's HTTP API for the read benchmarks, wired like src/bin/sidecar.ts (buildApp, the
 * runtime vault pool, the Kubernetes authorizer under the sidecar's own identity, an info-level
 * pino logger), listening on 127.0.0.1 in a worker thread so the load generator and the server have
 * separate event loops, as a real client and server would.
 *
 * `startApiServer` is the parent side; the same file is the worker's entry point.
 */
import { once } from 'node:events';
import { isMainThread, parentPort, Worker, workerData } from 'node:worker_threads';
import type { BenchContext } from './common.ts';

export interface ApiServerOptions {
  readonly databaseUrl: string;
  /** Kubeconfig file of the identity allowed to create TokenReviews and SubjectAccessReviews. */
  readonly kubeconfig: string;
  /** Runtime pool size (the sidecar's default is 10). */
  readonly poolMax: number;
  /**
   * Authorizer cache TTL. The default (10 s) would expire decisions in the middle of a measuring
   * round; the benchmarks measure the API with warm decisions, so they raise it.
   */
  readonly authTtlMs: number;
  /** pino level of the server logger (output discarded); the sidecar runs at `info`. */
  readonly logLevel: string;
  /** The stack's MinIO (the API's blob store; the routes measured here do not touch it). */
  readonly s3: { endpoint: string; accessKey: string; secretKey: string; bucket: string };
  /** PEM material of the service signer (signs export bundles), as in its kubernetes.io/tls Secret. */
  readonly signer?: { 'tls.crt': string; 'tls.key': string; 'ca.crt': string };
}

type FromWorker =
  { type: 'listening'; url: string } | { type: 'closed' } | { type: 'error'; message: string };

export interface ApiServer {
  readonly url: string;
  close(): Promise<void>;
}

/** Starts the server in a worker; it is stopped by `close()` or at exit (ctx.track). */
export async function startApiServer(ctx: BenchContext, options: ApiServerOptions): Promise<ApiServer> {
  const worker = new Worker(new URL(import.meta.url), { workerData: options });
  const exited = once(worker, 'exit');
  const close = ctx.track(async () => {
    worker.postMessage('close');
    const timeout = new Promise((resolve) => setTimeout(resolve, 5000).unref());
    await Promise.race([exited, timeout]);
    await worker.terminate();
  });
  const first = await new Promise<FromWorker>((resolve, reject) => {
    worker.once('message', resolve);
    worker.once('error', reject);
    worker.once('exit', (code) => reject(new Error(`API server worker exited with code ${code}`)));
  });
  if (first.type !== 'listening') {
    await close();
    throw new Error(`API server failed to start: ${first.type === 'error' ? first.message : first.type}`);
  }
  return { url: first.url, close };
}

async function workerMain(options: ApiServerOptions): Promise<void> {
  const port = parentPort!;
  const [
    { KubeConfig },
    { pino },
    { buildApp },
    { kubernetesAuthorizer },
    vaultModule,
    { s3BlobStore },
    { signerFromPem },
  ] = await Promise.all([
    import('@kubernetes/client-node'),
    import('pino'),
    import('../src/http/app.ts'),
    import('../src/http/auth/authorizer.ts'),
    import('../src/vault/index.ts'),
    import('../src/blob/store.ts'),
    import('../src/signing/index.ts'),
  ]);
  const signer = options.signer !== undefined ? signerFromPem(options.signer) : undefined;
  // Same options as src/log's createLogger, but written to /dev/null instead of stdout.
  const logger = pino(
    {
      name: 'sidecar',
      level: options.logLevel,
      base: { pid: process.pid },
      timestamp: pino.stdTimeFunctions.isoTime,
      redact: { paths: ['*.authorization', '*.token', '*.password', '*.secretKey'], censor: '[redacted]' },
    },
    pino.destination({ dest: '/dev/null', sync: false }),
  );
  const pool = vaultModule.createVaultPool(options.databaseUrl, {
    max: options.poolMax,
    applicationName: 'bench-sidecar',
  });
  const vault = await vaultModule.openVault(pool);
  const kc = new KubeConfig();
  kc.loadFromFile(options.kubeconfig);
  const blobs = s3BlobStore(options.s3);
  // As src/bin/sidecar.ts wires it (SERVICE_REQUIRE_SIGNED_EXPORTS defaults to 1).
  const app = await buildApp({
    logger,
    vault,
    blobs,
    authorizer: kubernetesAuthorizer(kc, { ttlMs: options.authTtlMs }),
    listNamespaces: () => vault.attestations.namespaces(),
    requireSignedExports: true,
    trustAnchors: signer?.caCertificates ?? [],
    ...(signer !== undefined ? { signer } : {}),
    ready: async () => {
      await pool.query('select 1');
      await blobs.ping();
    },
  });
  const address = await app.listen({ host: '127.0.0.1', port: 0 });
  port.on('message', (msg) => {
    if (msg !== 'close') return;
    void (async () => {
      await app.close();
      await pool.end();
      port.postMessage({ type: 'closed' } satisfies FromWorker);
      port.close();
    })();
  });
  port.postMessage({ type: 'listening', url: address } satisfies FromWorker);
}

if (!isMainThread && parentPort !== null) {
  workerMain(workerData as ApiServerOptions).catch((err: unknown) => {
    parentPort!.postMessage({
      type: 'error',
      message: String((err as Error).stack ?? err),
    } satisfies FromWorker);
  });
}
