import { CoseError } from '../cose/errors.ts';
import { decodeKeySet, type LogKey } from '../cose/key.ts';
import { TransparencyError } from './errors.ts';
import { MediaType } from './media-types.ts';
import { leafHash } from './merkle.ts';
import { entryOf, verifyReceipt } from './receipt.ts';
import {
  backoff,
  describeAnswer,
  locationOf,
  parseRetryAfter,
  request,
  wireOf,
  type Answer,
  type ScrapiWireOptions,
  type Wire,
} from './scrapi-wire.ts';

export { parseRetryAfter };

/**
 * Wire client for a SCITT Reference API (SCRAPI, draft-ietf-scitt-scrapi) transparency service:
 *
 *   POST {base}/entries  (application/cose)  → 201 + receipt
 *                                            → 303 + Location + Retry-After, then
 *   GET  {Location}                          → 302 (+ Retry-After) while pending, 200 + receipt
 *   GET  {base}/.well-known/scitt-keys       → COSE Key Set (application/cbor)
 *   errors: application/concise-problem-details+cbor (RFC 9290)
 *
 * Retries (scrapi-wire.ts): 429 and 503 wait for Retry-After (when it is short enough to wait
 * inline, else the error carries it to the job queue); network errors and other 5xx back off
 * exponentially; both bounded by `maxAttempts`. Polling is bounded by `maxPolls`. 409 (already
 * registered) counts as success: the receipt is fetched from its Location. Every receipt is
 * verified against the submitted statement and the service's keys before it is returned: a
 * response that is not a valid receipt for this statement is a typed error, and the caller changes
 * no state.
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

export interface ScrapiClientOptions extends ScrapiWireOptions {
  /** Base URL of the service; `entries` and `.well-known/…` are resolved against it. */
  readonly baseUrl: string | URL;
  /** Pinned log keys. Without them the keys are fetched from /.well-known/scitt-keys (trust on first use). */
  readonly logKeys?: readonly LogKey[];
  /** GETs while a registration is pending. Default 20. */
  readonly maxPolls?: number;
}

export interface ScrapiClient {
  /** Registers a signed statement and returns its verified receipt. */
  register(statement: Uint8Array, options?: { signal?: AbortSignal }): Promise<Registration>;
  /** The service's log keys (pinned, or fetched once and cached). */
  keys(options?: { signal?: AbortSignal; refresh?: boolean }): Promise<readonly LogKey[]>;
  /** The raw receipt of an entry (200), or undefined while pending (302); not verified. */
  fetchEntry(entryId: string, options?: { signal?: AbortSignal }): Promise<Buffer | undefined>;
}

type KeysOptions = { signal?: AbortSignal; refresh?: boolean };

/** What the parts of one client share: the wire, the service's base URL and its keys. */
interface Service {
  readonly wire: Wire;
  /** Ends with `/`, so relative paths resolve below it. */
  readonly base: URL;
  readonly maxPolls: number;
  /** Keys were pinned: a receipt that does not verify is never a reason to refetch them. */
  readonly pinned: boolean;
  readonly keys: (opts?: KeysOptions) => Promise<readonly LogKey[]>;
}

const RECEIPT_ACCEPT = `${MediaType.cose}, ${MediaType.problem}`;

/** GET /.well-known/scitt-keys: a COSE Key Set with at least one usable key, or BAD_RESPONSE. */
async function fetchKeySet(wire: Wire, base: URL, signal: AbortSignal | undefined): Promise<LogKey[]> {
  const url = new URL('.well-known/scitt-keys', base);
  const answer = await request(wire, { method: 'GET', url, accept: MediaType.cbor, signal });
  if (answer.status !== 200) {
    throw new TransparencyError('BAD_RESPONSE', `GET /.well-known/scitt-keys: ${describeAnswer(answer)}`);
  }
  let set: LogKey[];
  try {
    set = decodeKeySet(answer.body);
  } catch (cause) {
    if (cause instanceof CoseError) throw new TransparencyError('BAD_RESPONSE', cause.message, { cause });
    throw cause;
  }
  if (set.length === 0) throw new TransparencyError('BAD_RESPONSE', 'the service publishes no usable key');
  return set;
}

/** Pinned keys, or the service's fetched on first use and cached until a `refresh`. */
function keyCache(
  fetchSet: (signal: AbortSignal | undefined) => Promise<LogKey[]>,
  pinned: readonly LogKey[] | undefined,
): (opts?: KeysOptions) => Promise<readonly LogKey[]> {
  let cached = pinned;
  return async (opts = {}) => {
    if (cached !== undefined && opts.refresh !== true) return cached;
    if (pinned !== undefined) return pinned;
    cached = await fetchSet(opts.signal);
    return cached;
  };
}

/**
 * The entry id: the last path segment of its location, or, with none, the statement's leaf hash
 * in hex (what our own log names entries by).
 */
export function entryIdOf(location: string | undefined, statement: Uint8Array): string {
  if (location !== undefined) {
    const segment = new URL(location).pathname
      .split('/')
      .filter((s) => s !== '')
      .at(-1);
    if (segment !== undefined) return decodeURIComponent(segment);
  }
  return leafHash(entryOf(statement)).toString('hex');
}

/** A receipt for `statement` that the service's keys verify; with fetched keys, one refetch on an unknown key. */
async function acceptReceipt(
  service: Service,
  statement: Uint8Array,
  receipt: Buffer,
  at: { location: URL | undefined; duplicate: boolean },
  signal: AbortSignal | undefined,
): Promise<Registration> {
  const withSignal = signal ? { signal } : {};
  let result = verifyReceipt({ receipt, statement, logKey: await service.keys(withSignal) });
  if (!result.ok && result.code === 'UNKNOWN_LOG_KEY' && !service.pinned) {
    // The service may have rotated its key since we cached the set.
    const logKey = await service.keys({ refresh: true, ...withSignal });
    result = verifyReceipt({ receipt, statement, logKey });
  }
  if (!result.ok) {
    throw new TransparencyError(
      result.code,
      `the service's response is not a valid receipt: ${result.message}`,
    );
  }
  const location = at.location?.toString();
  return {
    entryId: entryIdOf(location, statement),
    receipt,
    treeSize: result.treeSize,
    leafIndex: result.leafIndex,
    location,
    duplicate: at.duplicate,
  };
}

/**
 * Polls an entry URL until it yields a receipt (200) or the polling budget is spent. A wait longer
 * than the client waits inline ends it with REGISTRATION_PENDING carrying the wait (for the queue).
 */
async function pollEntry(
  service: Service,
  statement: Uint8Array,
  from: { url: URL; wait: number; duplicate: boolean },
  signal: AbortSignal | undefined,
): Promise<Registration> {
  const { wire } = service;
  let { url, wait } = from;
  for (let i = 0; i < service.maxPolls; i++) {
    if (wait > wire.maxInlineWaitMs) {
      throw new TransparencyError('REGISTRATION_PENDING', `registration pending at ${url.toString()}`, {
        retryAfterMs: wait,
      });
    }
    if (wait > 0) await wire.sleep(wait, signal);
    const answer = await request(wire, { method: 'GET', url, accept: RECEIPT_ACCEPT, signal });
    if (answer.status === 200) {
      return acceptReceipt(
        service,
        statement,
        answer.body,
        { location: url, duplicate: from.duplicate },
        signal,
      );
    }
    if (answer.status !== 302 && answer.status !== 303) {
      throw new TransparencyError(
        'BAD_RESPONSE',
        `GET ${url.pathname} while polling: ${describeAnswer(answer)}`,
      );
    }
    url = locationOf(answer) ?? url;
    wait = parseRetryAfter(answer.headers.get('retry-after')) ?? backoff(wire, i + 1);
  }
  throw new TransparencyError(
    'REGISTRATION_PENDING',
    `registration still pending after ${service.maxPolls} polls`,
    {
      retryAfterMs: wait,
    },
  );
}

/**
 * The answer to POST /entries: 200/201 carry the receipt (200: registered before); 202/303 name
 * where to poll; 409 (already registered) names the existing entry, whose receipt is fetched;
 * anything else is a rejection that retrying will not change.
 */
async function afterPost(
  service: Service,
  statement: Uint8Array,
  answer: Answer,
  signal: AbortSignal | undefined,
): Promise<Registration> {
  const location = locationOf(answer);
  switch (answer.status) {
    case 200:
    case 201:
      return acceptReceipt(
        service,
        statement,
        answer.body,
        { location, duplicate: answer.status === 200 },
        signal,
      );
    case 202:
    case 303: {
      if (location === undefined) {
        throw new TransparencyError('BAD_RESPONSE', `POST /entries: ${answer.status} without Location`);
      }
      const wait = parseRetryAfter(answer.headers.get('retry-after')) ?? 0;
      return pollEntry(service, statement, { url: location, wait, duplicate: false }, signal);
    }
    case 409: {
      if (location === undefined) {
        throw new TransparencyError(
          'BAD_RESPONSE',
          `POST /entries: 409 without Location, cannot find the existing entry (${describeAnswer(answer)})`,
        );
      }
      return pollEntry(service, statement, { url: location, wait: 0, duplicate: true }, signal);
    }
    default:
      throw new TransparencyError('REMOTE_REJECTED', `POST /entries: ${describeAnswer(answer)}`, {
        retryable: false,
      });
  }
}

/** GET /entries/{id}: the raw receipt (200), undefined while pending (302); 404 is ENTRY_NOT_FOUND. */
async function fetchEntry(
  service: Service,
  entryId: string,
  signal: AbortSignal | undefined,
): Promise<Buffer | undefined> {
  const url = new URL(`entries/${encodeURIComponent(entryId)}`, service.base);
  const answer = await request(service.wire, { method: 'GET', url, accept: RECEIPT_ACCEPT, signal });
  if (answer.status === 200) return answer.body;
  if (answer.status === 302) return undefined;
  throw new TransparencyError(
    answer.status === 404 ? 'ENTRY_NOT_FOUND' : 'BAD_RESPONSE',
    `GET ${url.pathname}: ${describeAnswer(answer)}`,
    { retryable: answer.status !== 404 },
  );
}

export function createScrapiClient(options: ScrapiClientOptions): ScrapiClient {
  const base = new URL(options.baseUrl);
  if (!base.pathname.endsWith('/')) base.pathname += '/';
  const wire = wireOf(options);
  const service: Service = {
    wire,
    base,
    maxPolls: options.maxPolls ?? 20,
    pinned: options.logKeys !== undefined,
    keys: keyCache((signal) => fetchKeySet(wire, base, signal), options.logKeys),
  };
  return {
    keys: service.keys,
    async register(statement, opts = {}) {
      const url = new URL('entries', base);
      const call = {
        method: 'POST',
        url,
        accept: RECEIPT_ACCEPT,
        body: statement,
        signal: opts.signal,
      } as const;
      return afterPost(service, statement, await request(wire, call), opts.signal);
    },
    fetchEntry: (entryId, opts = {}) => fetchEntry(service, entryId, opts.signal),
  };
}
