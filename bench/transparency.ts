/**
 * transparency: the SCITT side of the write path, in two parts.
 *
 * 1. Local-log appends with receipts: `createLocalLog(...).append(statement)` (head lock, subtree
 *    read, entry + node rows, head update, one receipt signature, commit) on a freshly migrated
 *    database on the stack's PostgreSQL, one client and a few concurrent ones, vs the raw ceiling
 *    of the same work without the database: the RFC 9162 leaf hash of the same statement bytes
 *    plus `crypto.sign` over the same receipt-sized bytes (the Sig_structure a real receipt of this
 *    log signs) with the very same KeyObject. Goal ≥ 0.5×. Statements are built beforehand with
 *    `buildSignedStatement` over really sealed envelopes, one per append (a repeated statement
 *    would take the idempotent fast path). Rounds rotate ceiling, one client and N clients; each
 *    ratio is the median over rounds of appends/s ÷ ceiling ops/s (both per wall-clock second:
 *    the append waits on PostgreSQL, another process, so CPU time of this one would not count it).
 *
 * 2. Insert → published at a steady 100 attestations/s: `vault.attestations.append(batch, {
 *    enqueueTransparency: true })` on a timer (one record per 10 ms slot; a slot missed while an
 *    append was in flight goes into the next batch), with the transparency worker
 *    (`createWorker({ jobs, listener, publisher }).run(signal)`, local backend, as the controller
 *    wires it) in the same process on the same vault. Per attestation: `published_at` of its job
 *    minus the attestation's `created_at`, both from the PostgreSQL clock. Queue depth is sampled
 *    every 500 ms. Two cases: as the controller runs it (woken by the vault's NOTIFY of each
 *    enqueue, delivered on commit through its LISTEN connection: the path a worker in any replica
 *    takes), and, for information, without the listener (the idle poll every second alone).
 */
import { sign as cryptoSign, type KeyObject } from 'node:crypto';
import { setTimeout as sleep } from 'node:timers/promises';
import type pg from 'pg';
import { pino } from 'pino';
import type { Logger } from '../src/log/index.ts';
import { generateDevPki } from '../hack/dev-pki.ts';
import {
  createKeySigner,
  digestOf,
  parseCertificates,
  parsePrivateKey,
  type KeySigner,
} from '../src/signing/index.ts';
import { sigStructure } from '../src/cose/sign1.ts';
import { buildSignedStatement, decodeSign1 } from '../src/transparency/statement.ts';
import { createLocalLog, type LocalLog } from '../src/transparency/local-log.ts';
import { leafHash } from '../src/transparency/merkle.ts';
import { decodeReceipt, entryOf, verifyReceipt } from '../src/transparency/receipt.ts';
import { setupTransparency } from '../src/transparency/setup.ts';
import { createWorker } from '../src/transparency/worker.ts';
import {
  createVaultPool,
  migrate,
  openVault,
  UuidV7Generator,
  type NewAttestation,
  type Vault,
} from '../src/vault/index.ts';
import {
  adminClient,
  fmtCount,
  fmtMs,
  fmtRate,
  fmtRatio,
  goalText,
  median,
  percentile,
  printTable,
  scaled,
  verdict,
  type BenchContext,
  type Benchmark,
  type Goal,
  type SummaryRow,
} from './common.ts';
import { buildRecord, type RunShape } from './records.ts';

const GOAL: Goal = { op: '>=', value: 0.5 };

/** Ratios far below the goal keep a third decimal (0.013× rather than 0.01×). */
function fmtSmallRatio(ratio: number): string {
  return Number.isFinite(ratio) && ratio < 0.1 ? `${ratio.toFixed(3)}×` : fmtRatio(ratio);
}
const ROUNDS = 5;
/**
 * Concurrent appenders per case: one (every append its own transaction and signature), a few, and
 * a busy service (what the group commit is for: a worker claim or many SCRAPI clients at once).
 */
const CLIENTS = [1, 8, 256] as const;
/** Distinct sealed envelopes the statements are built over (each statement has its own subject). */
const TEMPLATES = 256;
const ISSUER = 'https://scitt.bench.invalid';
/** The steady offered rate of part 2 (attestations/s). */
const RATE = 100;
const SAMPLE_MS = 500;
/** The worker's default idle poll (worker.ts): a backlog must drain within this plus a margin. */
const WORKER_IDLE_MS = 1_000;

/** ECDSA P-256 dev-PKI leaf: the service signer, which is also the log key unless SCITT_LOG_SECRET is set. */
export async function material(): Promise<{ key: KeyObject; signer: KeySigner }> {
  const pki = await generateDevPki();
  // Parsed once so the ceiling and the log sign with the very same KeyObject.
  const key = parsePrivateKey(pki['tls.key'], 'tls.key');
  const signer = createKeySigner({
    privateKey: key,
    certificateChain: parseCertificates(pki['tls.crt'], 'tls.crt'),
    caCertificates: parseCertificates(pki['ca.crt'], 'ca.crt'),
  });
  return { key, signer };
}

/** Real records of runs (capability, step, artifact, policy), sealed with `signer`. */
function sealedRecords(signer: KeySigner, n: number, namespace: string): NewAttestation[] {
  const ids = new UuidV7Generator();
  const out: NewAttestation[] = [];
  let run: RunShape | undefined;
  for (let i = 0; i < n; i++) {
    if (i % 400 === 0 || run === undefined) {
      run = { namespace, runId: ids.next(), pack: { name: 'baseline', version: '1.0.0' } };
    }
    out.push(buildRecord(signer, run, i % 400));
  }
  return out;
}

// ---------------------------------------------------------------------------------------------
// Part 1: local-log appends vs the SHA-256 + sign ceiling

interface AppendRound {
  readonly appends: number;
  readonly ms: number;
  readonly perSecond: number;
  /** Client CPU (this process) per append, µs. */
  readonly cpuUs: number;
  readonly latencies: number[];
  /** Appends per commit batch (entries ÷ distinct tree heads their receipts prove inclusion in). */
  readonly meanBatch: number;
}

/** Appends statements from `queue` with `clients` concurrent appenders for about `ms`. */
async function appendRound(
  log: LocalLog,
  queue: { readonly statements: Buffer[]; next: number },
  clients: number,
  ms: number,
): Promise<AppendRound> {
  const latencies: number[] = [];
  const receipts: Buffer[] = [];
  const cpu0 = process.cpuUsage();
  const t0 = performance.now();
  const deadline = t0 + ms;
  const appender = async (): Promise<void> => {
    while (performance.now() < deadline && queue.next < queue.statements.length) {
      const statement = queue.statements[queue.next++]!;
      const ts = performance.now();
      const result = await log.append(statement);
      latencies.push(performance.now() - ts);
      receipts.push(result.receipt);
      if (!result.created) throw new Error(`statement ${result.entryId} was already in the log`);
    }
  };
  await Promise.all(Array.from({ length: clients }, appender));
  const elapsed = performance.now() - t0;
  const cpu = process.cpuUsage(cpu0);
  return {
    appends: latencies.length,
    ms: elapsed,
    perSecond: (latencies.length * 1000) / elapsed,
    cpuUs: (cpu.user + cpu.system) / Math.max(1, latencies.length),
    latencies,
    // After the clock stopped: decoding is the bench's work, not the log's.
    meanBatch: receipts.length / new Set(receipts.map((r) => decodeReceipt(r).proofs[0]!.treeSize)).size,
  };
}

interface CeilingRound {
  readonly perSecond: number;
  readonly perCpuSecond: number;
  readonly sink: number;
}

/** Leaf hash of the statement + `crypto.sign` of a receipt Sig_structure, in a tight loop. */
function ceilingRound(
  statements: readonly Buffer[],
  toSign: readonly Buffer[],
  key: KeyObject,
  digest: string | null,
  ms: number,
): CeilingRound {
  let n = 0;
  let sink = 0;
  const t0 = performance.now();
  const cpu0 = process.cpuUsage();
  do {
    const leaf = leafHash(statements[n % statements.length]!);
    const sig = cryptoSign(digest, toSign[n % toSign.length]!, key);
    sink ^= leaf[0]! ^ sig[0]!;
    n += 1;
  } while (performance.now() - t0 < ms);
  const cpu = process.cpuUsage(cpu0);
  const elapsed = performance.now() - t0;
  return { perSecond: (n * 1000) / elapsed, perCpuSecond: (n * 1e6) / (cpu.user + cpu.system), sink };
}

async function logAppends(
  ctx: BenchContext,
  url: string,
  key: KeyObject,
  signer: KeySigner,
): Promise<{ summary: SummaryRow[]; ratios: number[] }> {
  const appendMs = scaled(1500, ctx.scale, 300, 6000);
  const ceilingMs = scaled(500, ctx.scale, 100, 2000);
  const pool = createVaultPool(url, { applicationName: 'bench-scitt-log' });
  const closePool = ctx.track(() => pool.end());
  try {
    const log = createLocalLog({ storage: (await openVault(pool)).scittLog, signer, issuer: ISSUER });
    const templates = sealedRecords(signer, TEMPLATES, 'bench-scitt');
    const ids = new UuidV7Generator();
    const queue = { statements: [] as Buffer[], next: 0 };
    // As the publisher builds them (setup.ts passes the signer and its CA certificates).
    const topUp = (n: number): void => {
      for (let k = 0; k < n; k++) {
        const t = templates[queue.statements.length % templates.length]!;
        queue.statements.push(
          buildSignedStatement({
            attestationId: ids.next(),
            envelope: t.envelope,
            digest: t.digest,
            signer,
            caCertificates: signer.caCertificates,
          }).bytes,
        );
      }
    };
    const tb = performance.now();
    topUp(1000);
    // 1000 statements: total milliseconds = microseconds each.
    const buildUs = performance.now() - tb;
    // The log's entry is the statement with its unprotected header emptied: already empty here, so
    // the ceiling hashes exactly the bytes the log hashes.
    if (!entryOf(queue.statements[0]!).equals(queue.statements[0]!)) {
      throw new Error('statement bytes differ from the log entry: the ceiling would hash other bytes');
    }

    // Warm-up (JIT, prepared statements, pool connections) and rate estimates.
    const warm: AppendRound[] = [];
    for (const clients of CLIENTS) {
      topUp(Math.max(0, 12_000 - (queue.statements.length - queue.next)));
      warm.push(await appendRound(log, queue, clients, 400));
    }
    // The exact bytes receipts sign: Sig_structure(protected header, root) of real receipts (a
    // receipt signs the root of the tree its batch committed, see receipt.ts).
    const toSign: Buffer[] = [];
    for (let index = 0; index < 32; index++) {
      const entry = await log.getEntryByIndex(index);
      if (entry === null) throw new Error(`log entry ${index} missing after the warm-up`);
      const check = verifyReceipt({ receipt: entry.receipt, statement: entry.statement, logKey: log.keys });
      if (!check.ok) throw new Error(`receipt ${index} does not verify: ${check.message}`);
      toSign.push(sigStructure(decodeSign1(entry.receipt, 'MALFORMED_RECEIPT').protectedBytes, check.root));
    }
    // Statements are built per round (outside the measured time) for that case's warm-up rate:
    // building them all up front would hold ~10^5 statements in memory.
    const need = (i: number): number => Math.ceil(((warm[i]!.perSecond * appendMs) / 1000) * 2) + 500;
    const startSize = queue.next;
    ctx.log(
      `transparency: log warm-up ${CLIENTS.map((c, i) => `${fmtRate(warm[i]!.perSecond)} appends/s (${c} clients)`).join(', ')}; ` +
        `${fmtCount(queue.statements.length)} statements (~${buildUs.toFixed(0)} µs each to build); ` +
        `${ROUNDS} rounds × (ceiling ${ceilingMs} ms, ${CLIENTS.join('/')} clients ${appendMs} ms)`,
    );

    const digest = digestOf(signer.algorithm);
    const ceilingStatements = queue.statements.slice(0, 4096);
    let sink = ceilingRound(ceilingStatements, toSign, key, digest, 200).sink;
    const ceiling: CeilingRound[] = [];
    const rounds: AppendRound[][] = CLIENTS.map(() => []);
    const ratios: number[][] = CLIENTS.map(() => []);
    const slots = CLIENTS.length + 1; // slot 0 is the ceiling
    for (let r = 0; r < ROUNDS; r++) {
      const order = Array.from({ length: slots }, (_, i) => (i + r) % slots);
      let c: CeilingRound | undefined;
      const got: AppendRound[] = [];
      for (const which of order) {
        ctx.throwIfStopping();
        if (which === 0) {
          c = ceilingRound(ceilingStatements, toSign, key, digest, ceilingMs);
          sink ^= c.sink;
          continue;
        }
        // Built outside the measured time; normally a no-op (built up front).
        topUp(Math.max(0, need(which - 1) - (queue.statements.length - queue.next)));
        got[which - 1] = await appendRound(log, queue, CLIENTS[which - 1]!, appendMs);
      }
      ceiling.push(c!);
      for (const [i, g] of got.entries()) {
        rounds[i]!.push(g);
        ratios[i]!.push(g.perSecond / c!.perSecond);
      }
    }

    // The log is what it should be: every append landed, and a sample of receipts verifies.
    const head = await log.treeHead();
    if (head.size !== queue.next) throw new Error(`log size ${head.size}, expected ${queue.next}`);
    for (const index of [0, Math.floor(head.size / 2), head.size - 1]) {
      const entry = (await log.getEntryByIndex(index))!;
      const check = verifyReceipt({ receipt: entry.receipt, statement: entry.statement, logKey: log.keys });
      if (!check.ok) throw new Error(`receipt of entry ${index} does not verify: ${check.message}`);
    }

    const ceil = median(ceiling.map((c) => c.perSecond));
    const medians = ratios.map(median);
    const row = (clients: number, of: AppendRound[], ratio: number): string[] => {
      const lat = of.flatMap((x) => x.latencies);
      return [
        'log.append → entry + receipt',
        String(clients),
        fmtRate(median(of.map((x) => x.perSecond))),
        `${median(of.map((x) => x.meanBatch)).toFixed(1)}`,
        fmtMs(percentile(lat, 50)),
        fmtMs(percentile(lat, 99)),
        `${median(of.map((x) => x.cpuUs)).toFixed(0)} µs`,
        fmtSmallRatio(ratio),
        goalText(GOAL),
        verdict(ratio, GOAL),
      ];
    };
    const rows = [
      ...CLIENTS.map((clients, i) => row(clients, rounds[i]!, medians[i]!)),
      [
        'ceiling: leafHash + crypto.sign(receipt Sig_structure) (baseline)',
        '1',
        fmtRate(ceil),
        '',
        '',
        '',
        `${(1e6 / median(ceiling.map((c) => c.perCpuSecond))).toFixed(0)} µs`,
        '1.00×',
        '',
        '',
      ],
    ];
    printTable(
      `transparency — local-log appends with receipts (ECDSA P-256 log key, pg pool of 10, group commit ` +
        `≤ 1000 per transaction), median of ${ROUNDS} rotating rounds (appends ${appendMs} ms, ceiling ` +
        `${ceilingMs} ms); log grew ${fmtCount(startSize)} → ${fmtCount(head.size)} entries; statement ` +
        `${queue.statements[0]!.length} B, receipt Sig_structure ${toSign[0]!.length} B`,
      ['case', 'clients', 'ops/s', 'batch', 'p50', 'p99', 'CPU/op', 'ratio', 'goal', 'verdict'],
      rows,
    );
    if (sink === 0.5) console.log('');
    return {
      ratios: medians,
      summary: CLIENTS.map((clients, i) => ({
        benchmark: 'transparency',
        case: `local-log append + receipt, ${clients} client${clients === 1 ? '' : 's'}`,
        ratioOf: 'appends/s ÷ (SHA-256 + sign)/s',
        ratio: medians[i]!,
        goal: GOAL,
      })),
    };
  } finally {
    await closePool();
  }
}

// ---------------------------------------------------------------------------------------------
// Part 2: insert → published at a steady rate

interface Sample {
  /** Seconds since the first insert of the case. */
  readonly t: number;
  readonly inserted: number;
  readonly queued: number;
  readonly published: number;
}

interface LatencyCase {
  readonly label: string;
  readonly n: number;
  /** Inserted per second, from the attestations' created_at (DB clock). */
  readonly insertRate: number;
  readonly maxBatch: number;
  readonly latencies: number[];
  readonly failed: number;
  readonly samples: Sample[];
  readonly maxQueued: number;
  /** Last published_at − last created_at (DB clock), ms. */
  readonly drainMs: number;
  /** Least-squares slope of the queue depth while inserting, jobs/s. */
  readonly trend: number;
  readonly keptUp: boolean;
}

function slope(samples: readonly Sample[]): number {
  if (samples.length < 2) return 0;
  const mt = samples.reduce((a, s) => a + s.t, 0) / samples.length;
  const mq = samples.reduce((a, s) => a + s.queued, 0) / samples.length;
  let num = 0;
  let den = 0;
  for (const s of samples) {
    num += (s.t - mt) * (s.queued - mq);
    den += (s.t - mt) ** 2;
  }
  return den === 0 ? 0 : num / den;
}

async function latencyCase(
  ctx: BenchContext,
  opts: {
    label: string;
    wake: boolean;
    records: readonly NewAttestation[];
    url: string;
    signer: KeySigner;
    admin: pg.Client;
    logger: Logger;
  },
): Promise<LatencyCase> {
  const pool = createVaultPool(opts.url, { applicationName: 'bench-scitt-publish' });
  let vault: Vault | undefined;
  // The vault's LISTEN connection (when opened) and its pool.
  const closePool = ctx.track(() => (vault !== undefined ? vault.close() : pool.end()));
  const stopping = new AbortController();
  let running: Promise<void> = Promise.resolve();
  const stopWorker = ctx.track(async () => {
    stopping.abort();
    await running;
  });
  let sampler: NodeJS.Timeout | undefined;
  try {
    vault = await openVault(pool);
    // As src/bin/common.ts wires it with SCITT_BACKEND=local and no SCITT_LOG_SECRET.
    const transparency = setupTransparency({
      vault,
      signer: opts.signer,
      caCertificates: opts.signer.caCertificates,
      logSigner: opts.signer,
      issuer: ISSUER,
      backend: 'local',
      logger: opts.logger.child({ component: 'transparency' }),
    });
    // As src/controller/manager.ts runs it: defaults (batch 8), the vault's repositories and, when
    // woken, its listener (without it: the idle poll of 1 s).
    const worker = createWorker({
      jobs: vault.transparencyJobs,
      ...(opts.wake ? { listener: vault.listener } : {}),
      publisher: transparency.publisher,
      logger: opts.logger.child({ component: 'scitt-worker' }),
    });
    running = worker.run(stopping.signal);

    const { records, admin } = opts;
    const total = records.length;
    const base = await admin.query<{ n: string }>('SELECT count(*) AS n FROM transparency_jobs');
    const before = Number(base.rows[0]!.n);
    const samples: Sample[] = [];
    let sampling = false;
    let inserted = 0;
    const t0 = performance.now();
    const sample = async (): Promise<void> => {
      if (sampling) return;
      sampling = true;
      try {
        const t = (performance.now() - t0) / 1000;
        const at = inserted;
        const { rows } = await admin.query<{ queued: string; published: string }>(
          "SELECT count(*) FILTER (WHERE state = 'queued') AS queued, " +
            "count(*) FILTER (WHERE state = 'published') AS published FROM transparency_jobs",
        );
        samples.push({
          t,
          inserted: at,
          queued: Number(rows[0]!.queued),
          published: Number(rows[0]!.published) - before,
        });
      } catch {
        // cleanup in progress
      } finally {
        sampling = false;
      }
    };
    sampler = setInterval(() => void sample(), SAMPLE_MS);

    // Slot k is due at t0 + k / RATE; everything due is appended as one batch.
    const ids: string[] = [];
    let maxBatch = 0;
    const slotMs = 1000 / RATE;
    while (inserted < total) {
      ctx.throwIfStopping();
      const due = Math.min(total, Math.floor((performance.now() - t0) / slotMs) + 1);
      if (due <= inserted) {
        await sleep(Math.max(0, t0 + inserted * slotMs - performance.now()));
        continue;
      }
      const batch = records.slice(inserted, due);
      maxBatch = Math.max(maxBatch, batch.length);
      const stored = await vault.attestations.append(batch, { enqueueTransparency: true });
      for (const s of stored) ids.push(s.id);
      inserted = due;
    }
    const insertSamples = samples.length;

    // Wait for the backlog (bounded: a worker that never catches up is a result, not a hang).
    const limit = performance.now() + Math.max(30_000, 10 * WORKER_IDLE_MS);
    for (;;) {
      ctx.throwIfStopping();
      const { rows } = await admin.query<{ open: string }>(
        "SELECT count(*) AS open FROM transparency_jobs WHERE state = 'queued'",
      );
      if (Number(rows[0]!.open) === 0 || performance.now() > limit) break;
      await sleep(50);
    }
    clearInterval(sampler);
    sampler = undefined;
    await sample();
    await stopWorker();

    const { rows } = await admin.query<{
      ms: number | null;
      state: string;
      created: Date;
      published: Date | null;
    }>(
      'SELECT extract(epoch FROM (j.published_at - a.created_at)) * 1000 AS ms, j.state, ' +
        'a.created_at AS created, j.published_at AS published ' +
        'FROM attestations a JOIN transparency_jobs j ON j.attestation_id = a.id WHERE a.id = ANY($1::uuid[])',
      [ids],
    );
    if (rows.length !== total) throw new Error(`found ${rows.length} jobs for ${total} attestations`);
    const latencies = rows.filter((r) => r.state === 'published').map((r) => Number(r.ms));
    const created = rows.map((r) => r.created.getTime());
    const published = rows.flatMap((r) => (r.published === null ? [] : [r.published.getTime()]));
    const firstCreated = Math.min(...created);
    const lastCreated = Math.max(...created);
    const drainMs = published.length > 0 ? Math.max(...published) - lastCreated : Number.NaN;
    const during = samples.slice(0, insertSamples);
    const failed = rows.filter((r) => r.state === 'failed').length;
    return {
      label: opts.label,
      n: total,
      insertRate: ((total - 1) * 1000) / Math.max(1, lastCreated - firstCreated),
      maxBatch,
      latencies,
      failed,
      samples,
      maxQueued: Math.max(0, ...samples.map((s) => s.queued)),
      drainMs,
      trend: slope(during),
      keptUp: latencies.length === total && drainMs <= WORKER_IDLE_MS + 1_000,
    };
  } finally {
    if (sampler !== undefined) clearInterval(sampler);
    await stopWorker();
    await closePool();
  }
}

async function publishLatency(
  ctx: BenchContext,
  url: string,
  signer: KeySigner,
): Promise<{ cases: LatencyCase[]; seconds: number }> {
  const seconds = scaled(20, ctx.scale, 3, 120);
  const perCase = RATE * seconds;
  const admin = await adminClient(ctx, url);
  // Info level (the publisher logs every publication) to /dev/null, as the controller runs it.
  const logger = pino(
    {
      name: 'controller',
      level: 'info',
      base: { pid: process.pid },
      timestamp: pino.stdTimeFunctions.isoTime,
    },
    pino.destination({ dest: '/dev/null', sync: false }),
  );
  // Sealed beforehand: the insert is what starts the clock, not the signing before it.
  const records = sealedRecords(signer, 2 * perCase, 'bench-scitt-publish');
  const cases: LatencyCase[] = [];
  for (const [k, c] of [
    { label: 'woken by NOTIFY on commit (as the controller)', wake: true },
    { label: 'idle poll 1 s only, no listener (info)', wake: false },
  ].entries()) {
    ctx.log(`transparency: ${c.label}: ${fmtCount(perCase)} attestations at ${RATE}/s`);
    cases.push(
      await latencyCase(ctx, {
        ...c,
        records: records.slice(k * perCase, (k + 1) * perCase),
        url,
        signer,
        admin,
        logger,
      }),
    );
  }
  logger.flush();
  return { cases, seconds };
}

function printLatency(cases: readonly LatencyCase[], seconds: number): void {
  printTable(
    `transparency — insert → published (job published_at − attestation created_at, DB clock), ` +
      `${RATE} attestations/s for ${seconds} s per case, worker in-process (batch 8, local backend), pg pool of 10`,
    [
      'case',
      'attestations',
      'insert/s',
      'max batch',
      'p50',
      'p90',
      'p99',
      'max',
      'max queued',
      'drain',
      'trend',
      'kept up',
    ],
    cases.map((c) => [
      c.label,
      fmtCount(c.n),
      fmtRate(c.insertRate),
      String(c.maxBatch),
      fmtMs(percentile(c.latencies, 50)),
      fmtMs(percentile(c.latencies, 90)),
      fmtMs(percentile(c.latencies, 99)),
      fmtMs(Math.max(...c.latencies)),
      fmtCount(c.maxQueued),
      fmtMs(c.drainMs),
      `${c.trend >= 0 ? '+' : ''}${c.trend.toFixed(1)}/s`,
      c.keptUp ? 'yes' : `NO${c.failed > 0 ? ` (${c.failed} failed)` : ''}`,
    ]),
  );
  // Queue depth over time, side by side: every 2 s the largest sampled depth and the published count.
  const buckets = Math.max(...cases.map((c) => Math.ceil(Math.max(...c.samples.map((s) => s.t)) / 2)));
  const rows: string[][] = [];
  for (let b = 0; b < buckets; b++) {
    const row = [`${2 * b}–${2 * b + 2} s`];
    for (const c of cases) {
      const inB = c.samples.filter((s) => s.t >= 2 * b && s.t < 2 * b + 2);
      row.push(
        inB.length === 0 ? '' : fmtCount(Math.max(...inB.map((s) => s.inserted))),
        inB.length === 0 ? '' : fmtCount(Math.max(...inB.map((s) => s.queued))),
        inB.length === 0 ? '' : fmtCount(Math.max(...inB.map((s) => s.published))),
      );
    }
    rows.push(row);
  }
  printTable(
    `transparency — queue depth over time (sampled every ${SAMPLE_MS} ms; per 2 s: inserted, max queued, published)`,
    ['t', ...cases.flatMap((_, i) => [`${i + 1}: inserted`, `${i + 1}: queued`, `${i + 1}: published`])],
    rows,
  );
  console.log(cases.map((c, i) => `  ${i + 1}: ${c.label}`).join('\n'));
}

export const transparencyBenchmark: Benchmark = {
  name: 'transparency',
  title: 'local-log appends + receipts vs SHA-256 + sign ceiling; insert → published at 100/s',
  async run(ctx) {
    await ctx.stack();
    const [logUrl, publishUrl] = await Promise.all([
      ctx.freshDatabase('scitt_log'),
      ctx.freshDatabase('scitt_publish'),
    ]);
    await migrate(logUrl);
    await migrate(publishUrl);
    const { key, signer } = await material();

    const appends = await logAppends(ctx, logUrl, key, signer);
    const { cases, seconds } = await publishLatency(ctx, publishUrl, signer);
    printLatency(cases, seconds);

    const d = cases[0]!;
    console.log(
      `\ntransparency summary: local-log append + receipt ` +
        CLIENTS.map((c, i) => `${fmtSmallRatio(appends.ratios[i]!)} (${c} clients)`).join(', ') +
        ` of the SHA-256 + sign ceiling (goal ${goalText(GOAL)}); ` +
        `insert → published at ${RATE}/s as the controller wires it p50 ${fmtMs(percentile(d.latencies, 50))}, ` +
        `p99 ${fmtMs(percentile(d.latencies, 99))}, kept up: ${d.keptUp ? 'yes' : 'no'}` +
        (cases[1] !== undefined
          ? `; idle poll only p50 ${fmtMs(percentile(cases[1].latencies, 50))}, ` +
            `p99 ${fmtMs(percentile(cases[1].latencies, 99))}`
          : ''),
    );
    return appends.summary;
  },
};
