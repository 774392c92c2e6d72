import { Client } from 'minio';

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
 */
export interface BlobStore {
  readonly bucket: string;
  put(key: string, body: Buffer, contentType: string, metadata?: ObjectMetadata): Promise<void>;
  /** Null when the object does not exist. */
  get(key: string): Promise<Buffer | null>;
  stat(key: string): Promise<StoredObject | null>;
  /** Throws when the bucket cannot be reached (readiness). */
  ping(): Promise<void>;
}

export interface S3Options {
  readonly endpoint: string;
  readonly accessKey: string;
  readonly secretKey: string;
  readonly bucket: string;
  readonly region?: string;
}

function isNotFound(err: unknown): boolean {
  const code = (err as { code?: string }).code;
  return code === 'NoSuchKey' || code === 'NotFound' || code === 'NoSuchObject';
}

export function s3BlobStore(opts: S3Options): BlobStore {
  const url = new URL(opts.endpoint);
  const useSSL = url.protocol === 'https:';
  const client = new Client({
    endPoint: url.hostname,
    port: url.port ? Number(url.port) : useSSL ? 443 : 80,
    useSSL,
    accessKey: opts.accessKey,
    secretKey: opts.secretKey,
    region: opts.region ?? 'us-east-1',
  });
  const bucket = opts.bucket;
  return {
    bucket,
    async put(key, body, contentType, metadata = {}) {
      await client.putObject(bucket, key, body, body.length, {
        'Content-Type': contentType,
        ...prefixed(metadata),
      });
    },
    async get(key) {
      try {
        const stream = await client.getObject(bucket, key);
        const chunks: Buffer[] = [];
        for await (const c of stream) chunks.push(c as Buffer);
        return Buffer.concat(chunks);
      } catch (err) {
        if (isNotFound(err)) return null;
        throw err;
      }
    },
    async stat(key) {
      try {
        const s = await client.statObject(bucket, key);
        return {
          key,
          size: s.size,
          etag: s.etag,
          metadata: unprefixed(s.metaData),
        };
      } catch (err) {
        if (isNotFound(err)) return null;
        throw err;
      }
    },
    async ping() {
      if (!(await client.bucketExists(bucket))) throw new Error(`bucket ${bucket} does not exist`);
    },
  };
}

function prefixed(meta: ObjectMetadata): Record<string, string> {
  return Object.fromEntries(Object.entries(meta).map(([k, v]) => [`X-Amz-Meta-${k}`, v]));
}

function unprefixed(meta: Record<string, string>): ObjectMetadata {
  const out: ObjectMetadata = {};
  for (const [k, v] of Object.entries(meta)) {
    const key = k.toLowerCase().replace(/^x-amz-meta-/, '');
    if (key !== 'content-type') out[key] = v;
  }
  return out;
}
