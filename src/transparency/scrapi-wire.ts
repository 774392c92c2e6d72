import { setTimeout as delay } from 'node:timers/promises';
import { backoffDelay } from '../queue/queue-loop.ts';
import { TransparencyError } from './errors.ts';
import { MediaType } from './media-types.ts';
import { decodeProblemDetails } from './problem-details.ts';

/**
 * The HTTP side of the SCRAPI client (scrapi-client.ts): one exchange with a size limit and a
 * timeout, and the bounded retry of it. Knows statuses and headers, nothing of receipts.
 *
 * Retries: 429 and 503 wait for Retry-After (when it is short enough to wait inline, else the
 * error carries it to the job queue); network errors and other 5xx back off exponentially; both
 * bounded by `maxAttempts`. Every other status goes back to the caller, whose protocol it is.
 */

export interface ScrapiWireOptions {
  /** Extra request headers (authorization), or a function producing them per request. */
  readonly headers?: Readonly<Record<string, string>> | (() => Promise<Readonly<Record<string, string>>>);
  /** Attempts per request on 429/5xx/network errors. Default 4. */
  readonly maxAttempts?: number;
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

/** The options with their defaults filled in: what every exchange and retry reads. */
export interface Wire {
  readonly headers: () => Promise<Record<string, string>>;
  readonly maxAttempts: number;
  readonly baseDelayMs: number;
  readonly maxDelayMs: number;
  readonly maxInlineWaitMs: number;
  readonly timeoutMs: number;
  readonly maxResponseBytes: number;
  readonly fetch: typeof fetch;
  readonly sleep: (ms: number, signal?: AbortSignal) => Promise<void>;
  readonly random: () => number;
}

export function wireOf(options: ScrapiWireOptions): Wire {
  const extra = options.headers;
  return {
    headers: async () => (typeof extra === 'function' ? { ...(await extra()) } : { ...(extra ?? {}) }),
    maxAttempts: options.maxAttempts ?? 4,
    baseDelayMs: options.baseDelayMs ?? 500,
    maxDelayMs: options.maxDelayMs ?? 10_000,
    maxInlineWaitMs: options.maxInlineWaitMs ?? 30_000,
    timeoutMs: options.timeoutMs ?? 30_000,
    maxResponseBytes: options.maxResponseBytes ?? 1024 * 1024,
    fetch: options.fetch ?? fetch,
    sleep: options.sleep ?? ((ms: number, signal?: AbortSignal) => delay(ms, undefined, { signal })),
    random: options.random ?? Math.random,
  };
}

/** The jittered exponential delay before attempt `attempt + 1` (attempt ≥ 1). */
export function backoff(wire: Wire, attempt: number): number {
  return backoffDelay(attempt, wire, wire.random);
}

/** One request: no redirects are followed (the protocol's 302/303 are answers, not hops). */
export interface Call {
  readonly method: 'GET' | 'POST';
  readonly url: URL;
  readonly accept: string;
  /** A COSE statement to POST. */
  readonly body?: Uint8Array;
  readonly signal?: AbortSignal | undefined;
}

export interface Answer {
  readonly status: number;
  readonly headers: Headers;
  readonly body: Buffer;
  readonly url: string;
}

/** Retry-After (delta-seconds or HTTP-date) in ms, relative to `now`; undefined if absent/garbled. */
export function parseRetryAfter(value: string | null, now = Date.now()): number | undefined {
  if (value === null) return undefined;
  const trimmed = value.trim();
  if (/^\d+$/.test(trimmed)) return Number(trimmed) * 1000;
  const at = Date.parse(trimmed);
  return Number.isNaN(at) ? undefined : Math.max(0, at - now);
}

/** `HTTP <status>`, with the RFC 9290 problem's title and detail when the body is one. */
export function describeAnswer(answer: Answer): string {
  const problem = answer.headers.get('content-type')?.startsWith(MediaType.problem)
    ? decodeProblemDetails(answer.body)
    : undefined;
  const what = [problem?.title, problem?.detail].filter((s) => s !== undefined).join(': ');
  return `HTTP ${answer.status}${what !== '' ? ` (${what})` : ''}`;
}

/** The answer's Location resolved against its URL; undefined when absent. */
export function locationOf(answer: Answer): URL | undefined {
  const value = answer.headers.get('location');
  if (value === null || value === '') return undefined;
  try {
    return new URL(value, answer.url);
  } catch {
    throw new TransparencyError('BAD_RESPONSE', `unparseable Location ${value}`);
  }
}

/**
 * What one answer means to the retry loop: 429 and 5xx are tried again (after the Retry-After of a
 * 429 or 503 when it names one), everything else is the caller's.
 */
export type Verdict =
  | { readonly retry: false }
  | { readonly retry: true; readonly last: string; readonly retryAfterMs: number | undefined };

export function verdictOf(answer: Answer, now = Date.now()): Verdict {
  if (answer.status !== 429 && answer.status < 500) return { retry: false };
  const retryAfterMs =
    answer.status === 429 || answer.status === 503
      ? parseRetryAfter(answer.headers.get('retry-after'), now)
      : undefined;
  return { retry: true, last: describeAnswer(answer), retryAfterMs };
}

/** One HTTP exchange, body read within the size limit (a larger one is BAD_RESPONSE). */
export async function exchange(wire: Wire, call: Call): Promise<Answer> {
  const timeout = AbortSignal.timeout(wire.timeoutMs);
  const headers: Record<string, string> = { ...(await wire.headers()), accept: call.accept };
  if (call.body !== undefined) headers['content-type'] = MediaType.cose;
  const response = await wire.fetch(call.url, {
    method: call.method,
    headers,
    redirect: 'manual',
    signal: call.signal !== undefined ? AbortSignal.any([call.signal, timeout]) : timeout,
    ...(call.body !== undefined ? { body: Buffer.from(call.body) } : {}),
  });
  const declared = Number(response.headers.get('content-length') ?? '0');
  if (declared > wire.maxResponseBytes) {
    await response.body?.cancel();
    throw new TransparencyError('BAD_RESPONSE', `response of ${declared} bytes exceeds the limit`);
  }
  const buf = Buffer.from(await response.arrayBuffer());
  if (buf.length > wire.maxResponseBytes) {
    throw new TransparencyError('BAD_RESPONSE', `response of ${buf.length} bytes exceeds the limit`);
  }
  return { status: response.status, headers: response.headers, body: buf, url: call.url.toString() };
}

/** A failed attempt: why, the Retry-After it named (if any), and how long to wait before the next. */
interface Failed {
  readonly last: string;
  readonly retryAfterMs: number | undefined;
  readonly wait: number;
}

/**
 * One attempt. A TransparencyError (over-long body, a Retry-After too long to wait inline) and
 * an abort end the request; a network error or a retryable status is a Failed attempt.
 */
async function attempt(wire: Wire, call: Call, n: number): Promise<{ answer: Answer } | Failed> {
  let answer: Answer;
  try {
    answer = await exchange(wire, call);
  } catch (err) {
    if (err instanceof TransparencyError) throw err;
    if (call.signal?.aborted === true) throw err;
    return {
      last: `network error: ${(err as Error).message}`,
      retryAfterMs: undefined,
      wait: backoff(wire, n),
    };
  }
  const verdict = verdictOf(answer);
  if (!verdict.retry) return { answer };
  const { last, retryAfterMs } = verdict;
  if (retryAfterMs !== undefined && retryAfterMs > wire.maxInlineWaitMs) {
    // Handed to the caller, so a job queue schedules the next attempt instead of a worker sleeping.
    throw new TransparencyError('REMOTE_UNAVAILABLE', `${call.method} ${call.url.pathname}: ${last}`, {
      retryAfterMs,
    });
  }
  return { last, retryAfterMs, wait: retryAfterMs ?? backoff(wire, n) };
}

/** The exchange, retried on network errors, 429 and 5xx at most `maxAttempts` times. */
export async function request(wire: Wire, call: Call): Promise<Answer> {
  for (let n = 1; ; n++) {
    const outcome = await attempt(wire, call, n);
    if ('answer' in outcome) return outcome.answer;
    if (n >= wire.maxAttempts) {
      throw new TransparencyError(
        'REMOTE_UNAVAILABLE',
        `${call.method} ${call.url.pathname} failed ${n} times; last: ${outcome.last}`,
        outcome.retryAfterMs !== undefined ? { retryAfterMs: outcome.retryAfterMs } : {},
      );
    }
    await wire.sleep(outcome.wait, call.signal);
  }
}
