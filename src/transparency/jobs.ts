import { backoffDelay } from '../queue/queue-loop.ts';
import type { ClaimedJob, JobState, TransparencyJob, TransparencyJobRepository } from '../vault/index.ts';

export { backoffDelay };

/**
 * The publication queue's policy (the rows are the vault's: src/vault/transparency-jobs.ts): how
 * long a claim is exclusive, how many attempts a job gets, how long it waits between them, and how
 * a job looks from the outside (the API's `transparency` field). Failed jobs stay visible (state
 * `failed`, with `last_error`), never dropped.
 */

export type { ClaimedJob, JobBackend, JobState, Publication, TransparencyJob } from '../vault/index.ts';

export interface RetryPolicy {
  /** Attempts (claims) before a job is left `failed`. */
  readonly maxAttempts: number;
  /** Delay after the first failed attempt; doubles per attempt. */
  readonly baseDelayMs: number;
  /** Cap of the exponential backoff. */
  readonly maxDelayMs: number;
  /** Cap of a server-requested Retry-After. */
  readonly maxRetryAfterMs: number;
  /** How long a claim is exclusive; must exceed the longest submission (client timeouts included). */
  readonly leaseMs: number;
}

export const DEFAULT_RETRY_POLICY: RetryPolicy = Object.freeze({
  maxAttempts: 10,
  baseDelayMs: 2_000,
  maxDelayMs: 10 * 60_000,
  maxRetryAfterMs: 60 * 60_000,
  leaseMs: 2 * 60_000,
});

/**
 * Claims up to `limit` due jobs under `policy` (lease and attempt cap). With `jobIds`, only those
 * jobs are considered (the synchronous publish path).
 */
export function claim(
  jobs: TransparencyJobRepository,
  limit: number,
  options: { policy?: RetryPolicy; jobIds?: readonly string[]; skipBackoff?: boolean } = {},
): Promise<ClaimedJob[]> {
  const policy = options.policy ?? DEFAULT_RETRY_POLICY;
  return jobs.claim(limit, {
    maxAttempts: policy.maxAttempts,
    leaseMs: policy.leaseMs,
    ...(options.jobIds !== undefined ? { jobIds: options.jobIds } : {}),
    ...(options.skipBackoff !== undefined ? { skipBackoff: options.skipBackoff } : {}),
  });
}

export interface FailOptions {
  readonly policy?: RetryPolicy;
  /** Server-requested delay (Retry-After); replaces the exponential backoff, capped. */
  readonly retryAfterMs?: number;
  /** No further attempt can succeed: fail now whatever the attempt count. */
  readonly permanent?: boolean;
  readonly random?: () => number;
}

/**
 * Records a failed attempt: back to `queued` after a backoff (or the server's Retry-After), or
 * `failed` when the attempt cap is reached or the failure is permanent. Returns the updated job, or
 * null when the lease was lost.
 */
export function fail(
  jobs: TransparencyJobRepository,
  job: ClaimedJob,
  error: string,
  options: FailOptions = {},
): Promise<TransparencyJob | null> {
  const policy = options.policy ?? DEFAULT_RETRY_POLICY;
  const final = options.permanent === true || job.attempts >= policy.maxAttempts;
  const delay =
    options.retryAfterMs !== undefined
      ? Math.min(Math.max(0, options.retryAfterMs), policy.maxRetryAfterMs)
      : backoffDelay(job.attempts, policy, options.random);
  return jobs.fail(job, { state: final ? 'failed' : 'queued', error, delayMs: final ? 0 : delay });
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
  attempts: number;
  last_error?: string;
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
  if (job.state !== 'published' && job.lastError !== null) view.last_error = job.lastError;
  return view;
}
