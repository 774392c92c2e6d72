import type { IncomingHttpHeaders, IncomingMessage } from 'node:http';
import { Agent as HttpAgent, request as httpRequest } from 'node:http';
import { Agent as HttpsAgent, request as httpsRequest } from 'node:https';
import { BaseError } from '../errors.ts';
import { EMPTY_SHA256, encodeKey, encodeSegment, sha256Hex, signRequest, type Credentials } from './sigv4.ts';

/**
 * A small S3 client: the few calls the service makes (put, get, head, delete and list objects, head
 * and create a bucket), path-style, signed with SigV4 (sigv4.ts), over node:http(s). What a store must
 * implement for it is the core S3 API that every S3-compatible server has; nothing vendor-specific
 * is sent or expected (docs/adr/0018-own-s3-client.md says why not a vendor SDK).
 *
 * Every exchange has a deadline, from sending the request to the last byte of the answer: when it
 * passes the request is destroyed (its socket closed, never reused), and the call fails with
 * ObjectStoreError OBJECT_STORE_UNAVAILABLE. So do refused or reset connections, 5xx answers and the
 * S3 codes of an overloaded store. Any other S3 error (access denied, no such bucket, a signature
 * the store does not accept) is ObjectStoreRequestError: a configuration problem, not an outage.
 */

export type ObjectStoreErrorCode =
  /** The store did not answer within the deadline, refused the connection or answered 5xx. */
  'OBJECT_STORE_UNAVAILABLE';

export class ObjectStoreError extends BaseError<ObjectStoreErrorCode> {}

/** The store answered, and refused the request (4xx other than a missing object). */
export class ObjectStoreRequestError extends BaseError<'OBJECT_STORE_REFUSED'> {
  /** HTTP status and S3 error code of the answer (`AccessDenied`, `NoSuchBucket`, …). */
  readonly status: number;
  readonly s3Code: string;
  constructor(status: number, s3Code: string, message: string) {
    super('OBJECT_STORE_REFUSED', message);
    this.status = status;
    this.s3Code = s3Code;
  }
}

export const DEFAULT_S3_TIMEOUT_MS = 10_000;
/** Keep-alive connections per store and process (docs/configuration.md: pools and deadlines). */
export const S3_MAX_SOCKETS = 16;

export interface S3ClientOptions {
  readonly endpoint: string;
  readonly accessKey: string;
  readonly secretKey: string;
  readonly region?: string;
  /** Deadline of one exchange (default {@link DEFAULT_S3_TIMEOUT_MS}). */
  readonly timeoutMs?: number;
  /** PEM CA certificate(s) an https endpoint's certificate must chain to (instead of the system's). */
  readonly ca?: string | Buffer;
  readonly maxSockets?: number;
}

export interface S3Response {
  readonly status: number;
  readonly headers: IncomingHttpHeaders;
  readonly body: Buffer;
}

export interface ObjectHead {
  readonly size: number;
  readonly etag: string;
  /** User metadata (`x-amz-meta-*`), keys lower-case without the prefix. */
  readonly metadata: Record<string, string>;
}

/** S3 error codes of a store that is overloaded or not ready, rather than of a wrong request. */
const UNAVAILABLE_CODES = new Set(['SlowDown', 'ServiceUnavailable', 'InternalError', 'RequestTimeout']);

/** `<Code>…</Code>` and `<Message>…</Message>` of an S3 XML error body (no XML parser needed). */
function s3ErrorOf(body: Buffer): { code: string; message: string } {
  const text = body.toString('utf8', 0, Math.min(body.length, 4096));
  const tag = (t: string): string => new RegExp(`<${t}>([^<]*)</${t}>`).exec(text)?.[1] ?? '';
  return { code: tag('Code'), message: tag('Message') };
}

export class S3Client {
  readonly #url: URL;
  readonly #creds: Credentials;
  readonly #timeoutMs: number;
  readonly #agent: HttpAgent | HttpsAgent;
  readonly #https: boolean;

  constructor(opts: S3ClientOptions) {
    this.#url = new URL(opts.endpoint);
    this.#https = this.#url.protocol === 'https:';
    if (!this.#https && this.#url.protocol !== 'http:') {
      throw new TypeError(`S3 endpoint must be http(s), got ${this.#url.protocol}`);
    }
    this.#creds = {
      accessKey: opts.accessKey,
      secretKey: opts.secretKey,
      region: opts.region ?? 'us-east-1',
    };
    this.#timeoutMs = opts.timeoutMs ?? DEFAULT_S3_TIMEOUT_MS;
    if (!Number.isInteger(this.#timeoutMs) || this.#timeoutMs < 1) {
      throw new TypeError('timeoutMs must be an integer ≥ 1');
    }
    const pool = { keepAlive: true, maxSockets: opts.maxSockets ?? S3_MAX_SOCKETS };
    this.#agent = this.#https
      ? new HttpsAgent({ ...pool, ...(opts.ca !== undefined ? { ca: opts.ca } : {}) })
      : new HttpAgent(pool);
  }

  /** One signed exchange; the whole answer is read (S3 answers here are small). */
  async request(
    method: 'GET' | 'PUT' | 'HEAD' | 'DELETE',
    bucket: string,
    key: string | null,
    opts: { body?: Buffer; headers?: Record<string, string>; query?: [string, string][] } = {},
  ): Promise<S3Response> {
    const body = opts.body ?? Buffer.alloc(0);
    const prefix = this.#url.pathname.replace(/\/$/, '');
    const path = `${prefix}/${encodeSegment(bucket)}${key === null ? '' : `/${encodeKey(key)}`}`;
    const query = opts.query ?? [];
    const host = this.#url.host;
    const headers: Record<string, string> = {
      ...(opts.headers ?? {}),
      ...(method === 'PUT' ? { 'content-length': String(body.length) } : {}),
    };
    const signed = signRequest(
      {
        method,
        host,
        path,
        query,
        headers,
        payloadSha256: body.length === 0 ? EMPTY_SHA256 : sha256Hex(body),
      },
      this.#creds,
      new Date(),
    );
    const search = query.map(([k, v]) => `${encodeSegment(k)}=${encodeSegment(v)}`).join('&');
    const send = this.#https ? httpsRequest : httpRequest;
    const what = `${method} ${key ?? bucket}`;
    return new Promise<S3Response>((resolve, reject) => {
      const req = send({
        protocol: this.#url.protocol,
        hostname: this.#url.hostname,
        port: this.#url.port,
        method,
        path: search === '' ? path : `${path}?${search}`,
        headers: { ...headers, host, ...signed },
        agent: this.#agent,
      });
      let response: IncomingMessage | undefined;
      const fail = (err: Error): void => {
        clearTimeout(timer);
        reject(
          err instanceof ObjectStoreError
            ? err
            : new ObjectStoreError('OBJECT_STORE_UNAVAILABLE', `object store ${what}: ${err.message}`, {
                cause: err,
              }),
        );
      };
      const timer = setTimeout(() => {
        const err = new ObjectStoreError(
          'OBJECT_STORE_UNAVAILABLE',
          `the object store did not answer ${what} within ${this.#timeoutMs} ms`,
        );
        // The body stream gets the same error (else it would only say "aborted").
        response?.destroy(err);
        req.destroy(err);
      }, this.#timeoutMs);
      timer.unref();
      req.once('error', fail);
      req.once('response', (res: IncomingMessage) => {
        response = res;
        const chunks: Buffer[] = [];
        res.on('data', (c: Buffer) => chunks.push(c));
        res.once('error', fail);
        let ended = false;
        res.once('close', () => {
          if (!ended) fail(new Error('the answer was cut off'));
        });
        res.once('end', () => {
          ended = true;
          clearTimeout(timer);
          const data = Buffer.concat(chunks);
          // A body shorter than announced is a cut answer, never an object's content.
          const announced = res.headers['content-length'];
          if (method !== 'HEAD' && announced !== undefined && Number(announced) !== data.length) {
            return fail(new Error(`the answer ended after ${data.length} of ${announced} bytes`));
          }
          resolve({ status: res.statusCode ?? 0, headers: res.headers, body: data });
        });
      });
      req.end(body);
    });
  }

  /** Throws the error an unsuccessful answer stands for (404s are the caller's business). */
  #check(res: S3Response, what: string): void {
    if (res.status >= 200 && res.status < 300) return;
    const { code, message } = s3ErrorOf(res.body);
    const detail = `object store ${what}: HTTP ${res.status}${code ? ` ${code}` : ''}${message ? `: ${message}` : ''}`;
    if (res.status >= 500 || res.status === 429 || UNAVAILABLE_CODES.has(code)) {
      throw new ObjectStoreError('OBJECT_STORE_UNAVAILABLE', detail);
    }
    throw new ObjectStoreRequestError(res.status, code, detail);
  }

  async putObject(
    bucket: string,
    key: string,
    body: Buffer,
    contentType: string,
    metadata: Record<string, string> = {},
  ): Promise<void> {
    const headers: Record<string, string> = { 'content-type': contentType };
    for (const [k, v] of Object.entries(metadata)) headers[`x-amz-meta-${k.toLowerCase()}`] = v;
    this.#check(await this.request('PUT', bucket, key, { body, headers }), `put ${key}`);
  }

  /** The object's bytes; null when it does not exist. */
  async getObject(bucket: string, key: string): Promise<Buffer | null> {
    const res = await this.request('GET', bucket, key);
    if (res.status === 404) return null;
    this.#check(res, `get ${key}`);
    return res.body;
  }

  async headObject(bucket: string, key: string): Promise<ObjectHead | null> {
    const res = await this.request('HEAD', bucket, key);
    if (res.status === 404) return null;
    this.#check(res, `stat ${key}`);
    const metadata: Record<string, string> = {};
    for (const [k, v] of Object.entries(res.headers)) {
      if (k.startsWith('x-amz-meta-') && typeof v === 'string') metadata[k.slice('x-amz-meta-'.length)] = v;
    }
    return {
      size: Number(res.headers['content-length'] ?? 0),
      etag: String(res.headers.etag ?? '').replace(/^"|"$/g, ''),
      metadata,
    };
  }

  /** Deletes the object (a missing one is no error: S3 answers 204 either way). */
  async deleteObject(bucket: string, key: string): Promise<void> {
    const res = await this.request('DELETE', bucket, key);
    if (res.status === 404) return;
    this.#check(res, `delete ${key}`);
  }

  /** The keys under `prefix`, in the store's order (ListObjectsV2, every page of `pageSize`). */
  async listObjects(bucket: string, prefix: string, pageSize = 1000): Promise<string[]> {
    const keys: string[] = [];
    let token: string | undefined;
    do {
      const query: [string, string][] = [
        ['list-type', '2'],
        ['max-keys', String(pageSize)],
        ['prefix', prefix],
        ...(token !== undefined ? ([['continuation-token', token]] as [string, string][]) : []),
      ];
      const res = await this.request('GET', bucket, null, { query });
      this.#check(res, `list ${prefix}`);
      const xml = res.body.toString('utf8');
      for (const [, key] of xml.matchAll(/<Key>([^<]*)<\/Key>/g)) keys.push(unescapeXml(key!));
      token = /<IsTruncated>true<\/IsTruncated>/.test(xml)
        ? unescapeXml(/<NextContinuationToken>([^<]*)<\/NextContinuationToken>/.exec(xml)?.[1] ?? '')
        : undefined;
      if (token === '') {
        throw new ObjectStoreError(
          'OBJECT_STORE_UNAVAILABLE',
          `object store list ${prefix}: a truncated page without a continuation token`,
        );
      }
    } while (token !== undefined);
    return keys;
  }

  async bucketExists(bucket: string): Promise<boolean> {
    const res = await this.request('HEAD', bucket, null);
    if (res.status === 404) return false;
    this.#check(res, `head bucket ${bucket}`);
    return true;
  }

  /** Creates the bucket; one that exists already and that we can reach is fine. */
  async createBucket(bucket: string): Promise<void> {
    const res = await this.request('PUT', bucket, null);
    // BucketAlreadyOwnedByYou (AWS, MinIO) or BucketAlreadyExists (others, for their owner too).
    if (res.status === 409 && (await this.bucketExists(bucket))) return;
    this.#check(res, `create bucket ${bucket}`);
  }

  /** Closes the kept-alive connections. */
  close(): void {
    this.#agent.destroy();
  }
}

/**
 * The text of an S3 listing's element: the five predefined XML entities and character references
 * (MinIO writes `'` as `&#39;`), decoded in one pass so that an escaped `&amp;` stays `&amp;`.
 */
function unescapeXml(s: string): string {
  const map: Record<string, string> = { amp: '&', lt: '<', gt: '>', quot: '"', apos: "'" };
  return s.replace(/&(amp|lt|gt|quot|apos|#[0-9]+|#x[0-9a-fA-F]+);/g, (_, e: string) =>
    e.startsWith('#x')
      ? String.fromCodePoint(parseInt(e.slice(2), 16))
      : e.startsWith('#')
        ? String.fromCodePoint(parseInt(e.slice(1), 10))
        : map[e]!,
  );
}
