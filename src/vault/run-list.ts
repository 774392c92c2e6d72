import type pg from 'pg';
import type { RunSpec } from '../crd/run.ts';
import { type CursorCodec, fingerprint } from './cursor.ts';
import { VaultError } from './errors.ts';

/**
 * The runs list (GET /v1/runs): the mirrored Runs of some namespaces, newest first, with what a
 * list shows about each (its AIBOM, how many records it has, where their transparency jobs stand),
 * in keyset pages on (created_at, id) behind an opaque, filter-bound cursor (cursor.ts).
 *
 * Cost per page is bounded by the page, not by the namespaces' size: the page's runs come from an
 * index range scan per namespace (migration 0014), at most `limit + 1` rows each, and the
 * per-run counts are computed for the page's rows only.
 */

export interface RunListFilter {
  /** Namespaces to list; `all` only for a caller allowed to list runs cluster-wide. */
  readonly namespaces: readonly string[] | 'all';
  readonly phase?: string;
  /** Runs whose name starts with this. */
  readonly namePrefix?: string;
}

export interface RunListPage {
  readonly limit?: number;
  readonly cursor?: string;
}

/** One row of the list: the run and the counts the list shows. */
export interface RunSummary {
  readonly id: string;
  readonly namespace: string;
  readonly name: string;
  readonly phase: string | null;
  readonly spec: RunSpec;
  readonly createdAt: Date;
  readonly updatedAt: Date;
  /** Digest of the stored AIBOM, null while the run has none. */
  readonly aibomDigest: string | null;
  /** Vault records of the run. */
  readonly attestations: number;
  /**
   * Transparency jobs of the run's records by state; published ones also by backend. Records without
   * a job are in none of these: `attestations` minus their sum (the summary counts them as not
   * published, summaryOfCounts).
   */
  readonly transparency: {
    readonly queued: number;
    readonly published: number;
    /** Queued jobs whose last attempt failed. */
    readonly retrying: number;
    readonly publishedLocal: number;
    readonly publishedRemote: number;
  };
}

/** Reads of the runs list, beside the run repository (runs.ts). */
export interface RunListRepository {
  list(
    filter: RunListFilter,
    page?: RunListPage,
  ): Promise<{ items: RunSummary[]; nextCursor: string | null }>;
  /** Namespaces holding mirrored runs. */
  namespaces(): Promise<string[]>;
}

export function runListRepository(pool: pg.Pool, cursors: CursorCodec): RunListRepository {
  return {
    list: (filter, page) => listRuns(pool, cursors, filter, page),
    namespaces: () => runNamespaces(pool),
  };
}

export const RUN_LIST_DEFAULT_LIMIT = 50;
export const RUN_LIST_MAX_LIMIT = 200;

/** `after` of a runs cursor: the last row's created_at (UTC, microseconds) and id. */
const KEY =
  /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{6}Z\|[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/;

interface Row {
  id: string;
  namespace: string;
  name: string;
  phase: string | null;
  spec: RunSpec;
  created_at: Date;
  updated_at: Date;
  created_key: string;
  aibom_digest: string | null;
  attestations: string;
  queued: string | null;
  published: string | null;
  retrying: string | null;
  published_local: string | null;
  published_remote: string | null;
}

// created_at as text at full precision: a JS Date keeps milliseconds only, and the keyset compares
// microseconds.
const PAGE_COLUMNS =
  'r.id, r.namespace, r.name, r.phase, r.spec, r.created_at, r.updated_at, ' +
  `to_char(r.created_at AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.US"Z"') AS created_key`;

const CONDITIONS =
  '($2::text IS NULL OR r.phase = $2) AND ($3::text IS NULL OR starts_with(r.name, $3)) ' +
  'AND ($4::timestamptz IS NULL OR (r.created_at, r.id) < ($4::timestamptz, $5::uuid))';

const ORDER = 'ORDER BY r.created_at DESC, r.id DESC';

/** Counts for the page's rows only (`p`). */
const WITH_COUNTS =
  'SELECT p.*, ar.digest AS aibom_digest, ' +
  '(SELECT count(*) FROM attestations a WHERE a.run_id = p.id) AS attestations, t.* ' +
  'FROM p LEFT JOIN artifacts ar ON ar.run_id = p.id AND ar.kind = $7 ' +
  'LEFT JOIN LATERAL (SELECT ' +
  "count(*) FILTER (WHERE j.state = 'queued') AS queued, " +
  "count(*) FILTER (WHERE j.state = 'published') AS published, " +
  "count(*) FILTER (WHERE j.state = 'queued' AND j.last_error IS NOT NULL) AS retrying, " +
  "count(*) FILTER (WHERE j.state = 'published' AND j.backend = 'local') AS published_local, " +
  "count(*) FILTER (WHERE j.state = 'published' AND j.backend = 'scrapi') AS published_remote " +
  'FROM attestations a JOIN transparency_jobs j ON j.attestation_id = a.id WHERE a.run_id = p.id) t ON true ' +
  'ORDER BY p.created_at DESC, p.id DESC';

// Named namespaces: the newest `limit` of each (an index range scan per namespace), merged.
const BY_NAMESPACE =
  `WITH p AS (SELECT x.* FROM unnest($1::text[]) AS ns(name) CROSS JOIN LATERAL ` +
  `(SELECT ${PAGE_COLUMNS} FROM runs r WHERE r.namespace = ns.name AND ${CONDITIONS} ${ORDER} LIMIT $6) x ` +
  `ORDER BY x.created_at DESC, x.id DESC LIMIT $6) ${WITH_COUNTS}`;

// Every namespace: $1 is null here (the parameter list is the same as above).
const EVERYWHERE =
  `WITH p AS (SELECT ${PAGE_COLUMNS} FROM runs r WHERE $1::text[] IS NULL AND ${CONDITIONS} ${ORDER} LIMIT $6) ` +
  WITH_COUNTS;

const n = (v: string | null): number => (v === null ? 0 : Number(v));

export async function listRuns(
  pool: pg.Pool,
  cursors: CursorCodec,
  filter: RunListFilter,
  page: RunListPage = {},
): Promise<{ items: RunSummary[]; nextCursor: string | null }> {
  const limit = page.limit ?? RUN_LIST_DEFAULT_LIMIT;
  if (!Number.isInteger(limit) || limit < 1 || limit > RUN_LIST_MAX_LIMIT) {
    throw new VaultError('INVALID_INPUT', `limit must be 1-${RUN_LIST_MAX_LIMIT}`);
  }
  const all = filter.namespaces === 'all';
  const namespaces = all ? null : [...new Set(filter.namespaces)].sort();
  const fp = fingerprint({
    v: 'runs/1',
    namespaces: namespaces ?? 'all',
    phase: filter.phase ?? null,
    prefix: filter.namePrefix ?? null,
  });
  let after: [string, string] | [null, null] = [null, null];
  if (page.cursor !== undefined) {
    const key = cursors.decode(page.cursor, fp, KEY);
    const bar = key.indexOf('|');
    after = [key.slice(0, bar), key.slice(bar + 1)];
  }
  if (namespaces !== null && namespaces.length === 0) return { items: [], nextCursor: null };
  const { rows } = await pool.query<Row>({
    name: all ? 'runs_list_all' : 'runs_list_namespaces',
    text: all ? EVERYWHERE : BY_NAMESPACE,
    values: [
      namespaces,
      filter.phase ?? null,
      filter.namePrefix ?? null,
      after[0],
      after[1],
      limit + 1,
      'aibom',
    ],
  });
  const kept = rows.slice(0, limit);
  const last = kept.at(-1);
  return {
    items: kept.map((r) => ({
      id: r.id,
      namespace: r.namespace,
      name: r.name,
      phase: r.phase,
      spec: r.spec,
      createdAt: r.created_at,
      updatedAt: r.updated_at,
      aibomDigest: r.aibom_digest,
      attestations: Number(r.attestations),
      transparency: {
        queued: n(r.queued),
        published: n(r.published),
        retrying: n(r.retrying),
        publishedLocal: n(r.published_local),
        publishedRemote: n(r.published_remote),
      },
    })),
    nextCursor:
      rows.length > limit && last !== undefined ? cursors.encode(`${last.created_key}|${last.id}`, fp) : null,
  };
}

/** Namespaces holding mirrored runs (for callers who name none). */
export async function runNamespaces(pool: pg.Pool): Promise<string[]> {
  const { rows } = await pool.query<{ namespace: string }>({
    name: 'runs_namespaces',
    text: 'SELECT DISTINCT namespace FROM runs ORDER BY namespace',
  });
  return rows.map((r) => r.namespace);
}
