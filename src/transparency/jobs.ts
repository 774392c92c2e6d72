import type pg from 'pg';
import { TransparencyError } from './errors.ts';

/**
 * The SCITT publication queue (`transparency_jobs`, migration 0005). One job per attestation,
 * enqueued in the same transaction as the attestation insert, so "stored" and "queued" commit
 * together. Workers claim with `FOR UPDATE SKIP LOCKED` (many replicas never claim the same job)
 * and hold a lease: claiming moves `next_attempt_at` to the lease end and sets a fresh
 * `lease_token`; only the token holder may complete or fail the job, and a worker that dies leaves
 * the job claimable again once the lease ends. Attempts count claims, so a job that kills its
 * worker is capped like one that fails cleanly. Failed jobs stay visible (state `failed`, with
 * `last_error`), never dropped. A published job is immutable (enforced by a trigger).
 */

export type JobState = 'queued' | 'published' | 'failed';
export type JobBackend = 'local' | 'scrapi';

export interface TransparencyJob {
  readonly id: string;
  readonly attestationId: string;
  readonly state: JobState;
  /** Claims so far (including the current one while leased). */
  readonly attempts: number;
  readonly lastError: string | null;
  /** When a queued job is next due; while leased, the lease end. */
  readonly nextAttemptAt: Date;
  /** Non-null while a worker holds the lease (until completion, failure or expiry). */
  readonly leaseToken: string | null;
  /** The signed statement submitted; fixed once chosen, so resubmission is idempotent. */
  readonly statement: Buffer | null;
  readonly entryId: string | null;
  readonly logIndex: number | null;
  readonly receipt: Buffer | null;
  readonly backend: JobBackend | null;
  readonly publishedAt: Date | null;
  readonly createdAt: Date;
  readonly updatedAt: Date;
}

/** A job this worker holds the lease of. */
export interface ClaimedJob extends TransparencyJob {
  readonly leaseToken: string;
}

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
 * Delay before attempt `attempts + 1`: base·2^(attempts−1) capped at max, with "equal jitter"
 * (half fixed, half random) so replicas that failed together do not retry together.
 */
export function backoffDelay(
  attempts: number,
  policy: RetryPolicy,
  random: () => number = Math.random,
): number {
  const exp = Math.min(policy.maxDelayMs, policy.baseDelayMs * 2 ** Math.max(0, attempts - 1));
  return Math.round(exp / 2 + (exp / 2) * random());
}

type Queryable = pg.Pool | pg.PoolClient | pg.Client;

interface JobRow {
  id: string;
  attestation_id: string;
  state: JobState;
  attempts: number;
  last_error: string | null;
  next_attempt_at: Date;
  lease_token: string | null;
  statement: Buffer | null;
  entry_id: string | null;
  log_index: string | null;
  receipt: Buffer | null;
  backend: JobBackend | null;
  published_at: Date | null;
  created_at: Date;
  updated_at: Date;
}

const JOB_COLUMNS =
  'id, attestation_id, state, attempts, last_error, next_attempt_at, lease_token, statement, entry_id, ' +
  'log_index, receipt, backend, published_at, created_at, updated_at';

function prefixed(alias: string): string {
  return JOB_COLUMNS.split(', ')
    .map((c) => `${alias}.${c}`)
    .join(', ');
}

function toJob(r: JobRow): TransparencyJob {
  return {
    id: r.id,
    attestationId: r.attestation_id,
    state: r.state,
    attempts: r.attempts,
    lastError: r.last_error,
    nextAttemptAt: r.next_attempt_at,
    leaseToken: r.lease_token,
    statement: r.statement,
    entryId: r.entry_id,
    logIndex: r.log_index === null ? null : Number(r.log_index),
    receipt: r.receipt,
    backend: r.backend,
    publishedAt: r.published_at,
    createdAt: r.created_at,
    updatedAt: r.updated_at,
  };
}

/**
 * The job of each attestation of a vault page, in the page's own query (`vault.query(filter,
 * { join: JOBS_JOIN })`; at most one job per attestation: `attestation_id` is UNIQUE).
 */
export const JOBS_JOIN = {
  name: 'tj',
  clause: 'LEFT JOIN transparency_jobs tj ON tj.attestation_id = q.id',
  columns: JOB_COLUMNS.split(', ')
    .map((c) => `tj.${c} AS tj_${c}`)
    .join(', '),
} as const;

/** The job in a row of a page queried with JOBS_JOIN, or null when the attestation has none. */
export function jobOfJoinedRow(row: Readonly<Record<string, unknown>>): TransparencyJob | null {
  if (row.tj_id === null || row.tj_id === undefined) return null;
  const r = Object.fromEntries(JOB_COLUMNS.split(', ').map((c) => [c, row[`tj_${c}`]])) as unknown as JobRow;
  return toJob(r);
}

/**
 * Enqueues one job per attestation id (idempotent: an attestation already queued keeps its job).
 * Meant for the vault's `inTransaction` hook:
 * `append(records, { inTransaction: (client, stored) => enqueue(client, stored.map((s) => s.id)).then(() => undefined) })`.
 * One statement; returns the jobs of all given ids visible to it (new and pre-existing).
 */
export async function enqueue(
  q: Queryable,
  attestationIds: readonly string[],
): Promise<{ id: string; attestationId: string }[]> {
  if (attestationIds.length === 0) return [];
  const { rows } = await q.query<{ id: string; attestation_id: string }>({
    name: 'transparency_enqueue',
    text:
      'WITH ins AS (' +
      '  INSERT INTO transparency_jobs (attestation_id) SELECT unnest($1::uuid[]) ' +
      '  ON CONFLICT (attestation_id) DO NOTHING RETURNING id, attestation_id) ' +
      'SELECT id, attestation_id FROM ins ' +
      'UNION ALL ' +
      'SELECT id, attestation_id FROM transparency_jobs WHERE attestation_id = ANY($1::uuid[])',
    values: [[...new Set(attestationIds)]],
  });
  // The second SELECT reads the snapshot from before the INSERT, so no row appears twice.
  return rows.map((r) => ({ id: r.id, attestationId: r.attestation_id }));
}

/**
 * Claims up to `limit` due jobs for this worker (lease of `policy.leaseMs`). Jobs whose lease
 * expired with the attempt cap reached (their worker died on the last attempt) are marked failed
 * first. With `jobIds`, only those jobs are considered (the synchronous publish path).
 */
export async function claim(
  pool: Queryable,
  limit: number,
  options: {
    policy?: RetryPolicy;
    jobIds?: readonly string[];
    /** With `jobIds`: also take jobs waiting out a backoff (not leased ones). An explicit push. */
    skipBackoff?: boolean;
  } = {},
): Promise<ClaimedJob[]> {
  const policy = options.policy ?? DEFAULT_RETRY_POLICY;
  if (!Number.isInteger(limit) || limit < 1) throw new RangeError('claim limit must be ≥ 1');
  const only = options.jobIds === undefined ? null : [...options.jobIds];
  await pool.query({
    name: 'transparency_expire_exhausted',
    text:
      `UPDATE transparency_jobs SET state = 'failed', lease_token = NULL, updated_at = now(), ` +
      `last_error = concat_ws('; ', last_error, 'attempt cap reached: the last attempt''s lease expired') ` +
      `WHERE state = 'queued' AND next_attempt_at <= now() AND attempts >= $1 ` +
      `AND ($2::uuid[] IS NULL OR id = ANY($2::uuid[]))`,
    values: [policy.maxAttempts, only],
  });
  const { rows } = await pool.query<JobRow>({
    name: 'transparency_claim',
    text:
      'WITH due AS (' +
      `  SELECT id FROM transparency_jobs WHERE state = 'queued' ` +
      '  AND (next_attempt_at <= now() OR ($5 AND lease_token IS NULL)) ' +
      '  AND attempts < $2 AND ($4::uuid[] IS NULL OR id = ANY($4::uuid[])) ' +
      '  ORDER BY next_attempt_at, id LIMIT $1 FOR UPDATE SKIP LOCKED) ' +
      'UPDATE transparency_jobs j SET attempts = j.attempts + 1, lease_token = gen_random_uuid(), ' +
      "  next_attempt_at = now() + $3 * interval '1 millisecond', updated_at = now() " +
      `FROM due WHERE j.id = due.id RETURNING ${prefixed('j')}`,
    values: [limit, policy.maxAttempts, policy.leaseMs, only, only !== null && options.skipBackoff === true],
  });
  return rows.map((r) => toJob(r) as ClaimedJob);
}

/**
 * Extends the lease of a job being worked on (a heartbeat while a slow remote is polled); false
 * when the lease was already lost.
 */
export async function renewLease(
  pool: Queryable,
  job: ClaimedJob,
  policy = DEFAULT_RETRY_POLICY,
): Promise<boolean> {
  const { rowCount } = await pool.query({
    name: 'transparency_renew_lease',
    text:
      "UPDATE transparency_jobs SET next_attempt_at = now() + $3 * interval '1 millisecond', " +
      `updated_at = now() WHERE id = $1 AND lease_token = $2 AND state = 'queued'`,
    values: [job.id, job.leaseToken, policy.leaseMs],
  });
  return rowCount === 1;
}

function leaseLost(job: TransparencyJob): TransparencyError {
  return new TransparencyError(
    'LEASE_LOST',
    `transparency job ${job.id}: the lease expired and another worker holds the job`,
    { retryable: false },
  );
}

/**
 * Fixes the job's signed statement: the first one stored wins and is returned (a concurrent or
 * earlier attempt may have stored one already). Throws LEASE_LOST when this worker no longer
 * holds the job.
 */
export async function setStatement(pool: Queryable, job: ClaimedJob, statement: Buffer): Promise<Buffer> {
  const { rows } = await pool.query<{ statement: Buffer }>({
    name: 'transparency_set_statement',
    text:
      'UPDATE transparency_jobs SET statement = $3, updated_at = now() ' +
      `WHERE id = $1 AND lease_token = $2 AND state = 'queued' AND statement IS NULL RETURNING statement`,
    values: [job.id, job.leaseToken, statement],
  });
  if (rows[0] !== undefined) return rows[0].statement;
  const current = await getJob(pool, { id: job.id });
  if (current === null || current.leaseToken !== job.leaseToken || current.state !== 'queued')
    throw leaseLost(job);
  if (current.statement === null) throw new Error(`transparency job ${job.id}: statement was not stored`);
  return current.statement;
}

export interface Publication {
  readonly backend: JobBackend;
  readonly entryId: string;
  readonly logIndex: number | null;
  readonly receipt: Buffer;
}

/**
 * Records the receipt and publishes the job; from then on the row is immutable. Returns the
 * published job, or null when the lease was lost (another worker owns the job now; its own
 * submission of the same statement is idempotent, so nothing is lost).
 */
export async function complete(
  pool: Queryable,
  job: ClaimedJob,
  publication: Publication,
): Promise<TransparencyJob | null> {
  const { rows } = await pool.query<JobRow>({
    name: 'transparency_complete',
    text:
      `UPDATE transparency_jobs SET state = 'published', backend = $3, entry_id = $4, log_index = $5, ` +
      'receipt = $6, last_error = NULL, lease_token = NULL, published_at = now(), ' +
      'updated_at = now() ' +
      `WHERE id = $1 AND lease_token = $2 AND state = 'queued' RETURNING ${JOB_COLUMNS}`,
    values: [
      job.id,
      job.leaseToken,
      publication.backend,
      publication.entryId,
      publication.logIndex,
      publication.receipt,
    ],
  });
  return rows[0] === undefined ? null : toJob(rows[0]);
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
export async function fail(
  pool: Queryable,
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
  const { rows } = await pool.query<JobRow>({
    name: 'transparency_fail',
    text:
      'UPDATE transparency_jobs SET state = $3, last_error = $4, lease_token = NULL, ' +
      "next_attempt_at = now() + $5 * interval '1 millisecond', updated_at = now() " +
      `WHERE id = $1 AND lease_token = $2 AND state = 'queued' RETURNING ${JOB_COLUMNS}`,
    values: [job.id, job.leaseToken, final ? 'failed' : 'queued', error.slice(0, 2000), final ? 0 : delay],
  });
  return rows[0] === undefined ? null : toJob(rows[0]);
}

/** Puts a failed job back in the queue with a fresh attempt budget (an operator's retry). */
export async function requeue(pool: Queryable, jobId: string): Promise<TransparencyJob | null> {
  const { rows } = await pool.query<JobRow>({
    name: 'transparency_requeue',
    text:
      `UPDATE transparency_jobs SET state = 'queued', attempts = 0, lease_token = NULL, ` +
      'next_attempt_at = now(), updated_at = now() ' +
      `WHERE id = $1 AND state = 'failed' RETURNING ${JOB_COLUMNS}`,
    values: [jobId],
  });
  return rows[0] === undefined ? null : toJob(rows[0]);
}

export async function getJob(
  pool: Queryable,
  key: { id: string } | { attestationId: string },
): Promise<TransparencyJob | null> {
  const byId = 'id' in key;
  const { rows } = await pool.query<JobRow>({
    name: byId ? 'transparency_get_job' : 'transparency_get_job_by_attestation',
    text: `SELECT ${JOB_COLUMNS} FROM transparency_jobs WHERE ${byId ? 'id' : 'attestation_id'} = $1::uuid`,
    values: [byId ? key.id : key.attestationId],
  });
  return rows[0] === undefined ? null : toJob(rows[0]);
}

/** Jobs of several attestations (for list responses), keyed by attestation id. */
export async function getJobsByAttestation(
  pool: Queryable,
  attestationIds: readonly string[],
): Promise<Map<string, TransparencyJob>> {
  if (attestationIds.length === 0) return new Map();
  const { rows } = await pool.query<JobRow>({
    name: 'transparency_get_jobs_by_attestation',
    text: `SELECT ${JOB_COLUMNS} FROM transparency_jobs WHERE attestation_id = ANY($1::uuid[])`,
    values: [[...attestationIds]],
  });
  return new Map(rows.map((r) => [r.attestation_id, toJob(r)]));
}

/** Counts per state: for metrics and readiness. */
export async function queueStats(pool: Queryable): Promise<Record<JobState, number>> {
  const { rows } = await pool.query<{ state: JobState; n: string }>(
    'SELECT state, count(*) AS n FROM transparency_jobs GROUP BY state',
  );
  const out: Record<JobState, number> = { queued: 0, published: 0, failed: 0 };
  for (const r of rows) out[r.state] = Number(r.n);
  return out;
}

/**
 * The `transparency` field of the API envelope and of the AIBOM metadata (spec: the job id while
 * queued, then the final receipt; the receipt records dry run vs published). Snake case like the
 * rest of the API; the receipt is base64 of the COSE bytes.
 */
export interface TransparencyView {
  job_id: string;
  status: JobState;
  /** `local`: appended to this service's own log (dry run); `scrapi`: a remote SCITT service. */
  backend?: JobBackend;
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

export function transparencyView(job: TransparencyJob): TransparencyView {
  const view: TransparencyView = { job_id: job.id, status: job.state, attempts: job.attempts };
  if (job.state === 'published' && job.receipt !== null && job.backend !== null && job.entryId !== null) {
    view.backend = job.backend;
    view.mode = job.backend === 'local' ? 'dry_run' : 'published';
    view.entry_id = job.entryId;
    if (job.logIndex !== null) view.log_index = job.logIndex;
    view.receipt = job.receipt.toString('base64');
    view.receipt_media_type = 'application/cose';
    if (job.statement !== null) view.statement = job.statement.toString('base64');
    if (job.publishedAt !== null) view.published_at = job.publishedAt.toISOString();
  }
  if (job.state !== 'published' && job.lastError !== null) view.last_error = job.lastError;
  return view;
}
