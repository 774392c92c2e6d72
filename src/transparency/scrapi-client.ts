import { setTimeout as delay } from 'node:timers/promises';
import { CoseError } from '../cose/errors.ts';
import { decodeKeySet, type LogKey } from '../cose/key.ts';
import { TransparencyError } from './errors.ts';
import { MediaType } from './media-types.ts';
import { leafHash } from './merkle.ts';
import { decodeProblemDetails } from './problem-details.ts';
import { entryOf, verifyReceipt } from './receipt.ts';

/**
 * Wire client for a SCITT Reference API (SCRAPI, draft-ietf-scitt-scrapi) transparency service:
 *
 *   POST {base}/entries  (application/cose)  → 201 + receipt
 *                                            → 303 + Location + Retry-After, then
 *   GET  {Location}                          → 302 (+ Retry-After) while pending, 200 + receipt
 *   GET  {base}/.well-known/scitt-keys       → COSE Key Set (application/cbor)
 *   errors: application/concise-problem-details+cbor (RFC 9290)
 *
 * Retries: 429 and 503 wait for Retry-After (when it is short enough to wait inline, else the
 * error carries it to the job queue); network errors and other 5xx back off exponentially; both
 * bounded by `maxAttempts`. Polling is bounded by `maxPolls`. 409 (already registered) counts as
 * success: the receipt is fetched from its Location. Every receipt is verified against the
 * submitted statement and the service's keys before it is returned: a response that is not a
 * valid receipt for this statement is a typed error, and the caller changes no state.
 *
 * The client is stateless except for the key cache; it never sleeps on the wall clock in tests
 * (inject `sleep`).
 */

export interface Registration {
  /** The service's entry id (last path segment of the entry URL; our own ids are hex leaf hashes). */
  readonly entryId: string;
  readonly receipt: Buffer;
  readonly treeSize: number;
  readonly leafIndex: number;
  /** Absolute URL of the entry, when the service named one. */
  readonly location: string | undefined;
  /** The service answered 409 or returned an entry registered earlier. */
  readonly duplicate: boolean;
}

export interface ScrapiClientOptions {
  /** Base URL of the service; `entries` and `.well-known/…` are resolved against it. */
  readonly baseUrl: string | URL;
  /** Pinned log keys. Without them the keys are fetched from /.well-known/scitt-keys (trust on first use). */
  readonly logKeys?: readonly LogKey[];
  /** Extra request headers (authorization), or a function producing them per request. */
  readonly headers?: Readonly<Record<string, string>> | (() => Promise<Readonly<Record<string, string>>>);
  /** Attempts per request on 429/5xx/network errors. Default 4. */
  readonly maxAttempts?: number;
  /** GETs while a registration is pending. Default 20. */
  readonly maxPolls?: number;
  /** First backoff delay; doubles per attempt. Default 500 ms. */
  readonly baseDelayMs?: number;
  /** Cap of one backoff delay. Default 10 s. */
  readonly maxDelayMs?: number;
  /** Longest Retry-After waited for inline; longer ones are handed to the caller. Default 30 s. */
  readonly maxInlineWaitMs?: number;
  /** Per-request timeout. Default 30 s. */
  readonly timeoutMs?: number;
  /** Largest response body accepted. Default 1 MiB. */
  readonly maxResponseBytes?: number;
  readonly fetch?: typeof fetch;
  readonly sleep?: (ms: number, signal?: AbortSignal) => Promise<void>;
  readonly random?: () => number;
}

export interface ScrapiClient {
  /** Registers a signed statement and returns its verified receipt. */
  register(statement: Uint8Array, options?: { signal?: AbortSignal }): Promise<Registration>;
  /** The service's log keys (pinned, or fetched once and cached). */
  keys(options?: { signal?: AbortSignal; refresh?: boolean }): Promise<readonly LogKey[]>;
  /** The raw receipt of an entry (200), or undefined while pending (302); not verified. */
  fetchEntry(entryId: string, options?: { signal?: AbortSignal }): Promise<Buffer | undefined>;
}

/** Retry-After (delta-seconds or HTTP-date) in ms, relative to `now`; undefined if absent/garbled. */
export function parseRetryAfter(value: string | null, now = Date.now()): number | undefined {
  if (value === null) return undefined;
  const trimmed = value.trim();
  if (/^\d+$/.test(trimmed)) return Number(trimmed) * 1000;
  const at = Date.parse(trimmed);
  return Number.isNaN(at) ? undefined : Math.max(0, at - now);
}

interface Answer {
  readonly status: number;
  readonly headers: Headers;
  readonly body: Buffer;
  readonly url: string;
}

function describe(answer: Answer): string {
  const problem = answer.headers.get('content-type')?.startsWith(MediaType.problem)
    ? decodeProblemDetails(answer.body)
    : undefined;
  const what = [problem?.title, problem?.detail].filter((s) => s !== undefined).join(': ');
  return `HTTP ${answer.status}${what !== '' ? ` (${what})` : ''}`;
}

export function createScrapiClient(options: ScrapiClientOptions): ScrapiClient {
  const base = new URL(options.baseUrl);
  if (!base.pathname.endsWith('/')) base.pathname += '/';
  const doFetch = options.fetch ?? fetch;
  const sleep = options.sleep ?? ((ms: number, signal?: AbortSignal) => delay(ms, undefined, { signal }));
  const random = options.random ?? Math.random;
  const maxAttempts = options.maxAttempts ?? 4;
  const maxPolls = options.maxPolls ?? 20;
  const baseDelayMs = options.baseDelayMs ?? 500;
  const maxDelayMs = options.maxDelayMs ?? 10_000;
  const maxInlineWaitMs = options.maxInlineWaitMs ?? 30_000;
  const timeoutMs = options.timeoutMs ?? 30_000;
  const maxResponseBytes = options.maxResponseBytes ?? 1024 * 1024;
  let cachedKeys: readonly LogKey[] | undefined = options.logKeys;

  const backoff = (attempt: number): number => {
    const exp = Math.min(maxDelayMs, baseDelayMs * 2 ** (attempt - 1));
    return Math.round(exp / 2 + (exp / 2) * random());
  };

  const headersFor = async (): Promise<Record<string, string>> =>
    typeof options.headers === 'function' ? { ...(await options.headers()) } : { ...(options.headers ?? {}) };

  /** One HTTP exchange, no redirects followed, body read within the size limit. */
  const exchange = async (
    method: 'GET' | 'POST',
    url: URL,
    accept: string,
    body: Uint8Array | undefined,
    signal: AbortSignal | undefined,
  ): Promise<Answer> => {
    const timeout = AbortSignal.timeout(timeoutMs);
    const headers: Record<string, string> = { ...(await headersFor()), accept };
    if (body !== undefined) headers['content-type'] = MediaType.cose;
    const response = await doFetch(url, {
      method,
      headers,
      redirect: 'manual',
      signal: signal !== undefined ? AbortSignal.any([signal, timeout]) : timeout,
      ...(body !== undefined ? { body: Buffer.from(body) } : {}),
    });
    const declared = Number(response.headers.get('content-length') ?? '0');
    if (declared > maxResponseBytes) {
      await response.body?.cancel();
      throw new TransparencyError('BAD_RESPONSE', `response of ${declared} bytes exceeds the limit`);
    }
    const buf = Buffer.from(await response.arrayBuffer());
    if (buf.length > maxResponseBytes) {
      throw new TransparencyError('BAD_RESPONSE', `response of ${buf.length} bytes exceeds the limit`);
    }
    return { status: response.status, headers: response.headers, body: buf, url: url.toString() };
  };

  /**
   * The exchange, retried on network errors, 429 and 5xx. Other statuses are returned to the
   * caller. A Retry-After longer than `maxInlineWaitMs` ends the attempts at once and travels in
   * the error, so a job queue can schedule the next attempt instead of a worker sleeping on it.
   */
  const request = async (
    method: 'GET' | 'POST',
    url: URL,
    accept: string,
    body: Uint8Array | undefined,
    signal: AbortSignal | undefined,
  ): Promise<Answer> => {
    let last: string;
    let lastRetryAfter: number | undefined;
    for (let attempt = 1; ; attempt++) {
      let wait: number;
      try {
        const answer = await exchange(method, url, accept, body, signal);
        if (answer.status !== 429 && answer.status < 500) return answer;
        last = describe(answer);
        const retryAfter =
          answer.status === 429 || answer.status === 503
            ? parseRetryAfter(answer.headers.get('retry-after'))
            : undefined;
        lastRetryAfter = retryAfter;
        if (retryAfter !== undefined && retryAfter > maxInlineWaitMs) {
          throw new TransparencyError('REMOTE_UNAVAILABLE', `${method} ${url.pathname}: ${last}`, {
            retryAfterMs: retryAfter,
          });
        }
        wait = retryAfter ?? backoff(attempt);
      } catch (err) {
        if (err instanceof TransparencyError) throw err;
        if (signal?.aborted === true) throw err;
        last = `network error: ${(err as Error).message}`;
        lastRetryAfter = undefined;
        wait = backoff(attempt);
      }
      if (attempt >= maxAttempts) {
        throw new TransparencyError(
          'REMOTE_UNAVAILABLE',
          `${method} ${url.pathname} failed ${attempt} times; last: ${last}`,
          lastRetryAfter !== undefined ? { retryAfterMs: lastRetryAfter } : {},
        );
      }
      await sleep(wait, signal);
    }
  };

  const keys = async (opts: { signal?: AbortSignal; refresh?: boolean } = {}): Promise<readonly LogKey[]> => {
    if (cachedKeys !== undefined && opts.refresh !== true) return cachedKeys;
    if (options.logKeys !== undefined) return options.logKeys;
    const answer = await request(
      'GET',
      new URL('.well-known/scitt-keys', base),
      MediaType.cbor,
      undefined,
      opts.signal,
    );
    if (answer.status !== 200) {
      throw new TransparencyError('BAD_RESPONSE', `GET /.well-known/scitt-keys: ${describe(answer)}`);
    }
    let set: LogKey[];
    try {
      set = decodeKeySet(answer.body);
    } catch (cause) {
      if (cause instanceof CoseError) throw new TransparencyError('BAD_RESPONSE', cause.message, { cause });
      throw cause;
    }
    if (set.length === 0) throw new TransparencyError('BAD_RESPONSE', 'the service publishes no usable key');
    cachedKeys = set;
    return set;
  };

  const entryIdFrom = (location: string | undefined, statement: Uint8Array): string => {
    if (location !== undefined) {
      const segment = new URL(location).pathname
        .split('/')
        .filter((s) => s !== '')
        .at(-1);
      if (segment !== undefined) return decodeURIComponent(segment);
    }
    // No Location: name the entry by its leaf hash, which is what our own log uses.
    return leafHash(entryOf(statement)).toString('hex');
  };

  const locationOf = (answer: Answer): URL | undefined => {
    const value = answer.headers.get('location');
    if (value === null || value === '') return undefined;
    try {
      return new URL(value, answer.url);
    } catch {
      throw new TransparencyError('BAD_RESPONSE', `unparseable Location ${value}`);
    }
  };

  /** Verifies a receipt body for the statement; a failure to verify with cached keys refetches them once. */
  const accept = async (
    statement: Uint8Array,
    receipt: Buffer,
    location: URL | undefined,
    duplicate: boolean,
    signal: AbortSignal | undefined,
  ): Promise<Registration> => {
    let result = verifyReceipt({ receipt, statement, logKey: await keys({ ...(signal ? { signal } : {}) }) });
    if (!result.ok && result.code === 'UNKNOWN_LOG_KEY' && options.logKeys === undefined) {
      // The service may have rotated its key since we cached the set.
      result = verifyReceipt({
        receipt,
        statement,
        logKey: await keys({ refresh: true, ...(signal ? { signal } : {}) }),
      });
    }
    if (!result.ok) {
      throw new TransparencyError(
        result.code,
        `the service's response is not a valid receipt: ${result.message}`,
      );
    }
    const loc = location?.toString();
    return {
      entryId: entryIdFrom(loc, statement),
      receipt,
      treeSize: result.treeSize,
      leafIndex: result.leafIndex,
      location: loc,
      duplicate,
    };
  };

  /** Polls an entry URL until it yields a receipt (200) or the polling budget is spent. */
  const poll = async (
    statement: Uint8Array,
    first: URL,
    firstWait: number,
    duplicate: boolean,
    signal: AbortSignal | undefined,
  ): Promise<Registration> => {
    let url = first;
    let wait = firstWait;
    for (let i = 0; i < maxPolls; i++) {
      if (wait > maxInlineWaitMs) {
        throw new TransparencyError('REGISTRATION_PENDING', `registration pending at ${url.toString()}`, {
          retryAfterMs: wait,
        });
      }
      if (wait > 0) await sleep(wait, signal);
      const answer = await request('GET', url, `${MediaType.cose}, ${MediaType.problem}`, undefined, signal);
      if (answer.status === 200) return accept(statement, answer.body, url, duplicate, signal);
      if (answer.status === 302 || answer.status === 303) {
        url = locationOf(answer) ?? url;
        wait = parseRetryAfter(answer.headers.get('retry-after')) ?? backoff(i + 1);
        continue;
      }
      throw new TransparencyError('BAD_RESPONSE', `GET ${url.pathname} while polling: ${describe(answer)}`);
    }
    throw new TransparencyError(
      'REGISTRATION_PENDING',
      `registration still pending after ${maxPolls} polls`,
      {
        retryAfterMs: wait,
      },
    );
  };

  return {
    keys,

    async register(statement, opts = {}) {
      const signal = opts.signal;
      const answer = await request(
        'POST',
        new URL('entries', base),
        `${MediaType.cose}, ${MediaType.problem}`,
        statement,
        signal,
      );
      const location = locationOf(answer);
      switch (answer.status) {
        case 200:
        case 201:
          return accept(statement, answer.body, location, answer.status === 200, signal);
        case 202:
        case 303: {
          if (location === undefined) {
            throw new TransparencyError('BAD_RESPONSE', `POST /entries: ${answer.status} without Location`);
          }
          const wait = parseRetryAfter(answer.headers.get('retry-after')) ?? 0;
          return poll(statement, location, wait, false, signal);
        }
        case 409: {
          // Already registered: the same statement has a receipt; fetch it.
          if (location === undefined) {
            throw new TransparencyError(
              'BAD_RESPONSE',
              `POST /entries: 409 without Location, cannot find the existing entry (${describe(answer)})`,
            );
          }
          return poll(statement, location, 0, true, signal);
        }
        default:
          throw new TransparencyError('REMOTE_REJECTED', `POST /entries: ${describe(answer)}`, {
            retryable: false,
          });
      }
    },

    async fetchEntry(entryId, opts = {}) {
      const url = new URL(`entries/${encodeURIComponent(entryId)}`, base);
      const answer = await request(
        'GET',
        url,
        `${MediaType.cose}, ${MediaType.problem}`,
        undefined,
        opts.signal,
      );
      if (answer.status === 200) return answer.body;
      if (answer.status === 302) return undefined;
      throw new TransparencyError(
        answer.status === 404 ? 'ENTRY_NOT_FOUND' : 'BAD_RESPONSE',
        `GET ${url.pathname}: ${describe(answer)}`,
        { retryable: answer.status !== 404 },
      );
    },
  };
}
