import type { X509Certificate } from 'node:crypto';
import { setTimeout as delay } from 'node:timers/promises';
import { TimestampError } from './errors.ts';
import { timestampRequest, verifyTimestamp, type VerifiedTimestamp } from './rfc3161.ts';

/** Gets RFC 3161 time-stamps; one method, so recorders and tests can be given any implementation. */
export interface Timestamper {
  /** The TSA's URL, for logs and metadata. */
  readonly url: string;
  /** Longest one `timestamp` call takes, retries included (callers size their leases by it). */
  readonly deadlineMs?: number;
  /**
   * A verified time-stamp over `data`. Rejects with TimestampError: TSA_UNAVAILABLE when no
   * answer came within the deadline; any other code when an answer came and was wrong.
   */
  timestamp(data: Uint8Array): Promise<VerifiedTimestamp>;
}

export interface TsaClientOptions {
  /** RFC 3161 over HTTP (RFC 3161 §3.4): POST application/timestamp-query. */
  readonly url: string;
  /** Roots the TSA certificate must chain to; an answer from any other TSA is refused. */
  readonly trustAnchors: readonly X509Certificate[];
  /** Total time one `timestamp` call may take, retries included. */
  readonly deadlineMs: number;
  /** Bound of one attempt; default min(deadline, 10 s). */
  readonly attemptTimeoutMs?: number;
  readonly fetch?: typeof fetch;
}

const RETRY_STATUS = new Set([408, 425, 429, 500, 502, 503, 504]);

/**
 * The wire client: one request per attempt, a fresh nonce each time, retried with capped
 * exponential backoff while the TSA is unreachable or answers 5xx/429, never past the deadline.
 * An answer that arrives is verified before it is returned (imprint, nonce, signature, chain to
 * `trustAnchors` at genTime); a wrong answer is not retried: it is a misconfigured or hostile TSA,
 * not a transient fault.
 */
export function createTsaClient(options: TsaClientOptions): Timestamper {
  const doFetch = options.fetch ?? fetch;
  const attemptMs = options.attemptTimeoutMs ?? Math.min(options.deadlineMs, 10_000);

  async function attempt(data: Uint8Array, remainingMs: number): Promise<VerifiedTimestamp> {
    const request = timestampRequest(data);
    let res: Response;
    try {
      res = await doFetch(options.url, {
        method: 'POST',
        headers: { 'content-type': 'application/timestamp-query', accept: 'application/timestamp-reply' },
        body: request.der,
        signal: AbortSignal.timeout(Math.max(1, Math.min(attemptMs, remainingMs))),
      });
    } catch (cause) {
      throw new TimestampError('TSA_UNAVAILABLE', `${options.url}: ${(cause as Error).message}`, { cause });
    }
    const body = Buffer.from(await res.arrayBuffer().catch(() => new ArrayBuffer(0)));
    if (!res.ok) {
      throw new TimestampError(
        RETRY_STATUS.has(res.status) ? 'TSA_UNAVAILABLE' : 'TSA_REJECTED',
        `${options.url} answered ${res.status}: ${body.toString('utf8').slice(0, 200)}`,
      );
    }
    return verifyTimestamp(body, { data, trustAnchors: options.trustAnchors, nonce: request.nonce });
  }

  return {
    url: options.url,
    deadlineMs: options.deadlineMs,
    async timestamp(data) {
      const deadline = Date.now() + options.deadlineMs;
      let backoff = 200;
      for (let n = 1; ; n++) {
        try {
          return await attempt(data, deadline - Date.now());
        } catch (err) {
          if (!(err instanceof TimestampError) || err.code !== 'TSA_UNAVAILABLE') throw err;
          const wait = Math.min(backoff, deadline - Date.now());
          if (wait <= 0) {
            throw new TimestampError(
              'TSA_UNAVAILABLE',
              `no time-stamp within ${options.deadlineMs} ms (${n} attempt(s)): ${err.message}`,
              { cause: err },
            );
          }
          await delay(wait);
          backoff = Math.min(backoff * 2, 2_000);
        }
      }
    },
  };
}
