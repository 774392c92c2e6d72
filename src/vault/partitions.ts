import type pg from 'pg';

/**
 * The monthly partitions of `attestations` (migration 0019, docs/vault.md "Partitions"): creating
 * them ahead, and listing what the vault holds and held. Partitions are RANGE bounds on the
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
