import { startMinio } from './minio.ts';
import type { Launch, Proc } from './proc.ts';
import { startSeaweedfs } from './seaweedfs.ts';
import type { Tools } from './tools.ts';

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

export function isS3Server(s: string): s is S3Server {
  return (S3_SERVERS as readonly string[]).includes(s);
}

export async function startS3(
  server: S3Server,
  root: string,
  tools: Tools,
  bucket: string,
  launch: Launch = {},
): Promise<S3Store> {
  return server === 'seaweedfs'
    ? startSeaweedfs(root, tools.weed, bucket, launch)
    : startMinio(root, tools.minio, bucket, launch);
}
