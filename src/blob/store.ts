import {
  DEFAULT_S3_TIMEOUT_MS,
  ObjectStoreError,
  S3Client,
  type ObjectHead,
  type S3ClientOptions,
} from './s3.ts';

export { DEFAULT_S3_TIMEOUT_MS, ObjectStoreError, ObjectStoreRequestError, S3Client } from './s3.ts';
export type { ObjectStoreErrorCode, S3ClientOptions } from './s3.ts';

/** Small user metadata S3 carries with an object (keys lower-case, values ASCII, ~2 KB in all). */
export type ObjectMetadata = Record<string, string>;

export interface StoredObject {
  readonly key: string;
  readonly size: number;
  readonly etag: string;
  readonly metadata: ObjectMetadata;
}

/**
 * The object store behind artifacts (AIBOM blobs, C2PA sidecars, metadata records). Keys are
 * content-addressed or run-scoped, so a repeated put of the same key writes the same bytes.
 * Every call either completes or fails within the store's deadline; a store that is down, hung or
 * overloaded fails with {@link ObjectStoreError} `OBJECT_STORE_UNAVAILABLE`.
 *
 * A put is all or nothing: S3 makes an object visible only once all of it is stored, and the
 * signed payload hash (sigv4.ts) makes the store refuse a body cut or changed on the way. A get
 * returns the whole object or fails (an answer shorter than its Content-Length is an error).
 */
export interface BlobStore {
  readonly bucket: string;
  put(key: string, body: Buffer, contentType: string, metadata?: ObjectMetadata): Promise<void>;
  /** Null when the object does not exist. */
  get(key: string): Promise<Buffer | null>;
  stat(key: string): Promise<StoredObject | null>;
  /** The keys under `prefix`. */
  list(prefix: string): Promise<string[]>;
  /** Removes the object; a missing one is no error. Only for objects no record names (orphans). */
  delete(key: string): Promise<void>;
  /** Throws when the bucket cannot be reached (readiness). */
  ping(): Promise<void>;
}

export interface S3Options extends S3ClientOptions {
  readonly bucket: string;
}

/** The BlobStore over any S3-compatible store (src/blob/s3.ts). */
export function s3BlobStore(opts: S3Options): BlobStore {
  const client = new S3Client({ ...opts, timeoutMs: opts.timeoutMs ?? DEFAULT_S3_TIMEOUT_MS });
  const bucket = opts.bucket;
  const stored = (key: string, h: ObjectHead): StoredObject => ({ key, ...h });
  return {
    bucket,
    put: (key, body, contentType, metadata = {}) =>
      client.putObject(bucket, key, body, contentType, metadata),
    get: (key) => client.getObject(bucket, key),
    stat: async (key) => {
      const h = await client.headObject(bucket, key);
      return h === null ? null : stored(key, h);
    },
    list: (prefix) => client.listObjects(bucket, prefix),
    delete: (key) => client.deleteObject(bucket, key),
    ping: async () => {
      if (!(await client.bucketExists(bucket))) {
        throw new ObjectStoreError(
          'OBJECT_STORE_UNAVAILABLE',
          `object store ping: bucket ${bucket} does not exist`,
        );
      }
    },
  };
}
