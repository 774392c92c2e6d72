import { mkdir, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { startMinio } from './minio.ts';
import type { Launch, Proc } from './proc.ts';
import { startSeaweedfs } from './seaweedfs.ts';
import type { Tool, Tools } from './tools.ts';

/**
 * The S3-compatible stores the stack can run (`npm run stack -- up --s3 NAME`). The service speaks
 * plain S3 to either (src/blob/s3.ts); the integration tests that touch the bucket run against both
 * (vitest projects `integration` and `integration-seaweedfs`).
 */
export const S3_SERVERS = ['minio', 'seaweedfs'] as const;
export type S3Server = (typeof S3_SERVERS)[number];

export interface S3Store {
  readonly proc: Proc;
  readonly endpoint: string;
  readonly accessKey: string;
  readonly secretKey: string;
  readonly bucket: string;
}

/** The tools each store runs (hack/ensure-tools.sh): MinIO is the stack's own, SeaweedFS a test tool. */
export const S3_TOOLS = {
  minio: ['minio'],
  seaweedfs: ['weed'],
} as const satisfies Record<S3Server, readonly Tool[]>;

export function isS3Server(s: string): s is S3Server {
  return (S3_SERVERS as readonly string[]).includes(s);
}

/** A certificate and key the server presents (https only), and the CA a client must trust. */
export interface S3Tls {
  readonly cert: string;
  readonly key: string;
  readonly ca: string;
}

export async function startS3(
  server: S3Server,
  root: string,
  tools: Partial<Tools<'minio' | 'weed'>>,
  bucket: string,
  launch: Launch = {},
  tls?: S3Tls,
): Promise<S3Store> {
  const [bin] = S3_TOOLS[server];
  const binary = tools[bin];
  if (binary === undefined) throw new Error(`startS3: ${server} needs the tool ${bin}, which was not built`);
  if (server === 'minio') return startMinio(root, binary, bucket, launch, tls);
  if (!tls) return startSeaweedfs(root, binary, bucket, launch);
  await mkdir(root, { recursive: true });
  const [certFile, keyFile] = [join(root, 'seaweedfs-tls.crt'), join(root, 'seaweedfs-tls.key')];
  await writeFile(certFile, tls.cert);
  await writeFile(keyFile, tls.key, { mode: 0o600 });
  return startSeaweedfs(root, binary, bucket, launch, { tls: { certFile, keyFile }, ca: tls.ca });
}
