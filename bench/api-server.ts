/**
 * The sidecar's HTTP API for the read benchmarks, wired like src/bin/sidecar.ts (buildApp, the
 * runtime vault pool, the Kubernetes authorizer under the sidecar's own identity, an info-level
 * pino logger), listening on 127.0.0.1 in a worker thread so the load generator and the server have
 * separate event loops, as a real client and server would.
 *
 * `startApiServer` is the parent side; the same file is the worker's entry point.
 */
import { once } from 'node:events';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { Readable } from 'node:stream';
import { isMainThread, parentPort, Worker, workerData } from 'node:worker_threads';
import type { StackInfo } from '../hack/stack/stack.ts';
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

/**
 * The options every benchmark's API takes on the stack: the `aibom-vault` identity, the stack's
 * object store, warm authorizer decisions (30 min), the sidecar's `info` logging.
 */
export function stackApiOptions(
  stack: StackInfo,
  databaseUrl: string,
  poolMax: number,
): Omit<ApiServerOptions, 'signer'> {
  const env = (name: string): string => {
    const v = stack.env[name];
    if (v === undefined) throw new Error(`the stack reported no ${name}`);
    return v;
  };
  return {
    databaseUrl,
    kubeconfig: stack.kube.kubeconfigs['aibom-vault'],
    poolMax,
    authTtlMs: 30 * 60_000,
    logLevel: 'info',
    s3: {
      endpoint: env('S3_ENDPOINT'),
      accessKey: env('S3_ACCESS_KEY'),
      secretKey: env('S3_SECRET_KEY'),
      bucket: env('S3_BUCKET'),
    },
  };
}

type ToWorker =
  | 'cpu'
  | 'close'
  | { type: 'serve'; bytes: Uint8Array; chunkSize: number }
  | { type: 'reads'; namespaces: string[] };

type FromWorker =
  | { type: 'listening'; url: string }
  | { type: 'closed' }
  | { type: 'error'; message: string }
  | { type: 'cpu'; micros: number }
  | { type: 'serving'; url: string }
  | { type: 'reads'; rows: number };

export interface ApiServer {
  readonly url: string;
  /** CPU time (user + system, µs) the server's thread has used so far (process.threadCpuUsage). */
  cpuMicros(): Promise<number>;
  /**
   * Serves a copy of `bytes` at GET <returned url> from the worker's memory, on a plain node:http
   * server in the same thread, in `chunkSize` pieces as the export route streams them: what moving
   * those bytes over HTTP costs without producing them (the export benchmark's transport floor).
   */
  serveBytes(bytes: Uint8Array, chunkSize: number): Promise<string>;
  /**
   * Reads what an export of `namespaces` reads, in the worker: its one keyset pass over the
   * records (reading ahead), rows decoded by node-postgres, nothing else done with them.
   */
  readRecords(namespaces: string[]): Promise<number>;
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
  /** Sends `msg` and resolves with the worker's first answer of `type` (rejects on its error). */
  const ask = <T extends FromWorker['type']>(
    msg: ToWorker,
    type: T,
  ): Promise<Extract<FromWorker, { type: T }>> =>
    new Promise((resolve, reject) => {
      const onMessage = (answer: FromWorker): void => {
        if (answer.type !== type && answer.type !== 'error') return;
        worker.off('message', onMessage);
        if (answer.type === 'error') reject(new Error(`API server worker: ${answer.message}`));
        else resolve(answer as Extract<FromWorker, { type: T }>);
      };
      worker.on('message', onMessage);
      worker.postMessage(msg);
    });
  return {
    url: first.url,
    cpuMicros: async () => (await ask('cpu', 'cpu')).micros,
    serveBytes: async (bytes, chunkSize) => (await ask({ type: 'serve', bytes, chunkSize }, 'serving')).url,
    readRecords: async (namespaces) => (await ask({ type: 'reads', namespaces }, 'reads')).rows,
    close,
  };
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
  let floor: Server | undefined;
  port.on('message', (msg: ToWorker) => {
    if (msg === 'cpu') {
      const { user, system } = process.threadCpuUsage();
      port.postMessage({ type: 'cpu', micros: user + system } satisfies FromWorker);
      return;
    }
    if (msg === 'close') {
      void (async () => {
        floor?.closeAllConnections();
        floor?.close();
        await app.close();
        await pool.end();
        port.postMessage({ type: 'closed' } satisfies FromWorker);
        port.close();
      })();
      return;
    }
    if (msg.type === 'serve') {
      const bytes = Buffer.from(msg.bytes.buffer, msg.bytes.byteOffset, msg.bytes.byteLength);
      const chunks = function* (): Generator<Buffer> {
        for (let at = 0; at < bytes.length; at += msg.chunkSize) yield bytes.subarray(at, at + msg.chunkSize);
      };
      floor?.close();
      const server = createServer((_req, res) => {
        res.setHeader('content-type', 'application/x-tar');
        Readable.from(chunks(), { objectMode: false, highWaterMark: msg.chunkSize }).pipe(res);
      });
      floor = server;
      server.listen(0, '127.0.0.1', () => {
        const { port: p } = server.address() as AddressInfo;
        port.postMessage({ type: 'serving', url: `http://127.0.0.1:${p}/` } satisfies FromWorker);
      });
      return;
    }
    const filter = { namespaces: msg.namespaces };
    void (async () => {
      const { until } = await vault.attestations.selectionSize(filter, 100_000_000);
      let rows = 0;
      const options = { until, batchSize: 1000, readAhead: true };
      for await (const r of vault.attestations.stream(filter, options)) rows += r.seq > 0 ? 1 : 0;
      port.postMessage({ type: 'reads', rows } satisfies FromWorker);
    })().catch((err: unknown) => {
      port.postMessage({ type: 'error', message: String((err as Error).stack ?? err) } satisfies FromWorker);
    });
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
