import type pg from 'pg';
import type { StoredTimestamp } from './types.ts';
import { asUnknownRecord } from './partitions.ts';

/**
 * RFC 3161 time-stamps of the records (migration 0013): `timestamp_jobs`, the queue a record joins
 * in its append transaction, and `attestation_timestamps`, the append-only result. Stampers of any
 * replica claim due jobs with `FOR UPDATE SKIP LOCKED` under a lease (a random token); only the
 * token holder may store the time-stamp (which settles the job) or record a failed attempt. The
 * retry policy and what is time-stamped are the caller's (src/timestamp/stamper.ts).
 */

/** NOTIFY channel (no payload) of jobs enqueued, in the transaction of the records. */
export const TIMESTAMP_DUE_CHANNEL = 'aibom_vault_timestamp_due';

export type TimestampJobState = 'queued' | 'done' | 'failed';

export interface TimestampJob {
  readonly attestationId: string;
  readonly state: TimestampJobState;
  readonly attempts: number;
  readonly nextAttemptAt: Date;
  readonly leaseToken: string | null;
  readonly lastError: string | null;
  readonly createdAt: Date;
}

/** A job this stamper holds the lease of. */
export interface ClaimedTimestampJob extends TimestampJob {
  readonly leaseToken: string;
}

export interface TimestampRepository {
  /** Jobs for these records, unless they have one (idempotent). Outside an append: an operator's backfill. */
  enqueue(attestationIds: readonly string[]): Promise<void>;
  /** Claims up to `limit` due jobs, each leased for `leaseMs`. */
  claim(limit: number, leaseMs: number): Promise<ClaimedTimestampJob[]>;
  /** Stores the time-stamp and settles the job; false when the lease was lost. */
  complete(job: ClaimedTimestampJob, stamp: StoredTimestamp): Promise<boolean>;
  /** A failed attempt: due again after `delayMs`, or `failed` for good (`final`); false when the lease was lost. */
  fail(
    job: ClaimedTimestampJob,
    outcome: { final: boolean; error: string; delayMs: number },
  ): Promise<boolean>;
  /** The job of a record, or null. */
  job(attestationId: string): Promise<TimestampJob | null>;
  /** The stored time-stamp of a record, or null. */
  get(attestationId: string): Promise<StoredTimestamp | null>;
  /** Milliseconds until the earliest queued job is due (≤ 0: one is due now); null when none is queued. */
  nextDueInMs(): Promise<number | null>;
  /** Counts per state (metrics). */
  stats(): Promise<Record<TimestampJobState, number>>;
}

interface JobRow {
  attestation_id: string;
  state: TimestampJobState;
  attempts: number;
  next_attempt_at: Date;
  lease_token: string | null;
  last_error: string | null;
  created_at: Date;
}

const JOB_COLUMNS = 'attestation_id, state, attempts, next_attempt_at, lease_token, last_error, created_at';

const toJob = (r: JobRow): TimestampJob => ({
  attestationId: r.attestation_id,
  state: r.state,
  attempts: r.attempts,
  nextAttemptAt: r.next_attempt_at,
  leaseToken: r.lease_token,
  lastError: r.last_error,
  createdAt: r.created_at,
});

type Queryable = pg.Pool | pg.PoolClient;

/** Inside the append transaction (attestations.ts): one statement for the batch. */
export async function enqueueTimestampJobs(q: Queryable, attestationIds: readonly string[]): Promise<void> {
  if (attestationIds.length === 0) return;
  await q
    .query({
      name: 'timestamp_jobs_enqueue',
      text: 'INSERT INTO timestamp_jobs (attestation_id) SELECT unnest($1::uuid[]) ON CONFLICT (attestation_id) DO NOTHING',
      values: [[...new Set(attestationIds)]],
    })
    .catch((err: unknown) => {
      throw asUnknownRecord(err, 'timestamp_jobs');
    });
}

/**
 * The time-stamp of each record in a read, as one JSON column (NULL without one): a primary-key
 * probe per record. Base64 without the line breaks `encode` inserts. See rows.ts.
 */
export const TIMESTAMP_COLUMN =
  "(SELECT jsonb_build_object('gen_time', t.gen_time, 'tsa', t.tsa, 'serial', t.serial, " +
  "'response', translate(encode(t.response, 'base64'), E'\\n', '')) " +
  'FROM attestation_timestamps t WHERE t.attestation_id = attestations.id) AS timestamp';

/** The JSON of {@link TIMESTAMP_COLUMN}. */
export interface TimestampJson {
  gen_time: string;
  tsa: string;
  serial: string;
  response: string;
}

export function storedTimestampOf(j: TimestampJson): StoredTimestamp {
  return {
    genTime: new Date(j.gen_time),
    tsa: j.tsa,
    serial: j.serial,
    response: Buffer.from(j.response, 'base64'),
  };
}

export function timestampRepository(pool: pg.Pool): TimestampRepository {
  return {
    enqueue: (ids) => enqueueTimestampJobs(pool, ids),

    async claim(limit, leaseMs) {
      if (!Number.isInteger(limit) || limit < 1) throw new RangeError('claim limit must be ≥ 1');
      const { rows } = await pool.query<JobRow>({
        name: 'timestamp_jobs_claim',
        text: `SELECT ${JOB_COLUMNS} FROM timestamp_jobs_claim($1, $2)`,
        values: [limit, Math.max(1, Math.round(leaseMs))],
      });
      return rows.map((r) => toJob(r) as ClaimedTimestampJob);
    },

    async complete(job, stamp) {
      const { rows } = await pool.query<{ ok: boolean }>({
        name: 'timestamp_jobs_complete',
        text: 'SELECT timestamp_jobs_complete($1, $2, $3, $4, $5, $6) AS ok',
        values: [job.attestationId, job.leaseToken, stamp.genTime, stamp.tsa, stamp.serial, stamp.response],
      });
      return rows[0]?.ok === true;
    },

    async fail(job, outcome) {
      const { rows } = await pool.query<{ ok: boolean }>({
        name: 'timestamp_jobs_fail',
        text: 'SELECT timestamp_jobs_fail($1, $2, $3, $4, $5) AS ok',
        values: [
          job.attestationId,
          job.leaseToken,
          outcome.final,
          outcome.error.slice(0, 2000),
          Math.max(0, Math.round(outcome.delayMs)),
        ],
      });
      return rows[0]?.ok === true;
    },

    async job(attestationId) {
      const { rows } = await pool.query<JobRow>({
        name: 'timestamp_jobs_get',
        text: `SELECT ${JOB_COLUMNS} FROM timestamp_jobs WHERE attestation_id = $1::uuid`,
        values: [attestationId],
      });
      return rows[0] === undefined ? null : toJob(rows[0]);
    },

    async get(attestationId) {
      const { rows } = await pool.query<{ gen_time: Date; tsa: string; serial: string; response: Buffer }>({
        name: 'attestation_timestamps_get',
        text: 'SELECT gen_time, tsa, serial, response FROM attestation_timestamps WHERE attestation_id = $1::uuid',
        values: [attestationId],
      });
      const r = rows[0];
      return r === undefined
        ? null
        : { genTime: r.gen_time, tsa: r.tsa, serial: r.serial, response: r.response };
    },

    async nextDueInMs() {
      const { rows } = await pool.query<{ ms: number | null }>({
        name: 'timestamp_jobs_next_due',
        text:
          'SELECT (extract(epoch FROM min(next_attempt_at) - clock_timestamp()) * 1000)::float8 AS ms ' +
          `FROM timestamp_jobs WHERE state = 'queued'`,
      });
      return rows[0]?.ms ?? null;
    },

    async stats() {
      const { rows } = await pool.query<{ state: TimestampJobState; n: string }>(
        'SELECT state, count(*) AS n FROM timestamp_jobs GROUP BY state',
      );
      const out: Record<TimestampJobState, number> = { queued: 0, done: 0, failed: 0 };
      for (const r of rows) out[r.state] = Number(r.n);
      return out;
    },
  };
}
