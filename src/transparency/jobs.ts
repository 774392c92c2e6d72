import { backoffDelay } from '../queue/queue-loop.ts';
import type { ClaimedJob, JobState, TransparencyJob, TransparencyJobRepository } from '../vault/index.ts';

export { backoffDelay };

/**
 * The publication queue's policy (the rows are the vault's: src/vault/transparency-jobs.ts): how
 * long a claim is exclusive, how many attempts a job gets, how long it waits between them, and how
 * a job looks from the outside (the API's `transparency` field). A job is `queued` until it is
 * `published`: one that cannot publish is never given up (the spec has no third state), it is tried
 * again after a backoff capped at `maxDelayMs`, and its view says why it waits (attempts, last error,
 * next attempt).
 */

export type { ClaimedJob, JobBackend, JobState, Publication, TransparencyJob } from '../vault/index.ts';

export interface RetryPolicy {
  /** Delay after the first failed attempt; doubles per attempt. */
  readonly baseDelayMs: number;
  /**
   * Cap of the exponential backoff, and the delay after a refusal no retry can change by itself
   * (the remote refused the statement): such a job is tried at this pace until it is published.
   */
  readonly maxDelayMs: number;
  /** Cap of a server-requested Retry-After. */
  readonly maxRetryAfterMs: number;
  /** How long a claim is exclusive; must exceed the longest submission (client timeouts included). */
  readonly leaseMs: number;
}

export const DEFAULT_RETRY_POLICY: RetryPolicy = Object.freeze({
  baseDelayMs: 2_000,
  maxDelayMs: 10 * 60_000,
  maxRetryAfterMs: 60 * 60_000,
  leaseMs: 2 * 60_000,
});

/**
 * Claims up to `limit` due jobs under `policy` (its lease). With `jobIds`, only those jobs are
 * considered (the synchronous publish path).
 */
export function claim(
  jobs: TransparencyJobRepository,
  limit: number,
  options: { policy?: RetryPolicy; jobIds?: readonly string[]; skipBackoff?: boolean } = {},
): Promise<ClaimedJob[]> {
  const policy = options.policy ?? DEFAULT_RETRY_POLICY;
  return jobs.claim(limit, {
    leaseMs: policy.leaseMs,
    ...(options.jobIds !== undefined ? { jobIds: options.jobIds } : {}),
    ...(options.skipBackoff !== undefined ? { skipBackoff: options.skipBackoff } : {}),
  });
}

export interface FailOptions {
  readonly policy?: RetryPolicy;
  /** Server-requested delay (Retry-After); replaces the exponential backoff, capped. */
  readonly retryAfterMs?: number;
  /**
   * No retry can change the outcome by itself (the remote refused the statement): the next attempt
   * waits `maxDelayMs`, so an operator's fix on either side is picked up without a reset.
   */
  readonly permanent?: boolean;
  readonly random?: () => number;
}

/**
 * Records a failed attempt: the job stays `queued`, due again after a backoff (the server's
 * Retry-After, capped, when it gave one; `maxDelayMs` after a permanent refusal). Returns the
 * updated job, or null when the lease was lost.
 */
export function fail(
  jobs: TransparencyJobRepository,
  job: ClaimedJob,
  error: string,
  options: FailOptions = {},
): Promise<TransparencyJob | null> {
  const policy = options.policy ?? DEFAULT_RETRY_POLICY;
  const delayMs =
    options.retryAfterMs !== undefined
      ? Math.min(Math.max(0, options.retryAfterMs), policy.maxRetryAfterMs)
      : options.permanent === true
        ? policy.maxDelayMs
        : backoffDelay(job.attempts, policy, options.random);
  return jobs.fail(job, { error, delayMs });
}

/**
 * The `transparency` field of the API envelope and of the AIBOM metadata (spec: the job id while
 * queued, then the final receipt; the receipt records dry run vs published). Snake case like the
 * rest of the API; the receipt is base64 of the COSE bytes.
 *
 * `log_index`, the entry's position in a log every tenant's records go to, only with `position`:
 * a tenant reading its own records' positions over time learns how many records everyone else
 * writes (issue 28). It is for readers allowed to see the vault's positions (docs/chain.md: get on
 * attestations/chain, cluster-wide) and for the answer of POST /v1/attestations/scitt, whose
 * caller asked to register the entry (the spec: "the receipt and the log position"). The AIBOM
 * metadata, the Run's status and the Attestation resources never carry it.
 */
export interface TransparencyView {
  job_id: string;
  status: JobState;
  /** `local`: appended to this service's own log (dry run); `scrapi`: a remote SCITT service. */
  backend?: 'local' | 'scrapi';
  mode?: 'dry_run' | 'published';
  entry_id?: string;
  log_index?: number;
  receipt?: string;
  receipt_media_type?: 'application/cose';
  /** The signed statement (COSE_Sign1, base64) the receipt is over: what a verifier checks it against. */
  statement?: string;
  published_at?: string;
  /** Attempts so far (including one running now). */
  attempts: number;
  /** The error of the last failed attempt, while the job is queued. */
  last_error?: string;
  /**
   * While queued: when the job is due again (after a failed attempt, the end of its backoff; while
   * an attempt runs, the end of its lease).
   */
  next_attempt_at?: string;
}

export function transparencyView(job: TransparencyJob, opts: { position?: boolean } = {}): TransparencyView {
  const view: TransparencyView = { job_id: job.id, status: job.state, attempts: job.attempts };
  if (job.state === 'published' && job.receipt !== null && job.backend !== null && job.entryId !== null) {
    view.backend = job.backend;
    view.mode = job.backend === 'local' ? 'dry_run' : 'published';
    view.entry_id = job.entryId;
    if (opts.position === true && job.logIndex !== null) view.log_index = job.logIndex;
    view.receipt = job.receipt.toString('base64');
    view.receipt_media_type = 'application/cose';
    if (job.statement !== null) view.statement = job.statement.toString('base64');
    if (job.publishedAt !== null) view.published_at = job.publishedAt.toISOString();
  }
  if (job.state === 'queued') {
    if (job.lastError !== null) view.last_error = job.lastError;
    view.next_attempt_at = job.nextAttemptAt.toISOString();
  }
  return view;
}
