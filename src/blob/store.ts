import {
  request as httpRequest,
  type ClientRequest,
  type IncomingMessage,
  type RequestOptions,
} from 'node:http';
import { request as httpsRequest } from 'node:https';
import { Client, S3Error } from 'minio';
import { BaseError } from '../errors.ts';

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

export type ObjectStoreErrorCode =
  /** The store did not answer within the deadline, refused the connection or answered 5xx. */
  'OBJECT_STORE_UNAVAILABLE';

export class ObjectStoreError extends BaseError<ObjectStoreErrorCode> {}

export const DEFAULT_S3_TIMEOUT_MS = 10_000;

export interface S3Options {
  readonly endpoint: string;
  readonly accessKey: string;
  readonly secretKey: string;
  readonly bucket: string;
  readonly region?: string;
  /**
   * Deadline of one HTTP exchange with the store, from sending the request to the last byte of the
   * response (default {@link DEFAULT_S3_TIMEOUT_MS}). When it passes, the request is destroyed (its
   * socket closed), not merely abandoned.
   */
  readonly timeoutMs?: number;
}

function isNotFound(err: unknown): boolean {
  const code = (err as { code?: string }).code;
  return code === 'NoSuchKey' || code === 'NotFound' || code === 'NoSuchObject';
}

/** S3 error codes of a store that is overloaded or not ready, rather than of a wrong request. */
const UNAVAILABLE_S3_CODES = new Set([
  'SlowDown',
  'ServiceUnavailable',
  'InternalError',
  'RequestTimeout',
  'XMinioServerNotInitialized',
]);

/**
 * A failure of the store rather than of the request: no answer (deadline, refused or reset
 * connection) or an S3 error that says the server is unavailable. An S3 error about the request
 * itself (AccessDenied, NoSuchBucket, …) is a configuration problem and stays as it is.
 */
function unavailable(err: unknown): boolean {
  if (err instanceof ObjectStoreError) return true;
  if (err instanceof S3Error) return UNAVAILABLE_S3_CODES.has((err as { code?: string }).code ?? '');
  // minio's own argument errors are programming errors; everything else is the transport's.
  const name = (err as Error | undefined)?.constructor?.name ?? '';
  return !/^Invalid|Required$|^IncorrectSize/.test(name);
}

/**
 * The HTTP transport the minio client sends through, with a deadline per exchange. The timer runs
 * from the request until the response has been read to its end (minio hands `getObject` bodies to
 * the caller, so a response that stalls half-way is covered too); when it fires the request is
 * destroyed with an ObjectStoreError, which closes the socket (a keep-alive socket to a hung server
 * is never reused) and fails whichever side is waiting: the minio call or the body stream.
 */
export function deadlineTransport(
  protocol: 'http:' | 'https:',
  timeoutMs: number,
): { request: (options: RequestOptions, callback?: (res: IncomingMessage) => void) => ClientRequest } {
  const send = protocol === 'https:' ? httpsRequest : httpRequest;
  return {
    request(options, callback) {
      const req = send(options, callback);
      let response: IncomingMessage | undefined;
      const timer = setTimeout(() => {
        const err = new ObjectStoreError(
          'OBJECT_STORE_UNAVAILABLE',
          `the object store did not answer ${options.method ?? 'GET'} ${(options.path ?? '').split('?')[0]} within ${timeoutMs} ms`,
        );
        // The body stream gets the same error (else it would only say "aborted").
        response?.destroy(err);
        req.destroy(err);
      }, timeoutMs);
      timer.unref();
      const stop = (): void => clearTimeout(timer);
      req.once('error', stop);
      req.once('close', stop);
      req.once('response', (res: IncomingMessage) => {
        response = res;
        res.once('end', stop);
        res.once('close', stop);
        res.once('error', stop);
      });
      return req;
    },
  };
}

export function s3BlobStore(opts: S3Options): BlobStore {
  const url = new URL(opts.endpoint);
  const useSSL = url.protocol === 'https:';
  const timeoutMs = opts.timeoutMs ?? DEFAULT_S3_TIMEOUT_MS;
  if (!Number.isInteger(timeoutMs) || timeoutMs < 1) throw new TypeError('timeoutMs must be an integer ≥ 1');
  const client = new Client({
    endPoint: url.hostname,
    port: url.port ? Number(url.port) : useSSL ? 443 : 80,
    useSSL,
    accessKey: opts.accessKey,
    secretKey: opts.secretKey,
    region: opts.region ?? 'us-east-1',
    transport: deadlineTransport(useSSL ? 'https:' : 'http:', timeoutMs) as never,
  });
  const bucket = opts.bucket;

  /** Runs one store call; an unavailable store becomes ObjectStoreError, anything else stays. */
  const call = async <T>(what: string, fn: () => Promise<T>): Promise<T> => {
    try {
      return await fn();
    } catch (err) {
      if (err instanceof ObjectStoreError || !unavailable(err)) throw err;
      const msg = (err as Error)?.message ?? String(err);
      throw new ObjectStoreError('OBJECT_STORE_UNAVAILABLE', `object store ${what}: ${msg}`, { cause: err });
    }
  };

  return {
    bucket,
    put: (key, body, contentType, metadata = {}) =>
      call(`put ${key}`, async () => {
        await client.putObject(bucket, key, body, body.length, {
          'Content-Type': contentType,
          ...prefixed(metadata),
        });
      }),
    get: (key) =>
      call(`get ${key}`, async () => {
        try {
          const stream = await client.getObject(bucket, key);
          const chunks: Buffer[] = [];
          for await (const c of stream) chunks.push(c as Buffer);
          return Buffer.concat(chunks);
        } catch (err) {
          if (isNotFound(err)) return null;
          throw err;
        }
      }),
    stat: (key) =>
      call(`stat ${key}`, async () => {
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
      }),
    ping: () =>
      call('ping', async () => {
        if (!(await client.bucketExists(bucket))) throw new Error(`bucket ${bucket} does not exist`);
      }),
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
