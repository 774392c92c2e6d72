import { s3BlobStore, type BlobStore } from '../../src/blob/store.ts';
import { stack } from './stack.ts';

/** The stack's S3-compatible bucket (MinIO or SeaweedFS) behind the BlobStore interface. */
export function stackBlobs(): BlobStore {
  const e = stack().env;
  return s3BlobStore({
    endpoint: e.S3_ENDPOINT!,
    accessKey: e.S3_ACCESS_KEY!,
    secretKey: e.S3_SECRET_KEY!,
    bucket: e.S3_BUCKET!,
  });
}
