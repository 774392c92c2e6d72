import { randomBytes } from 'node:crypto';
import { mkdir } from 'node:fs/promises';
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
): Promise<Proc> {
  const data = join(root, 'minio');
  await mkdir(data, { recursive: true });
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
  await waitReady(
    proc,
    async () => (await fetch(`http://127.0.0.1:${port}/minio/health/ready`)).ok,
    60_000,
    launch.signal,
  );
  return proc;
}

export async function startMinio(
  root: string,
  binary: string,
  bucket: string,
  launch: Launch = {},
): Promise<Minio> {
  const port = await freePort();
  const accessKey = `stack-${randomBytes(4).toString('hex')}`;
  const secretKey = randomBytes(24).toString('base64url');
  const proc = await runMinioServer(root, binary, port, accessKey, secretKey, launch);
  const endpoint = `http://127.0.0.1:${port}`;
  const client = new S3Client({ endpoint, accessKey, secretKey });
  await client.createBucket(bucket);
  client.close();
  return { proc, endpoint, accessKey, secretKey, bucket };
}
