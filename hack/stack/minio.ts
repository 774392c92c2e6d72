import { randomBytes } from 'node:crypto';
import { mkdir, writeFile } from 'node:fs/promises';
import { get as httpsGet } from 'node:https';
import { join } from 'node:path';
import { S3Client } from '../../src/blob/store.ts';
import { freePort, startProcess, waitReady, type Launch, type Proc } from './proc.ts';

export interface Minio {
  readonly proc: Proc;
  readonly endpoint: string;
  readonly accessKey: string;
  readonly secretKey: string;
  readonly bucket: string;
}

/**
 * Starts the server on `<root>/minio` (also used to restart it on the same data dir and port, e.g.
 * in outage tests) and waits for its readiness endpoint.
 */
export async function runMinioServer(
  root: string,
  binary: string,
  port: number,
  accessKey: string,
  secretKey: string,
  launch: Launch = {},
  /** PEM certificate and key: the server speaks https only; `ca` is what the probe trusts. */
  tls?: { readonly cert: string; readonly key: string; readonly ca: string },
): Promise<Proc> {
  const data = join(root, 'minio');
  await mkdir(data, { recursive: true });
  const certsDir = join(root, 'minio-certs');
  if (tls) {
    await mkdir(certsDir, { recursive: true, mode: 0o700 });
    await writeFile(join(certsDir, 'public.crt'), tls.cert);
    await writeFile(join(certsDir, 'private.key'), tls.key, { mode: 0o600 });
  }
  const consolePort = await freePort();
  const proc = await startProcess({
    name: 'minio',
    command: binary,
    args: [
      'server',
      data,
      '--address',
      `127.0.0.1:${port}`,
      '--console-address',
      `127.0.0.1:${consolePort}`,
      '--quiet',
      ...(tls ? ['--certs-dir', certsDir] : []),
    ],
    logFile: join(root, 'minio.log'),
    env: {
      ...process.env,
      MINIO_ROOT_USER: accessKey,
      MINIO_ROOT_PASSWORD: secretKey,
      MINIO_BROWSER: 'off',
      MINIO_UPDATE: 'off',
      MINIO_CI_CD: '1',
      HOME: data,
    },
    ...(launch.onSpawn ? { onSpawn: launch.onSpawn } : {}),
  });
  const ready = `${tls ? 'https' : 'http'}://127.0.0.1:${port}/minio/health/ready`;
  await waitReady(
    proc,
    async () => (tls ? (await httpsStatus(ready, tls.ca)) === 200 : (await fetch(ready)).ok),
    60_000,
    launch.signal,
  );
  return proc;
}

/** The status of a GET over https trusting `ca` only. */
function httpsStatus(url: string, ca: string): Promise<number> {
  return new Promise((resolve, reject) => {
    const req = httpsGet(url, { ca, timeout: 5_000 }, (res) => {
      res.resume();
      resolve(res.statusCode ?? 0);
    });
    req.on('error', reject);
    req.on('timeout', () => req.destroy(new Error('timeout')));
  });
}

export async function startMinio(
  root: string,
  binary: string,
  bucket: string,
  launch: Launch = {},
  tls?: { readonly cert: string; readonly key: string; readonly ca: string },
): Promise<Minio> {
  const port = await freePort();
  const accessKey = `stack-${randomBytes(4).toString('hex')}`;
  const secretKey = randomBytes(24).toString('base64url');
  const proc = await runMinioServer(root, binary, port, accessKey, secretKey, launch, tls);
  const endpoint = `${tls ? 'https' : 'http'}://127.0.0.1:${port}`;
  const client = new S3Client({ endpoint, accessKey, secretKey, ...(tls ? { ca: tls.ca } : {}) });
  try {
    // Ready by its health endpoint, MinIO may still answer 503 XMinioServerNotInitialized for a
    // moment: the bucket is created once it takes requests.
    await waitReady(
      proc,
      async () => {
        await client.createBucket(bucket);
        return true;
      },
      60_000,
      launch.signal,
    );
  } finally {
    client.close();
  }
  return { proc, endpoint, accessKey, secretKey, bucket };
}
