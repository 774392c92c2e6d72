/**
 * ingest: attestations/s of the full write path — build the statement, sign it, digest the
 * envelope (sealRecord), then `vault.append` in batches of 1000 through the runtime pool
 * (role vault_writer) — vs raw `COPY ... FROM STDIN` of the very same rows into a second, freshly
 * migrated database (same table, indexes, constraints and triggers), in batches of 1000 as well.
 * Goal ≥ 0.5×.
 *
 * Rounds: each round appends `batchesPerRound` batches through the full path, exports exactly the
 * rows it stored (`COPY (SELECT …) TO STDOUT`, same ids, seq and chain links) and copies them into
 * the twin database; the two tables therefore grow in lockstep and index sizes match in every round.
 * The ratio is the median over rounds of full-path rate ÷ raw COPY rate.
 *
 * With BENCH_INGEST_LAYOUT=shared there is no twin: the raw side copies the exported rows, re-chained
 * to continue at the head (rechainRows), into the very vault the full path writes, right after each
 * round. Both sides then write into one table, one set of indexes and one buffer cache, and a
 * prefilled vault needs its disk once instead of twice (10 million records: ~31 GB, not ~62).
 */
import { hash, randomUUID } from 'node:crypto';
import { statfs } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { finished } from 'node:stream/promises';
import { setImmediate } from 'node:timers/promises';
import type pg from 'pg';
import copyStreams from 'pg-copy-streams';
import { generateDevPki } from '../hack/dev-pki.ts';
import { signerFromPem } from '../src/signing/index.ts';
import { createVaultPool, migrate, openVault, type NewAttestation } from '../src/vault/index.ts';
import { ATTESTATION_TABLE_COLUMNS } from '../src/vault/rows.ts';
import { UuidV7Generator } from '../src/vault/uuidv7.ts';
import {
  adminClient,
  fmtCount,
  fmtRate,
  fmtRatio,
  goalText,
  median,
  printTable,
  verdict,
  type BenchContext,
  type Benchmark,
  type Goal,
  type SummaryRow,
} from './common.ts';
import { fixtureRowSource, loadRows } from './fixture.ts';
import { buildRecord, type RunShape } from './records.ts';
import { startSealWorker, type SealSpec } from './seal-worker.ts';

const GOAL: Goal = { op: '>=', value: 0.5 };
const BATCH = 1000;
/** Records sealed between yields to the event loop in the pipelined mode. */
const SLICE = 50;
const ROUNDS = 5;
/** Records per run before the generator starts a new run (100 steps × 4 records). */
const RUN_LENGTH = 400;
const NAMESPACES = ['bench-a', 'bench-b', 'bench-c', 'bench-d'];
/** Rows per COPY when the twin database receives the prefill. */
const PREFILL_COPY = 10_000;

/**
 * BENCH_INGEST_PREFILL: records both vaults hold before the rounds (default 0), so that ingest is
 * measured into a large vault: deeper indexes, a larger digest-uniqueness probe, a table past the
 * buffer cache. A non-negative integer; anything else is an error naming the variable.
 */
export function ingestPrefill(raw = process.env.BENCH_INGEST_PREFILL): number {
  if (raw === undefined || raw === '') return 0;
  const n = Number(raw);
  if (!/^[0-9]+$/.test(raw) || !Number.isSafeInteger(n)) {
    throw new Error(`BENCH_INGEST_PREFILL must be a non-negative integer, got ${JSON.stringify(raw)}`);
  }
  return n;
}

/**
 * BENCH_INGEST_LAYOUT: `twin` (default) writes the raw side into a second database; `shared` into
 * the full path's own vault (see the file comment). Anything else is an error naming the variable.
 */
export function ingestLayout(raw = process.env.BENCH_INGEST_LAYOUT): 'twin' | 'shared' {
  if (raw === undefined || raw === '' || raw === 'twin') return 'twin';
  if (raw === 'shared') return 'shared';
  throw new Error(`BENCH_INGEST_LAYOUT must be twin or shared, got ${JSON.stringify(raw)}`);
}

/** Disk a prefilled record takes in one vault, heap (TOAST included) and indexes (docs/sizing.md). */
const PREFILL_BYTES_PER_RECORD = 3200;
/** Left free besides: WAL, the rounds' rows, the stack's logs. */
const DISK_MARGIN = 5 * 1024 ** 3;

/**
 * Refuses a prefill the disk under the stack cannot hold (a full disk stops PostgreSQL midway, and
 * whatever else writes there), naming what it needs and what is free.
 */
export function checkPrefillDisk(prefill: number, vaults: number, freeBytes: number): void {
  const need = prefill * PREFILL_BYTES_PER_RECORD * vaults + DISK_MARGIN;
  if (prefill > 0 && freeBytes < need) {
    const gb = (n: number): string => `${(n / 1024 ** 3).toFixed(1)} GiB`;
    throw new Error(
      `BENCH_INGEST_PREFILL=${prefill} needs about ${gb(need)} free under ${tmpdir()} ` +
        `(${vaults} vault(s) × ${PREFILL_BYTES_PER_RECORD} B a record, plus ${gb(DISK_MARGIN)}); ${gb(freeBytes)} is free` +
        (vaults > 1 ? ': BENCH_INGEST_LAYOUT=shared needs half' : ''),
    );
  }
}

/** The chain head of a vault (table vault_head): where the next rows must continue. */
export interface ChainHead {
  readonly seq: number;
  readonly id: string;
  readonly digest: string;
  readonly createdAt: Date;
}

const COLUMN_NAMES = ATTESTATION_TABLE_COLUMNS.split(', ');
const COLUMN = Object.fromEntries(COLUMN_NAMES.map((c, i) => [c, i]));

/**
 * The shared layout's raw rows: `lines` (COPY text rows of ATTESTATION_TABLE_COLUMNS, as
 * exportRows gives them) re-chained to continue at `head`, with ids after the head's from `ids`,
 * the next seqs, prev_digest links, a digest of their own (the column is UNIQUE: the row's digest
 * hashed with `:raw`) and `created_at` no earlier than the head's. Every other column keeps its
 * bytes, so the raw side copies rows of the same shapes and sizes as the full path stored. The
 * vault's insert trigger (migration 0008) checks the links as it does for an append.
 */
export function rechainRows(
  lines: readonly string[],
  head: ChainHead,
  ids: UuidV7Generator,
  now: Date = new Date(),
): { text: string; head: ChainHead } {
  const createdAt = now > head.createdAt ? now : head.createdAt;
  const at = createdAt.toISOString();
  let { seq, id, digest } = head;
  const out: string[] = [];
  for (const line of lines) {
    const f = line.split('\t');
    if (f.length !== COLUMN_NAMES.length)
      throw new Error(`a COPY row has ${f.length} columns: ${line.slice(0, 80)}`);
    seq += 1;
    id = ids.next(id);
    f[COLUMN.id!] = id;
    f[COLUMN.seq!] = String(seq);
    f[COLUMN.prev_digest!] = digest;
    digest = `sha256:${hash('sha256', `${f[COLUMN.digest!]}:raw`)}`;
    f[COLUMN.digest!] = digest;
    f[COLUMN.created_at!] = at;
    out.push(f.join('\t'));
  }
  return { text: out.length > 0 ? `${out.join('\n')}\n` : '', head: { seq, id, digest, createdAt } };
}

/** The head of the vault `client` is connected to. */
async function chainHead(client: pg.Client): Promise<ChainHead> {
  const { rows } = await client.query<{
    last_seq: string;
    last_id: string | null;
    last_digest: string;
    last_created_at: Date | null;
  }>('SELECT last_seq, last_id, last_digest, last_created_at FROM vault_head');
  const r = rows[0];
  if (r === undefined || r.last_id === null || r.last_created_at === null)
    throw new Error('the vault has no head row');
  return { seq: Number(r.last_seq), id: r.last_id, digest: r.last_digest, createdAt: r.last_created_at };
}

const PACKS = [
  { name: 'baseline', version: '1.0.0' },
  { name: 'strict', version: '2.1.0' },
];

/** Rows of one round, exported from the full-path database in COPY text format. */
async function exportRows(client: pg.Client, fromSeq: number, toSeq: number): Promise<string[]> {
  const stream = client.query(
    copyStreams.to(
      `COPY (SELECT ${ATTESTATION_TABLE_COLUMNS} FROM attestations WHERE seq > ${fromSeq} AND seq <= ${toSeq} ` +
        'ORDER BY seq) TO STDOUT',
    ),
  );
  const chunks: Buffer[] = [];
  for await (const chunk of stream) chunks.push(chunk as Buffer);
  // COPY text escapes newlines inside values, so one line is one row.
  const lines = Buffer.concat(chunks).toString('utf8').split('\n');
  if (lines.at(-1) === '') lines.pop();
  if (lines.length !== toSeq - fromSeq) {
    throw new Error(
      `exported ${lines.length} rows for seq ${fromSeq}..${toSeq}, expected ${toSeq - fromSeq}`,
    );
  }
  return lines;
}

/** Copies rows seq 1..total of the full-path vault into the twin, as the rounds copy theirs. */
async function copyPrefill(
  ctx: BenchContext,
  exporter: pg.Client,
  raw: pg.PoolClient,
  total: number,
): Promise<void> {
  const t0 = performance.now();
  for (let from = 0; from < total; from += PREFILL_COPY) {
    ctx.throwIfStopping();
    const to = Math.min(total, from + PREFILL_COPY);
    const lines = await exportRows(exporter, from, to);
    await copyBatch(raw, lines.join('\n') + '\n', to - from);
  }
  ctx.log(`ingest: prefill copied into the twin in ${((performance.now() - t0) / 1000).toFixed(1)} s`);
}

async function copyBatch(client: pg.PoolClient, text: string, rows: number): Promise<void> {
  const stream = client.query(
    copyStreams.from(`COPY attestations (${ATTESTATION_TABLE_COLUMNS}) FROM STDIN`),
  );
  stream.end(text);
  await finished(stream);
  if (stream.rowCount !== rows) throw new Error(`raw COPY stored ${stream.rowCount} rows, expected ${rows}`);
}

export const ingestBenchmark: Benchmark = {
  name: 'ingest',
  title: 'full path (statement + sign + digest + vault.append ×1000) vs raw COPY of the same rows',
  async run(ctx) {
    const batchesPerRound = Math.max(1, Math.round((40 * ctx.scale) / ROUNDS));
    const prefill = ingestPrefill();
    const layout = ingestLayout();
    const disk = await statfs(tmpdir());
    checkPrefillDisk(prefill, layout === 'shared' ? 1 : 2, disk.bavail * disk.bsize);
    await ctx.stack();
    const fullUrl = await ctx.freshDatabase('ingest_full');
    const rawUrl = layout === 'shared' ? fullUrl : await ctx.freshDatabase('ingest_raw');
    await migrate(fullUrl);
    if (layout === 'twin') await migrate(rawUrl);
    // ECDSA P-256 leaf under a dev CA: the service's default signer.
    const pki = await generateDevPki();
    const signer = signerFromPem(pki);
    const pool = createVaultPool(fullUrl, { applicationName: 'bench-ingest' });
    const closePool = ctx.track(() => pool.end());
    const vault = await openVault(pool);
    // The raw side runs as the same runtime role with the same session settings.
    const rawPool = createVaultPool(rawUrl, { max: 1, applicationName: 'bench-ingest-raw' });
    const closeRawPool = ctx.track(() => rawPool.end());
    const exporter = await adminClient(ctx, fullUrl);

    let produced = 0;
    let run: RunShape | undefined;
    /** The next n records of the generated runs, each through `seal`. */
    const nextSealed = <T>(n: number, seal: (run: RunShape, i: number) => T): T[] => {
      const out: T[] = [];
      for (let k = 0; k < n; k++, produced++) {
        const i = produced % RUN_LENGTH;
        if (i === 0 || run === undefined) {
          const r = Math.floor(produced / RUN_LENGTH);
          run = { namespace: NAMESPACES[r % NAMESPACES.length]!, runId: randomUUID(), pack: PACKS[r % 2]! };
        }
        out.push(seal(run, i));
      }
      return out;
    };
    const nextRecords = (n: number): NewAttestation[] => nextSealed(n, (r, i) => buildRecord(signer, r, i));
    const nextSpecs = (n: number): SealSpec[] => nextSealed(n, (r, i) => ({ run: r, i }));
    const sealer = startSealWorker(ctx, pki);

    const rawClient = await rawPool.connect();
    const releaseRaw = ctx.track(() => rawClient.release());
    let storedSeq = 0;
    if (prefill > 0) {
      ctx.log(
        layout === 'shared'
          ? `ingest: prefilling the one vault with ${fmtCount(prefill)} records (BENCH_INGEST_PREFILL, shared layout)`
          : `ingest: prefilling both vaults with ${fmtCount(prefill)} records (BENCH_INGEST_PREFILL)`,
      );
      await loadRows(ctx, fullUrl, prefill, fixtureRowSource(signer).rowAt, 'ingest prefill');
      storedSeq = prefill;
      // The same rows in both (ids, seq, chain links): the twin is exported from the full side.
      if (layout === 'twin') await copyPrefill(ctx, exporter, rawClient, prefill);
      const admins = layout === 'twin' ? [exporter, await adminClient(ctx, rawUrl)] : [exporter];
      await Promise.all(admins.map((c) => c.query('ANALYZE attestations')));
    }
    const rawIds = new UuidV7Generator();
    interface RoundResult {
      /** Rows through each full-path mode (the raw side copies all three: 3 × rows). */
      rows: number;
      fullMs: number;
      sealMs: number;
      appendMs: number;
      pipelinedMs: number;
      threadedMs: number;
      rawMs: number;
    }
    /**
     * One round: `batches` batches sequentially (seal, then append: timings split), then as many
     * pipelined (the next batch is sealed while earlier ones are being appended, at most two
     * appends in flight: how the controller's concurrent reconcile workers overlap the two), then
     * raw COPY of every row both stored. Times in ms.
     */
    const round = async (batches: number): Promise<RoundResult> => {
      let sealMs = 0;
      let appendMs = 0;
      const t0 = performance.now();
      for (let b = 0; b < batches; b++) {
        ctx.throwIfStopping();
        const ts = performance.now();
        const records = nextRecords(BATCH);
        const ta = performance.now();
        await vault.attestations.append(records);
        const te = performance.now();
        sealMs += ta - ts;
        appendMs += te - ta;
      }
      const fullMs = performance.now() - t0;
      const tp = performance.now();
      let inflight: Promise<unknown> | undefined;
      for (let b = 0; b < batches; b++) {
        ctx.throwIfStopping();
        // Sealed in slices, yielding between them: a 1000-record batch is ~50 ms of synchronous
        // signing, during which the in-flight append could not feed its COPY stream. (Signing on
        // the libuv pool instead, crypto.sign with a callback, measured slower on 2 vCPUs: the
        // pool threads, the event loop and PostgreSQL then compete for the same two cores.)
        const records: NewAttestation[] = [];
        for (let k = 0; k < BATCH; k += SLICE) {
          records.push(...nextRecords(Math.min(SLICE, BATCH - k)));
          await setImmediate();
        }
        // Up to two appends in flight: the second encodes its rows and queues on the chain-head
        // lock while the first commits (as concurrent reconcile workers do).
        const appending = vault.attestations.append(records);
        if (inflight !== undefined) await inflight;
        inflight = appending;
      }
      await inflight;
      const pipelinedMs = performance.now() - tp;
      // Sealing on the worker thread: batch k+1 is sealed there while batch k is appended here.
      const tt = performance.now();
      let sealing = sealer.seal(nextSpecs(BATCH));
      inflight = undefined;
      for (let b = 0; b < batches; b++) {
        ctx.throwIfStopping();
        const records = await sealing;
        if (b + 1 < batches) sealing = sealer.seal(nextSpecs(BATCH));
        const appending = vault.attestations.append(records);
        if (inflight !== undefined) await inflight;
        inflight = appending;
      }
      await inflight;
      const threadedMs = performance.now() - tt;
      const rows = batches * BATCH;
      const lines = await exportRows(exporter, storedSeq, storedSeq + 3 * rows);
      const texts: string[] = [];
      if (layout === 'shared') {
        // Prepared before the clock starts, as the twin's texts are: the raw side times COPY only.
        let head = await chainHead(exporter);
        for (let i = 0; i < lines.length; i += BATCH) {
          const next = rechainRows(lines.slice(i, i + BATCH), head, rawIds);
          texts.push(next.text);
          head = next.head;
        }
        storedSeq += 6 * rows;
      } else {
        for (let i = 0; i < lines.length; i += BATCH) texts.push(lines.slice(i, i + BATCH).join('\n') + '\n');
        storedSeq += 3 * rows;
      }
      const tr = performance.now();
      for (const text of texts) await copyBatch(rawClient, text, BATCH);
      // Per `rows` rows, comparable with each mode.
      const rawMs = (performance.now() - tr) / 3;
      return { rows, fullMs, sealMs, appendMs, pipelinedMs, threadedMs, rawMs };
    };

    try {
      ctx.log(`ingest: warm-up batch, then ${ROUNDS} rounds × ${batchesPerRound} batches of ${BATCH}`);
      await round(1);
      const results: RoundResult[] = [];
      for (let r = 0; r < ROUNDS; r++) {
        const m = await round(batchesPerRound);
        results.push(m);
        ctx.log(
          `ingest: round ${r + 1}/${ROUNDS}: full ${fmtRate((m.rows * 1000) / m.fullMs)}/s, ` +
            `pipelined ${fmtRate((m.rows * 1000) / m.pipelinedMs)}/s, ` +
            `raw COPY ${fmtRate((m.rows * 1000) / m.rawMs)}/s`,
        );
      }
      const sum = (f: (m: RoundResult) => number): number => results.reduce((s, m) => s + f(m), 0);
      const rows = sum((m) => m.rows);
      const fullRate = median(results.map((m) => (m.rows * 1000) / m.fullMs));
      const rawRate = median(results.map((m) => (m.rows * 1000) / m.rawMs));
      const ratio = median(results.map((m) => m.rawMs / m.fullMs));
      const appendRatio = median(results.map((m) => m.rawMs / m.appendMs));
      const pipelinedRatio = median(results.map((m) => m.rawMs / m.pipelinedMs));
      const threadedRatio = median(results.map((m) => m.rawMs / m.threadedMs));
      const sealShare = sum((m) => m.sealMs) / sum((m) => m.fullMs);
      const sec = (ms: number): string => `${(ms / 1000).toFixed(2)} s`;
      printTable(
        `ingest — attestations/s, batches of ${BATCH}, median of ${ROUNDS} rounds (${fmtCount(rows)} rows per ` +
          `full-path mode, ${fmtCount(3 * rows)} raw), ` +
          (layout === 'shared'
            ? `both into one vault prefilled with ${fmtCount(prefill)} records`
            : `into vaults prefilled with ${fmtCount(prefill)} records`),
        ['case', 'time', 'rows/s', 'ratio vs raw COPY', 'goal', 'verdict'],
        [
          [
            'full path, sealing on a worker thread ∥ append on the main thread',
            sec(sum((m) => m.threadedMs)),
            fmtRate(median(results.map((m) => (m.rows * 1000) / m.threadedMs))),
            fmtRatio(threadedRatio),
            goalText(GOAL),
            verdict(threadedRatio, GOAL),
          ],
          [
            'full path, pipelined: seal next batch while the previous appends',
            sec(sum((m) => m.pipelinedMs)),
            fmtRate(median(results.map((m) => (m.rows * 1000) / m.pipelinedMs))),
            fmtRatio(pipelinedRatio),
            goalText(GOAL),
            verdict(pipelinedRatio, GOAL),
          ],
          [
            'full path, sequential: statement + sign + digest, then vault.append',
            sec(sum((m) => m.fullMs)),
            fmtRate(fullRate),
            fmtRatio(ratio),
            goalText(GOAL),
            verdict(ratio, GOAL),
          ],
          [
            `  of which statement + sign + digest (${(sealShare * 100).toFixed(0)}%)`,
            sec(sum((m) => m.sealMs)),
            fmtRate(median(results.map((m) => (m.rows * 1000) / m.sealMs))),
            '',
            '',
            '',
          ],
          [
            `  of which vault.append (${((1 - sealShare) * 100).toFixed(0)}%)`,
            sec(sum((m) => m.appendMs)),
            fmtRate(median(results.map((m) => (m.rows * 1000) / m.appendMs))),
            fmtRatio(appendRatio),
            '(info)',
            '',
          ],
          [
            'raw COPY of the same rows (baseline; time per mode)',
            sec(sum((m) => m.rawMs)),
            fmtRate(rawRate),
            '1.00×',
            '',
            '',
          ],
        ],
      );
      const summary: SummaryRow[] = [
        {
          benchmark: 'ingest',
          case: 'full path, sealing thread ∥ append',
          ratioOf: 'rows/s ÷ raw COPY rows/s',
          ratio: threadedRatio,
          goal: GOAL,
        },
        {
          benchmark: 'ingest',
          case: 'full path, pipelined (seal ∥ append)',
          ratioOf: 'rows/s ÷ raw COPY rows/s',
          ratio: pipelinedRatio,
          goal: GOAL,
        },
        {
          benchmark: 'ingest',
          case: 'full path, sequential (seal, then append)',
          ratioOf: 'rows/s ÷ raw COPY rows/s',
          ratio,
          goal: GOAL,
        },
      ];
      return summary;
    } finally {
      await releaseRaw();
      await closeRawPool();
      await closePool();
    }
  },
};
