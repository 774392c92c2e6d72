/**
 * The read benchmarks' data set, loaded once per run and shared by `query` and `get`: 1,000,000 ×
 * BENCH_SCALE attestations in a freshly migrated database, plus the sidecar API serving it.
 *
 * Layout: 40 runs in 4 namespaces, 6 policy-pack versions; rows of the runs interleave in id order
 * as concurrent runs do (row k belongs to run k mod 40), each run cycling capability → step →
 * artifact → policy records. Rows are loaded through `vault.append` (COPY) in batches of 10,000;
 * envelopes come from 1,024 really sealed templates (see records.ts `fixtureRow`).
 */
import { randomUUID } from 'node:crypto';
import type pg from 'pg';
import { generateDevPki } from '../hack/dev-pki.ts';
import { signerFromPem, type KeySigner } from '../src/signing/index.ts';
import { createVaultPool, migrate, openVault, type NewAttestation } from '../src/vault/index.ts';
import { stackApiOptions, startApiServer, type ApiServer } from './api-server.ts';
import { adminClient, fmtCount, fmtRate, scaled, type BenchContext } from './common.ts';
import { buildRecord, fixtureRow, KIND_CYCLE, type RunShape } from './records.ts';

export const NAMESPACES = ['bench-a', 'bench-b', 'bench-c', 'bench-d'] as const;
export const PACKS = [
  { name: 'baseline', version: '1.0.0' },
  { name: 'baseline', version: '1.1.0' },
  { name: 'strict', version: '2.0.0' },
  { name: 'strict', version: '2.1.0' },
  { name: 'eu-ai-act', version: '1.0.0' },
  { name: 'eu-ai-act', version: '1.2.0' },
] as const;
const RUNS = 40;
/** The record table and, once partitioned (migration 0019), each partition (a plain table is its own tree). */
const TABLES =
  "SELECT relid FROM pg_partition_tree('attestations') UNION SELECT 'attestations'::regclass AS relid";
const TEMPLATES_PER_KIND = 256;
const LOAD_BATCH = 10_000;
/** The sidecar's default pool size (createVaultPool). */
export const POOL_MAX = 10;

export interface Fixture {
  /** Superuser URL of the fixture database. */
  readonly url: string;
  readonly rows: number;
  readonly runs: readonly RunShape[];
  readonly api: ApiServer;
  /** Bearer token of the stack's admin user. */
  readonly token: string;
  /** Superuser client for setup queries. */
  readonly admin: pg.Client;
}

export function fixture(ctx: BenchContext): Promise<Fixture> {
  return ctx.shared('read-fixture', () => load(ctx));
}

async function load(ctx: BenchContext): Promise<Fixture> {
  const total = scaled(1_000_000, ctx.scale, 10_000);
  const stack = await ctx.stack();
  const url = await ctx.freshDatabase('read');
  await migrate(url);
  const { runs, rowAt } = fixtureRowSource(signerFromPem(await generateDevPki()));

  ctx.log(`fixture: loading ${fmtCount(total)} rows (BENCH_SCALE=${ctx.scale}) through vault.append`);
  await loadRows(ctx, url, total, rowAt, 'fixture');
  const admin = await adminClient(ctx, url);
  await admin.query('ANALYZE attestations');
  const size = await admin.query<{ size: string }>(
    // Summed over the partitions (migration 0019): the partitioned parent itself holds nothing.
    `SELECT pg_size_pretty(sum(pg_total_relation_size(relid))) AS size FROM (${TABLES}) AS t`,
  );
  ctx.log(`fixture: loaded and analysed, table + indexes ${size.rows[0]?.size}`);
  await logPartitionSizing(ctx, admin, total);

  const api = await startApiServer(ctx, stackApiOptions(stack, url, POOL_MAX));
  ctx.log(`fixture: API listening on ${api.url}`);
  return { url, rows: total, runs, api, token: stack.kube.tokens.admin, admin };
}

/**
 * The fixture's rows: 40 runs in 4 namespaces, row k of run k mod 40, cycling capability → step →
 * artifact → policy records, each made from one of 1,024 templates that `signer` really sealed
 * (fixtureRow: shapes and sizes of real records, digests unique per row, signatures not verifying).
 * Shared by the read fixture and the ingest benchmark's prefilled vault (BENCH_INGEST_PREFILL).
 */
export function fixtureRowSource(signer: KeySigner): {
  readonly runs: readonly RunShape[];
  readonly rowAt: (k: number) => NewAttestation;
} {
  const templates = new Map<string, NewAttestation[]>();
  for (let t = 0; t < TEMPLATES_PER_KIND; t++) {
    const run: RunShape = { namespace: 'template', runId: randomUUID(), pack: PACKS[t % PACKS.length]! };
    for (let i = 0; i < KIND_CYCLE.length; i++) {
      const rec = buildRecord(signer, run, 4 * t + i);
      const list = templates.get(rec.kind) ?? [];
      list.push(rec);
      templates.set(rec.kind, list);
    }
  }
  const runs: RunShape[] = Array.from({ length: RUNS }, (_, r) => ({
    namespace: NAMESPACES[r % NAMESPACES.length]!,
    runId: randomUUID(),
    pack: PACKS[r % PACKS.length]!,
  }));
  const rowAt = (k: number): NewAttestation => {
    const run = runs[k % RUNS]!;
    const j = Math.floor(k / RUNS);
    const kind = KIND_CYCLE[j % KIND_CYCLE.length]!;
    const list = templates.get(kind)!;
    return fixtureRow(list[Math.floor(j / KIND_CYCLE.length) % list.length]!, run, k, Math.floor(j / 4));
  };
  return { runs, rowAt };
}

/**
 * Appends rows 0..total-1 of `rowAt` to the vault at `url` through `vault.append` in batches of
 * 10,000 (one connection; the next batch is built while the previous one is copied), logging the
 * rate every tenth.
 */
export async function loadRows(
  ctx: BenchContext,
  url: string,
  total: number,
  rowAt: (k: number) => NewAttestation,
  label: string,
): Promise<void> {
  const pool = createVaultPool(url, { max: 1, applicationName: 'bench-fixture-load' });
  const closePool = ctx.track(() => pool.end());
  try {
    const vault = await openVault(pool);
    const t0 = performance.now();
    let pending: Promise<unknown> = Promise.resolve();
    let nextReport = total / 10;
    for (let k = 0; k < total;) {
      ctx.throwIfStopping();
      const n = Math.min(LOAD_BATCH, total - k);
      const batch = Array.from({ length: n }, (_, i) => rowAt(k + i));
      // Build the next batch while the previous one is being copied.
      await pending;
      pending = vault.attestations.append(batch);
      k += n;
      if (k >= nextReport) {
        const s = (performance.now() - t0) / 1000;
        ctx.log(`${label}: ${fmtCount(k)}/${fmtCount(total)} rows, ${fmtRate(k / s)} rows/s`);
        nextReport += total / 10;
      }
    }
    await pending;
  } finally {
    await closePool();
  }
}

/** A query as node-postgres receives it. */
export interface CapturedQuery {
  readonly name?: string;
  readonly text: string;
  readonly values: unknown[];
}

/**
 * Runs `fn` and returns the queries it sent through `pool` (query-config form), so a baseline can
 * replay exactly the SQL the vault generated, with the same parameters and statement name.
 */
export async function captureQueries(pool: pg.Pool, fn: () => Promise<unknown>): Promise<CapturedQuery[]> {
  const seen: CapturedQuery[] = [];
  type QueryFn = (config: unknown, values?: unknown) => Promise<unknown>;
  const target = pool as unknown as { query: QueryFn };
  const original = target.query;
  target.query = function (this: unknown, config: unknown, values?: unknown) {
    if (typeof config === 'object' && config !== null && 'text' in config) {
      const c = config as { name?: string; text: string; values?: unknown[] };
      seen.push({ ...(c.name !== undefined ? { name: c.name } : {}), text: c.text, values: c.values ?? [] });
    } else if (typeof config === 'string') {
      seen.push({ text: config, values: (values as unknown[] | undefined) ?? [] });
    }
    return original.call(pool, config, values);
  };
  try {
    await fn();
  } finally {
    target.query = original;
  }
  return seen;
}

/**
 * Storage per record (heap, indexes) summed over the partitions, and the time to create and attach
 * one monthly partition ahead (docs/sizing.md). Skipped on a schema without partitions.
 */
async function logPartitionSizing(ctx: BenchContext, admin: pg.Client, total: number): Promise<void> {
  const { rows } = await admin.query<{ heap: string; idx: string; parts: string }>(
    `SELECT sum(pg_table_size(t.relid))::bigint AS heap, sum(pg_indexes_size(t.relid))::bigint AS idx, ` +
      `count(*) FILTER (WHERE c.relkind = 'r') AS parts FROM (${TABLES}) AS t JOIN pg_class c ON c.oid = t.relid`,
  );
  const r = rows[0]!;
  ctx.log(
    `fixture: per record ${(Number(r.heap) / total).toFixed(0)} B heap (TOAST included) + ` +
      `${(Number(r.idx) / total).toFixed(0)} B indexes over ${r.parts} partition(s)`,
  );
  const fn = await admin.query<{ f: string | null }>(
    `SELECT to_regprocedure('vault_partitions_ensure(integer)')::text AS f`,
  );
  if (fn.rows[0]?.f == null) return;
  // Rolled back: the read benchmarks then run on the partitions a fresh vault has (the ones ahead
  // cost every generic plan a little, so leaving 24 more would change what they measure).
  await admin.query('BEGIN');
  const t0 = performance.now();
  const made = await admin.query<{ n: string }>('SELECT count(*) AS n FROM vault_partitions_ensure(27)');
  const ms = performance.now() - t0;
  await admin.query('ROLLBACK');
  const n = Number(made.rows[0]?.n ?? 0);
  if (n > 0)
    ctx.log(
      `fixture: created and attached ${n} partitions ahead in ${ms.toFixed(0)} ms (${(ms / n).toFixed(1)} ms each)`,
    );
}
