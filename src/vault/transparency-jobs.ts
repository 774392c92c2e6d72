import type pg from 'pg';
import { asUnknownRecord } from './partitions.ts';

/**
 * Storage of the SCITT publication queue (`transparency_jobs`, migrations 0005 and 0007). One job
 * per attestation, enqueued in the same transaction as the attestation insert (see claims.ts and
 * attestations.ts), so "stored" and "queued" commit together. Workers claim with
 * `FOR UPDATE SKIP LOCKED` (many replicas never claim the same job) and hold a lease: claiming moves
 * `next_attempt_at` to the lease end and sets a fresh `lease_token`; only the token holder may
 * complete or fail the job, and a worker that dies leaves the job claimable again once the lease
 * ends. Attempts count claims. A published job is immutable (enforced by a trigger).
 *
 * Every change a reader cares about (a job enqueued, published, or an attempt failed) is announced on
 * the channel {@link TRANSPARENCY_CHANNEL}, and a job that became claimable on {@link DUE_CHANNEL},
 * by triggers, in the transaction of the change (migration 0007, listener.ts). The retry policy (how long a lease, how many attempts, which backoff) is the
 * caller's: src/transparency/jobs.ts.
 */

/**
 * `queued` until `published`: there is no third state (migration 0017). A job that cannot publish
 * stays queued with its attempts, last error and next attempt (docs/transparency.md).
 */
export type JobState = 'queued' | 'published';
export type JobBackend = 'local' | 'scrapi';

/** NOTIFY channel of job changes; the payload is the comma-separated run ids concerned, or `*`. */
export const TRANSPARENCY_CHANNEL = 'aibom_vault_transparency';
/** NOTIFY channel (no payload) of a job becoming claimable now: enqueued, or put back. */
export const DUE_CHANNEL = 'aibom_vault_transparency_due';

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

/** Job counts of the whole deployment (metrics). */
export interface JobStats {
  readonly queued: number;
  readonly published: number;
  /** Queued jobs whose last attempt failed (they wait out a backoff, or a new attempt runs). */
  readonly retrying: number;
}

export interface Publication {
  readonly backend: JobBackend;
  readonly entryId: string;
  readonly logIndex: number | null;
  readonly receipt: Buffer;
}

/** The job of one attestation of a run, with what the projection onto Kubernetes needs. */
export interface RunJob {
  readonly attestationId: string;
  readonly kind: string;
  readonly job: TransparencyJob;
}

export interface ClaimOptions {
  /** How long a claim is exclusive. */
  readonly leaseMs: number;
  /** Only these jobs (the synchronous publish path). */
  readonly jobIds?: readonly string[];
  /** With `jobIds`: also take jobs waiting out a backoff (not leased ones). An explicit push. */
  readonly skipBackoff?: boolean;
}

export interface TransparencyJobRepository {
  /**
   * One job per attestation id (idempotent: an attestation already queued keeps its job); returns
   * the jobs of all given ids (new and pre-existing). An unknown attestation is SQLSTATE 23503.
   */
  enqueue(attestationIds: readonly string[]): Promise<{ id: string; attestationId: string }[]>;
  /** Claims up to `limit` due jobs (lease of `leaseMs`). */
  claim(limit: number, options: ClaimOptions): Promise<ClaimedJob[]>;
  /** Extends the lease (a heartbeat while a slow remote is polled); false when it was lost. */
  renewLease(job: ClaimedJob, leaseMs: number): Promise<boolean>;
  /**
   * Fixes the job's signed statement: the first one stored wins and is returned. Null when this
   * worker no longer holds the job.
   */
  setStatement(job: ClaimedJob, statement: Buffer): Promise<Buffer | null>;
  /** Records the receipt and publishes the job (immutable from then on); null when the lease was lost. */
  complete(job: ClaimedJob, publication: Publication): Promise<TransparencyJob | null>;
  /** Records a failed attempt: the job stays queued, due again after `delayMs`; null when the lease was lost. */
  fail(job: ClaimedJob, outcome: { error: string; delayMs: number }): Promise<TransparencyJob | null>;
  get(key: { id: string } | { attestationId: string }): Promise<TransparencyJob | null>;
  /** Jobs of several attestations, keyed by attestation id. */
  getByAttestation(attestationIds: readonly string[]): Promise<Map<string, TransparencyJob>>;
  /** The run (null when not mirrored) and the jobs of its attestations, in attestation order. */
  forRun(
    runId: string,
  ): Promise<{ run: { namespace: string; name: string } | null; jobs: RunJob[]; records: number }>;
  /** Counts per state, and of the queued jobs whose last attempt failed: for metrics. */
  stats(): Promise<JobStats>;
  /** Seconds since the oldest queued job was enqueued; null when none is queued (metrics). */
  oldestQueuedAgeSeconds(): Promise<number | null>;
  /** Milliseconds until the earliest queued job (or lease) is due, ≤ 0 when one is due now; null when none is queued. */
  nextDueInMs(): Promise<number | null>;
}

export interface JobRow {
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
 * The job of each attestation of a page, in the page's own query (one round trip; at most one job
 * per attestation: `attestation_id` is UNIQUE). See query.ts `PageJoin`.
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

type Queryable = pg.Pool | pg.PoolClient;

/** Inside the append transaction (attestations.ts, claims.ts): one statement. */
export async function enqueueJobs(
  q: Queryable,
  attestationIds: readonly string[],
): Promise<{ id: string; attestationId: string }[]> {
  if (attestationIds.length === 0) return [];
  const { rows } = await q
    .query<{ id: string; attestation_id: string }>({
      name: 'transparency_enqueue',
      text:
        'WITH ins AS (' +
        '  INSERT INTO transparency_jobs (attestation_id) SELECT unnest($1::uuid[]) ' +
        '  ON CONFLICT (attestation_id) DO NOTHING RETURNING id, attestation_id) ' +
        'SELECT id, attestation_id FROM ins ' +
        'UNION ALL ' +
        'SELECT id, attestation_id FROM transparency_jobs WHERE attestation_id = ANY($1::uuid[])',
      values: [[...new Set(attestationIds)]],
    })
    .catch((err: unknown) => {
      throw asUnknownRecord(err, 'transparency_jobs');
    });
  // The second SELECT reads the snapshot from before the INSERT, so no row appears twice.
  return rows.map((r) => ({ id: r.id, attestationId: r.attestation_id }));
}

/** A row of `forRun`: the run, one of its records (null when it has none) and that record's job (null columns when none). */
export type RunJobRow = {
  run_namespace: string;
  run_name: string;
  a_id: string | null;
  a_kind: string | null;
} & {
  [K in keyof JobRow]: JobRow[K] | null;
};

/**
 * The run and its jobs from the rows of `forRun` (no row: the run is not mirrored). Every record of
 * the run is a row (LEFT JOIN), with or without a job: the summary counts those without one as not
 * published, so `records` counts rows with a record, `jobs` only those with a job.
 */
export function runJobsOf(rows: readonly RunJobRow[]): {
  run: { namespace: string; name: string } | null;
  jobs: RunJob[];
  records: number;
} {
  const first = rows[0];
  if (first === undefined) return { run: null, jobs: [], records: 0 };
  const jobs: RunJob[] = [];
  let records = 0;
  for (const r of rows) {
    if (r.a_id !== null) records += 1;
    if (r.a_id === null || r.id === null) continue;
    jobs.push({ attestationId: r.a_id, kind: r.a_kind!, job: toJob(r as JobRow) });
  }
  return { run: { namespace: first.run_namespace, name: first.run_name }, jobs, records };
}

export function transparencyJobRepository(pool: pg.Pool): TransparencyJobRepository {
  const get = async (key: { id: string } | { attestationId: string }): Promise<TransparencyJob | null> => {
    const byId = 'id' in key;
    const { rows } = await pool.query<JobRow>({
      name: byId ? 'transparency_get_job' : 'transparency_get_job_by_attestation',
      text: `SELECT ${JOB_COLUMNS} FROM transparency_jobs WHERE ${byId ? 'id' : 'attestation_id'} = $1::uuid`,
      values: [byId ? key.id : key.attestationId],
    });
    return rows[0] === undefined ? null : toJob(rows[0]);
  };

  return {
    enqueue: (attestationIds) => enqueueJobs(pool, attestationIds),

    // Every change of a job goes through a function (migration 0008): the runtime role has no
    // UPDATE on the queue, and a job's outcome can only be written by the holder of its lease.
    async claim(limit, options) {
      if (!Number.isInteger(limit) || limit < 1) throw new RangeError('claim limit must be ≥ 1');
      const only = options.jobIds === undefined ? null : [...options.jobIds];
      const { rows } = await pool.query<JobRow>({
        name: 'transparency_claim',
        text: `SELECT ${JOB_COLUMNS} FROM transparency_jobs_claim($1, $2, $3::uuid[], $4)`,
        values: [limit, options.leaseMs, only, only !== null && options.skipBackoff === true],
      });
      return rows.map((r) => toJob(r) as ClaimedJob);
    },

    async renewLease(job, leaseMs) {
      const { rows } = await pool.query<{ ok: boolean }>({
        name: 'transparency_renew_lease',
        text: 'SELECT transparency_jobs_renew($1, $2, $3) AS ok',
        values: [job.id, job.leaseToken, leaseMs],
      });
      return rows[0]?.ok === true;
    },

    async setStatement(job, statement) {
      const { rows } = await pool.query<{ statement: Buffer | null }>({
        name: 'transparency_set_statement',
        text: 'SELECT transparency_jobs_set_statement($1, $2, $3) AS statement',
        values: [job.id, job.leaseToken, statement],
      });
      return rows[0]?.statement ?? null;
    },

    async complete(job, publication) {
      const { rows } = await pool.query<JobRow>({
        name: 'transparency_complete',
        text: `SELECT ${JOB_COLUMNS} FROM transparency_jobs_complete($1, $2, $3, $4, $5, $6)`,
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
    },

    async fail(job, outcome) {
      const { rows } = await pool.query<JobRow>({
        name: 'transparency_fail',
        text: `SELECT ${JOB_COLUMNS} FROM transparency_jobs_fail($1, $2, $3, $4)`,
        values: [job.id, job.leaseToken, outcome.error.slice(0, 2000), outcome.delayMs],
      });
      return rows[0] === undefined ? null : toJob(rows[0]);
    },

    get,

    async getByAttestation(attestationIds) {
      if (attestationIds.length === 0) return new Map();
      const { rows } = await pool.query<JobRow>({
        name: 'transparency_get_jobs_by_attestation',
        text: `SELECT ${JOB_COLUMNS} FROM transparency_jobs WHERE attestation_id = ANY($1::uuid[])`,
        values: [[...attestationIds]],
      });
      return new Map(rows.map((r) => [r.attestation_id, toJob(r)]));
    },

    async forRun(runId) {
      // The run's name comes along on every row (and alone when it has no job), in one round trip.
      const { rows } = await pool.query<RunJobRow>({
        name: 'transparency_jobs_for_run',
        text:
          'SELECT r.namespace AS run_namespace, r.name AS run_name, a.id AS a_id, a.kind AS a_kind, ' +
          `${prefixed('j')} FROM runs r ` +
          'LEFT JOIN attestations a ON a.run_id = r.id ' +
          'LEFT JOIN transparency_jobs j ON j.attestation_id = a.id ' +
          'WHERE r.id = $1::uuid ORDER BY a.id',
        values: [runId],
      });
      return runJobsOf(rows);
    },

    async stats() {
      const { rows } = await pool.query<{ queued: string; published: string; retrying: string }>({
        name: 'transparency_stats',
        text:
          "SELECT count(*) FILTER (WHERE state = 'queued') AS queued, " +
          "count(*) FILTER (WHERE state = 'published') AS published, " +
          "count(*) FILTER (WHERE state = 'queued' AND last_error IS NOT NULL) AS retrying " +
          'FROM transparency_jobs',
      });
      const r = rows[0];
      return {
        queued: Number(r?.queued ?? 0),
        published: Number(r?.published ?? 0),
        retrying: Number(r?.retrying ?? 0),
      };
    },

    async oldestQueuedAgeSeconds() {
      // Reads only the queued rows, through the partial index on them.
      const { rows } = await pool.query<{ s: number | null }>({
        name: 'transparency_oldest_queued',
        text:
          'SELECT extract(epoch FROM clock_timestamp() - min(created_at))::float8 AS s ' +
          `FROM transparency_jobs WHERE state = 'queued'`,
      });
      return rows[0]?.s ?? null;
    },

    async nextDueInMs() {
      // The partial index (next_attempt_at, id) WHERE state = 'queued' answers min() with one descent.
      const { rows } = await pool.query<{ ms: number | null }>({
        name: 'transparency_next_due',
        text:
          'SELECT (extract(epoch FROM min(next_attempt_at) - clock_timestamp()) * 1000)::float8 AS ms ' +
          `FROM transparency_jobs WHERE state = 'queued'`,
      });
      return rows[0]?.ms ?? null;
    },
  };
}
