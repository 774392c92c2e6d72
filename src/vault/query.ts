import type pg from 'pg';
import { type CursorCodec, fingerprint } from './cursor.ts';
import { VaultError } from './errors.ts';
import { ATTESTATION_COLUMNS, toStored, type AttestationRow } from './rows.ts';
import { STAPLED_JOIN, stapledOfJoinedRow } from './stapled.ts';
import { JOBS_JOIN, jobOfJoinedRow, type TransparencyJob } from './transparency-jobs.ts';
import { ATTESTATION_KINDS, type AttestationKind, type StoredAttestation } from './types.ts';

/** All present fields are ANDed. */
export interface AttestationFilter {
  /** Namespaces the caller may read, from the auth layer. Empty means nothing is visible. */
  readonly namespaces: readonly string[];
  /** Exact subject string, e.g. `step:<run_id>:<step_id>`. */
  readonly subject?: string;
  /** Every attestation of the run (run, steps, artifacts). */
  readonly runId?: string;
  readonly stepId?: string;
  /** `sha256:<hex>` of an artifact the statement is about. */
  readonly artifactDigest?: string;
  readonly policyPack?: string;
  /** Only with `policyPack`. */
  readonly policyVersion?: string;
  readonly capabilityTokenId?: string;
  readonly kind?: AttestationKind;
  /** Half-open window on `created_at`: from ≤ created_at < to. */
  readonly from?: Date;
  readonly to?: Date;
  /** Only these records (lower-case UUIDs), ANDed with the rest like every field. */
  readonly ids?: readonly string[];
}

export interface PageRequest {
  /** Default 100; values above 1000 are capped at 1000. */
  readonly limit?: number;
  /** `nextCursor` of the previous page, for the same filter. */
  readonly cursor?: string | null;
  /** Each item's SCITT job too (`Page.jobs`), joined in the page's own query: one round trip. */
  readonly withTransparencyJobs?: boolean;
}

/**
 * A LEFT JOIN onto a page, so that data kept beside the attestations (the transparency jobs, what an
 * AIBOM's manifest staples) comes back in the same round trip. The page rows are `q`; `clause` and
 * `columns` are constant SQL (never input), `name` tells the prepared statements apart, and the
 * joined table must have at most one row per attestation.
 */
interface PageJoin {
  readonly name: string;
  /** e.g. `LEFT JOIN transparency_jobs tj ON tj.attestation_id = q.id` */
  readonly clause: string;
  /** e.g. `tj.id AS tj_id, tj.state AS tj_state`: aliased apart from the attestation columns. */
  readonly columns: string;
}

export interface Page {
  readonly items: StoredAttestation[];
  /** Null when no row followed this page at the time of the query. */
  readonly nextCursor: string | null;
  /** With `withTransparencyJobs`: each item's job (null when it has none), in item order. */
  readonly jobs?: readonly (TransparencyJob | null)[];
}

/** A row read with PageJoins: the attestation's columns and the joins' (aliased apart). */
type JoinedRow = AttestationRow & Readonly<Record<string, unknown>>;

export const DEFAULT_LIMIT = 100;
export const MAX_LIMIT = 1000;
export const STREAM_BATCH = 1000;

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/;

/** One attestation, or null when absent or outside `namespaces` (absence and denial look alike). */
export async function getAttestation(
  pool: pg.Pool,
  id: string,
  options: { namespaces?: readonly string[] } = {},
): Promise<StoredAttestation | null> {
  const key = id.toLowerCase();
  if (!UUID.test(key)) return null;
  const { rows } = await pool.query<JoinedRow>({
    name: 'vault_get_by_id_st',
    text: joined(`SELECT ${ATTESTATION_COLUMNS} FROM attestations WHERE id = $1::uuid`, [STAPLED_JOIN]),
    values: [key],
  });
  const row = rows[0];
  if (row === undefined) return null;
  if (options.namespaces !== undefined && !options.namespaces.includes(row.namespace)) return null;
  return stapledOfJoinedRow(toStored(row), row);
}

/** Many records by id in one query (ids that are not UUIDs or not stored are absent). */
export async function getAttestations(
  pool: pg.Pool,
  ids: readonly string[],
): Promise<Map<string, StoredAttestation>> {
  const keys = [...new Set(ids.map((id) => id.toLowerCase()).filter((id) => UUID.test(id)))];
  if (keys.length === 0) return new Map();
  // What the AIBOM's manifest staples comes in the same statement (one round trip per batch of GETs).
  const { rows } = await pool.query<JoinedRow>({
    name: 'vault_get_by_ids_st',
    text: joined(`SELECT ${ATTESTATION_COLUMNS} FROM attestations WHERE id = ANY($1::uuid[])`, [
      STAPLED_JOIN,
    ]),
    values: [keys],
  });
  return new Map(rows.map((row) => [row.id, stapledOfJoinedRow(toStored(row), row)]));
}

/**
 * One page in id order (= insert order). Keyset pagination: each page continues strictly after the
 * previous page's last id, so pages stay correct while writers append (ids of later commits are
 * always greater than every id visible before).
 */
export async function queryAttestations(
  pool: pg.Pool,
  cursors: CursorCodec,
  filter: AttestationFilter,
  page: PageRequest = {},
): Promise<Page> {
  validateFilter(filter);
  const limit = pageLimit(page.limit);
  const fp = filterFingerprint(filter);
  const after = page.cursor == null ? null : cursors.decode(page.cursor, fp);
  if (filter.namespaces.length === 0) return { items: [], nextCursor: null };
  // The page, what the AIBOM manifests staple and (asked for) the transparency jobs: one statement.
  const withJobs = page.withTransparencyJobs === true;
  const rows = await selectBatch(
    pool,
    filter,
    after,
    null,
    limit + 1,
    withJobs ? [STAPLED_JOIN, JOBS_JOIN] : [STAPLED_JOIN],
  );
  const kept = rows.slice(0, limit);
  const items = kept.map((row) => stapledOfJoinedRow(toStored(row), row));
  const last = items.at(-1);
  return {
    items,
    nextCursor: rows.length > limit && last !== undefined ? cursors.encode(last.id, fp) : null,
    ...(withJobs ? { jobs: kept.map((r) => jobOfJoinedRow(r)) } : {}),
  };
}

/**
 * Every matching row in id order, fetched in keyset batches (one short query each, no long
 * transaction), so memory stays flat at any result size. The stream ends at the chain head read
 * when it starts: an export is a consistent prefix of the vault, not a moving target.
 */
export async function* streamAttestations(
  pool: pg.Pool,
  filter: AttestationFilter,
  options: StreamOptions = {},
): AsyncGenerator<StoredAttestation, void, undefined> {
  validateFilter(filter);
  const batchSize = options.batchSize ?? STREAM_BATCH;
  if (!Number.isInteger(batchSize) || batchSize < 1)
    throw new VaultError('INVALID_INPUT', 'batchSize must be ≥ 1');
  if (filter.namespaces.length === 0) return;
  const until = options.until !== undefined ? options.until : await headId(pool);
  if (until === null) return;
  yield* batches(
    async (after) =>
      (await selectBatch(pool, filter, after, until, batchSize, [STAPLED_JOIN])).map((row) =>
        stapledOfJoinedRow(toStored(row), row),
      ),
    batchSize,
    options.readAhead === true,
    (r) => r,
    options.after ?? null,
  );
}

/**
 * Keyset batches in id order, each row mapped by `map`. With `readAhead`, the query for the next
 * batch is sent as soon as a full batch has arrived, so PostgreSQL produces it while the caller
 * works through this one (two batches in memory instead of one).
 */
async function* batches<R extends { id: string }, T>(
  fetch: (after: string | null) => Promise<R[]>,
  batchSize: number,
  readAhead: boolean,
  map: (row: R) => T,
  start: string | null = null,
): AsyncGenerator<T, void, undefined> {
  let pending: Promise<R[]> | null = fetch(start);
  while (pending !== null) {
    const rows: R[] = await pending;
    const last = rows.at(-1);
    pending = null;
    const next = (): Promise<R[]> | null =>
      last !== undefined && rows.length >= batchSize ? fetch(last.id) : null;
    if (readAhead) {
      pending = next();
      // Awaited on the next turn; if the caller stops first, its failure is of no interest.
      pending?.catch(() => undefined);
    }
    for (const r of rows) yield map(r);
    if (!readAhead) pending = next();
  }
}

export interface StreamOptions {
  readonly batchSize?: number;
  /**
   * Last id to include (the chain head some earlier read saw, see {@link selectionSize}); default
   * the head when the stream starts. Two streams with the same filter and `until` yield the same
   * records: stored records never change and later ones have greater ids.
   */
  readonly until?: string | null;
  /** Fetch the next batch while the caller consumes this one (an export's pass). */
  readonly readAhead?: boolean;
  /** Start after this id (exclusive): with `until`, an id range such as one partition's. */
  readonly after?: string | null;
}

/** Id of the newest record (null while the vault is empty). */
async function headId(pool: pg.Pool): Promise<string | null> {
  const head = await pool.query<{ last_id: string | null }>({
    name: 'vault_head_id',
    text: 'SELECT last_id FROM vault_head',
  });
  return head.rows[0]?.last_id ?? null;
}

/**
 * How many records match `filter` up to the current head, counting at most `max + 1` (enough to
 * tell "over the limit"), and that head: pass it as `until` to stream exactly the counted records.
 */
export async function selectionSize(
  pool: pg.Pool,
  filter: AttestationFilter,
  max: number,
): Promise<{ count: number; until: string | null }> {
  validateFilter(filter);
  const until = await headId(pool);
  if (filter.namespaces.length === 0 || until === null) return { count: 0, until };
  const inner = buildSelect(filter, null, until, max + 1, 'id');
  const { rows } = await pool.query<{ n: number }>({
    name: `${inner.name}_count`,
    text: `SELECT count(*)::int AS n FROM (${inner.text}) AS s`,
    values: inner.values,
  });
  return { count: rows[0]?.n ?? 0, until };
}

function pageLimit(limit: number | undefined): number {
  if (limit === undefined) return DEFAULT_LIMIT;
  if (!Number.isInteger(limit) || limit < 1)
    throw new VaultError('INVALID_INPUT', 'limit must be a positive integer');
  return Math.min(limit, MAX_LIMIT);
}

function validateFilter(f: AttestationFilter): void {
  const bad = (why: string): never => {
    throw new VaultError('INVALID_INPUT', `filter: ${why}`);
  };
  if (!Array.isArray(f.namespaces) || f.namespaces.some((n) => typeof n !== 'string')) {
    bad('namespaces must be a list of strings');
  }
  if (f.runId !== undefined && !UUID.test(f.runId)) bad('runId must be a lowercase UUID');
  if (f.ids !== undefined && !f.ids.every((id: unknown) => typeof id === 'string' && UUID.test(id))) {
    bad('ids must be lowercase UUIDs');
  }
  if (f.policyVersion !== undefined && f.policyPack === undefined) bad('policyVersion needs policyPack');
  if (f.kind !== undefined && !(ATTESTATION_KINDS as readonly string[]).includes(f.kind)) bad('unknown kind');
  for (const [name, d] of [
    ['from', f.from],
    ['to', f.to],
  ] as const) {
    if (d !== undefined && !(d instanceof Date && Number.isFinite(d.getTime())))
      bad(`${name} must be a valid Date`);
  }
}

/** Everything but the namespaces: a cursor survives a change of the caller's permissions. */
function filterFingerprint(f: AttestationFilter): string {
  return fingerprint([
    f.subject ?? null,
    f.runId ?? null,
    f.stepId ?? null,
    f.artifactDigest ?? null,
    f.policyPack ?? null,
    f.policyVersion ?? null,
    f.capabilityTokenId ?? null,
    f.kind ?? null,
    f.from?.toISOString() ?? null,
    f.to?.toISOString() ?? null,
    ...(f.ids !== undefined ? [[...f.ids].sort().join(',')] : []),
  ]);
}

/** Up to this many namespaces, a namespace-only query runs one ordered index scan per namespace. */
const LATERAL_MAX_NAMESPACES = 8;

/**
 * Builds the query for the filters present. The SQL text depends only on which filters are present
 * (and on the namespace strategy), so each shape gets its own prepared-statement name.
 *
 * Namespaces are always filtered, and the plan must stay bounded however sparse or dense they are:
 * - one namespace: `namespace = $1`, an ordered range scan of (namespace, id);
 * - a few namespaces and no other indexed filter: one ordered (namespace, id) scan per namespace,
 *   each limited, then merged, so a page reads at most namespaces × limit index entries (a filter
 *   on the primary key scan would read the whole table for a rare namespace);
 * - otherwise `namespace = ANY($1)` next to the selective filter, whose index finds the candidates.
 */
async function selectBatch(
  pool: pg.Pool,
  f: AttestationFilter,
  after: string | null,
  until: string | null,
  limit: number,
  joins: readonly PageJoin[],
): Promise<JoinedRow[]> {
  const { name, text, values } = buildSelect(f, after, until, limit, ATTESTATION_COLUMNS);
  const { rows } = await pool.query<JoinedRow>({
    name: [name, ...joins.map((j) => j.name)].join('_'),
    text: `${joined(text, joins)} ORDER BY q.id`,
    values,
  });
  return rows;
}

/**
 * `select` (rows of attestations) as `q` with `joins` LEFT JOINed onto it. The rows are chosen exactly
 * as without the joins (the same inner query and plan); each join only adds columns to them.
 */
function joined(select: string, joins: readonly PageJoin[]): string {
  return (
    `SELECT q.*, ${joins.map((j) => j.columns).join(', ')} FROM (${select}) AS q ` +
    joins.map((j) => j.clause).join(' ')
  );
}

/** The SQL of {@link selectBatch} selecting `columns` (constant SQL, never input). */
function buildSelect(
  f: AttestationFilter,
  after: string | null,
  until: string | null,
  limit: number,
  columns: string,
): { name: string; text: string; values: unknown[] } {
  const selective =
    f.ids !== undefined ||
    f.subject !== undefined ||
    f.runId !== undefined ||
    f.stepId !== undefined ||
    f.artifactDigest !== undefined ||
    f.capabilityTokenId !== undefined ||
    f.policyPack !== undefined;
  const namespaces = [...new Set(f.namespaces)];
  const mode =
    namespaces.length === 1
      ? 'one'
      : !selective && namespaces.length <= LATERAL_MAX_NAMESPACES
        ? 'lat'
        : 'any';
  const values: unknown[] = [mode === 'one' ? namespaces[0] : namespaces];
  const where: string[] = [];
  let shape = 0;
  const add = (bit: number, clause: (p: string) => string, value: unknown): void => {
    values.push(value);
    where.push(clause(`$${values.length}`));
    shape |= 1 << bit;
  };
  if (f.subject !== undefined) add(1, (p) => `subjects @> ARRAY[${p}::text]`, f.subject);
  if (f.runId !== undefined) add(2, (p) => `run_id = ${p}::uuid`, f.runId);
  if (f.stepId !== undefined) add(3, (p) => `step_id = ${p}::text`, f.stepId);
  if (f.artifactDigest !== undefined)
    add(4, (p) => `artifact_digests @> ARRAY[${p}::text]`, f.artifactDigest);
  if (f.policyPack !== undefined) add(5, (p) => `policy_pack = ${p}::text`, f.policyPack);
  if (f.policyVersion !== undefined) add(6, (p) => `policy_version = ${p}::text`, f.policyVersion);
  if (f.capabilityTokenId !== undefined) {
    add(7, (p) => `capability_token_ids @> ARRAY[${p}::text]`, f.capabilityTokenId);
  }
  if (f.kind !== undefined) add(8, (p) => `kind = ${p}::text`, f.kind);
  if (f.ids !== undefined) add(13, (p) => `id = ANY(${p}::uuid[])`, [...f.ids]);
  // created_at never decreases along id (append assigns both under the head lock), so a time window
  // is an id range: its bounds come from two probes of the (created_at, id) index and the main scan
  // stays in id order. The created_at conditions keep the result exact regardless.
  if (f.from !== undefined) {
    add(
      9,
      (p) =>
        `created_at >= ${p}::timestamptz AND id >= (SELECT id FROM attestations ` +
        `WHERE created_at >= ${p}::timestamptz ORDER BY created_at, id LIMIT 1)`,
      f.from,
    );
  }
  if (f.to !== undefined) {
    add(
      10,
      (p) =>
        `created_at < ${p}::timestamptz AND id < COALESCE((SELECT id FROM attestations ` +
        `WHERE created_at >= ${p}::timestamptz ORDER BY created_at, id LIMIT 1), 'ffffffff-ffff-ffff-ffff-ffffffffffff')`,
      f.to,
    );
  }
  if (after !== null) add(11, (p) => `id > ${p}::uuid`, after);
  if (until !== null) add(12, (p) => `id <= ${p}::uuid`, until);
  values.push(limit);
  const lim = `$${values.length}`;
  const rest = where.map((w) => ` AND ${w}`).join('');
  const text =
    mode === 'lat'
      ? `SELECT a.* FROM unnest($1::text[]) AS n(ns) CROSS JOIN LATERAL (SELECT ${columns} ` +
        `FROM attestations WHERE namespace = n.ns${rest} ORDER BY id LIMIT ${lim}) a ORDER BY a.id LIMIT ${lim}`
      : `SELECT ${columns} FROM attestations WHERE ` +
        `${mode === 'one' ? 'namespace = $1::text' : 'namespace = ANY($1::text[])'}${rest} ORDER BY id LIMIT ${lim}`;
  const suffix = columns === ATTESTATION_COLUMNS ? '' : `_${columns.replace(/[^a-z]+/g, '_')}`;
  return { name: `vault_q_${mode}_${shape.toString(16)}${suffix}`, text, values };
}
