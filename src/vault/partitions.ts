import pg from 'pg';

/**
 * The monthly partitions of `attestations` (migration 0019, docs/vault.md "Partitions"): creating
 * them ahead, and listing what the vault holds and held. Since migration 0020 the job tables and the
 * time-stamps follow the records' months and the audit log has months of its own: created ahead by
 * the same call, retired with the records (listed in `vault_partitions` under their own parent). Partitions are RANGE bounds on the
 * UUIDv7 id, one per UTC month; `vault_partitions` keeps one row per partition for ever.
 */

export type PartitionState = 'attached' | 'archived' | 'detached' | 'dropped';

export interface PartitionInfo {
  readonly name: string;
  /** Smallest id of the range (null: MINVALUE, the table the vault had before partitioning). */
  readonly lo: string | null;
  /** First id above the range. */
  readonly hi: string;
  readonly from: Date | null;
  readonly to: Date;
  readonly state: PartitionState;
  /** Set once archived: what the bundle holds. */
  readonly records: number | null;
  readonly firstSeq: number | null;
  readonly lastSeq: number | null;
  /** Object key of the archive bundle and its `sha256:<hex>`. */
  readonly archiveKey: string | null;
  readonly archiveDigest: string | null;
}

/** Months created ahead of the current one when nothing else says (VAULT_PARTITIONS_AHEAD). */
export const DEFAULT_PARTITIONS_AHEAD = 3;

interface PartitionRow {
  name: string;
  lo: string | null;
  hi: string;
  from_at: Date | null;
  to_at: Date;
  state: PartitionState;
  records: string | null;
  first_seq: string | null;
  last_seq: string | null;
  archive_key: string | null;
  archive_digest: string | null;
}

const num = (v: string | null): number | null => (v === null ? null : Number(v));

export function toPartitionInfo(r: PartitionRow): PartitionInfo {
  return {
    name: r.name,
    lo: r.lo,
    hi: r.hi,
    from: r.from_at,
    to: r.to_at,
    state: r.state,
    records: num(r.records),
    firstSeq: num(r.first_seq),
    lastSeq: num(r.last_seq),
    archiveKey: r.archive_key,
    archiveDigest: r.archive_digest,
  };
}

export const PARTITION_COLUMNS =
  'name, lo, hi, from_at, to_at, state, records, first_seq, last_seq, archive_key, archive_digest';

type Queryable = Pick<pg.Pool, 'query'> | Pick<pg.PoolClient, 'query'>;

/**
 * Creates the monthly partitions from the last one up to `monthsAhead` months after the current
 * one (the runtime role may: the function runs as the owner and only ever adds partitions).
 * Returns the names it created; none when they exist already.
 */
export async function ensurePartitions(
  db: Queryable,
  monthsAhead = DEFAULT_PARTITIONS_AHEAD,
): Promise<string[]> {
  const { rows } = await db.query<{ name: string }>('SELECT vault_partitions_ensure($1) AS name', [
    monthsAhead,
  ]);
  return rows.map((r) => r.name);
}

/** Every partition the vault has had, oldest first. */
export async function listPartitions(db: Queryable): Promise<PartitionInfo[]> {
  const { rows } = await db.query<PartitionRow>(
    `SELECT ${PARTITION_COLUMNS} FROM vault_partitions WHERE parent = 'attestations' ORDER BY hi`,
  );
  return rows.map(toPartitionInfo);
}

/**
 * True for PostgreSQL's refusal of a row no partition accepts (23514, "no partition of relation
 * … found for row"): the months ahead ran out (the controller was stopped for longer than
 * VAULT_PARTITIONS_AHEAD months, or the clock jumped).
 */
export function isNoPartition(err: unknown): boolean {
  const e = err as { code?: unknown; message?: unknown } | null;
  return (
    typeof e === 'object' &&
    e !== null &&
    e.code === '23514' &&
    typeof e.message === 'string' &&
    e.message.startsWith('no partition of relation')
  );
}

/**
 * A job row whose record id lies outside every partition of its table (migration 0020) names no
 * stored record: every record's month has job partitions beside it. PostgreSQL routes a row before
 * the reference trigger can refuse it, so such an insert fails with 23514 "no partition"; this
 * turns that into the trigger's 23503 "attestation … does not exist", as before partitioning.
 */
export function asUnknownRecord(err: unknown, table: string): unknown {
  if (!isNoPartition(err) || !(err as Error).message.startsWith(`no partition of relation "${table}"`))
    return err;
  const e = new pg.DatabaseError(`a ${table} row names an attestation that does not exist`, 0, 'error');
  e.code = '23503';
  e.severity = 'ERROR';
  e.table = table;
  return e;
}

/** What an archive bundle of one partition holds (checked by the database against the partition). */
export interface PartitionArchive {
  readonly records: number;
  readonly firstSeq: number | null;
  readonly lastSeq: number | null;
  /** Object key of the bundle; '' for an empty partition (nothing written). */
  readonly key: string;
  /** `sha256:<hex>` of the bundle's bytes; null for an empty partition. */
  readonly digest: string | null;
}

/** The partitions of the vault: created ahead, listed, archived and detached (retention). */
export interface PartitionRepository {
  ensure(monthsAhead?: number): Promise<string[]>;
  list(): Promise<PartitionInfo[]>;
  /** The first and last record id of a partition's range (null when it holds none). */
  bounds(p: PartitionInfo): Promise<{ first: string; last: string; count: number } | null>;
  /**
   * The next `limit` records after `after` (exclusive; null: from the start) up to `until`
   * (inclusive), in id order: their first and last id and seq, and how many (null when none).
   */
  span(
    after: string | null,
    until: string,
    limit: number,
  ): Promise<{ firstId: string; firstSeq: number; lastId: string; lastSeq: number; count: number } | null>;
  /**
   * Jobs still queued in the job partitions that leave with `p` (migration 0020: the companions
   * whose range ends at or before `p.hi`); the database refuses to detach `p` while any are.
   */
  queuedJobs(p: PartitionInfo): Promise<{ transparency: number; timestamp: number }>;
  /** Records that `p` was archived (23001 when it is not attached, not past, not checkpointed or differs). */
  archived(name: string, archive: PartitionArchive): Promise<void>;
  /** Detaches (or with `drop`, drops) an archived partition. */
  detach(name: string, drop: boolean): Promise<void>;
}

export function partitionRepository(pool: pg.Pool): PartitionRepository {
  return {
    ensure: (monthsAhead) => ensurePartitions(pool, monthsAhead),
    list: () => listPartitions(pool),
    async bounds(p) {
      const { rows } = await pool.query<{ first: string | null; last: string | null; n: string }>(
        'SELECT (SELECT id FROM attestations WHERE ($1::uuid IS NULL OR id >= $1) AND id < $2 ORDER BY id LIMIT 1) AS first, ' +
          '(SELECT id FROM attestations WHERE ($1::uuid IS NULL OR id >= $1) AND id < $2 ORDER BY id DESC LIMIT 1) AS last, ' +
          '(SELECT count(*) FROM attestations WHERE ($1::uuid IS NULL OR id >= $1) AND id < $2) AS n',
        [p.lo, p.hi],
      );
      const r = rows[0];
      return r?.first == null || r.last == null ? null : { first: r.first, last: r.last, count: Number(r.n) };
    },
    async span(after, until, limit) {
      const { rows } = await pool.query<{
        first_id: string | null;
        first_seq: string | null;
        last_id: string | null;
        last_seq: string | null;
        n: string;
      }>(
        'WITH r AS (SELECT id, seq FROM attestations WHERE ($1::uuid IS NULL OR id > $1) AND id <= $2 ' +
          'ORDER BY id LIMIT $3) ' +
          'SELECT f.id AS first_id, f.seq AS first_seq, l.id AS last_id, l.seq AS last_seq, ' +
          '(SELECT count(*) FROM r) AS n ' +
          'FROM (SELECT id, seq FROM r ORDER BY id LIMIT 1) f, (SELECT id, seq FROM r ORDER BY id DESC LIMIT 1) l',
        [after, until, limit],
      );
      const r = rows[0];
      if (r?.first_id == null || r.last_id == null) return null;
      return {
        firstId: r.first_id,
        firstSeq: Number(r.first_seq),
        lastId: r.last_id,
        lastSeq: Number(r.last_seq),
        count: Number(r.n),
      };
    },
    async queuedJobs(p) {
      // Per queue: up to the end of its last attached partition that retires with `p` (its first
      // partition may reach further than p; then nothing of it retires yet).
      const queued = (table: string): string =>
        `(SELECT count(*) FROM ${table} j WHERE j.state = 'queued' AND j.attestation_id < ` +
        `(SELECT c.hi FROM vault_partitions c WHERE c.parent = '${table}' AND c.state = 'attached' ` +
        `AND c.hi <= $1::uuid ORDER BY c.hi DESC LIMIT 1))`;
      const { rows } = await pool.query<{ transparency: string; timestamp: string }>(
        `SELECT ${queued('transparency_jobs')} AS transparency, ${queued('timestamp_jobs')} AS timestamp`,
        [p.hi],
      );
      return { transparency: Number(rows[0]?.transparency ?? 0), timestamp: Number(rows[0]?.timestamp ?? 0) };
    },
    async archived(name, a) {
      await pool.query('SELECT vault_partition_archived($1, $2, $3, $4, $5, $6)', [
        name,
        a.records,
        a.firstSeq,
        a.lastSeq,
        a.key,
        a.digest,
      ]);
    },
    async detach(name, drop) {
      await pool.query('SELECT vault_partition_detach($1, $2)', [name, drop]);
    },
  };
}
