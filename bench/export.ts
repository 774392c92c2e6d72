/**
 * export: throughput of POST /v1/attestations/export — the sidecar API in a worker thread (as
 * bench/api-server.ts wires it, with the service signer), streaming a bundle of 20,000 ×
 * BENCH_SCALE really signed attestations (every record with its Sigstore bundle, one segment index
 * per 1000, the .intoto.jsonl, the index and the bundle's own C2PA manifest) to a node:http
 * client that only counts the bytes — vs the baseline: writing the SAME entries (same paths, same
 * bytes, read back from the first export, checked to rebuild it byte for byte) as a raw tar (ustar
 * headers, padding) with SHA-256 over the whole archive, in the same process, in alternating
 * rounds. Reports MiB/s and attestations/s of both (median, min–max) and the ratio (goal ≥ 0.5×),
 * and the CPU each side used: the export's server thread, its client (this thread) and the
 * PostgreSQL backends serving it, against the baseline's thread. The baseline is the floor of any
 * exporter: it does no database reads, no JSON, no per-entry digests, no signatures and no I/O.
 */
import { createHash } from 'node:crypto';
import { readFile } from 'node:fs/promises';
import http from 'node:http';
import type pg from 'pg';
import { randomUUID } from 'node:crypto';
import { generateDevPki } from '../hack/dev-pki.ts';
import { DEFAULT_CHUNK_SIZE } from '../src/export/bundle.ts';
import { END_OF_ARCHIVE, parseTarHeader, tarHeader, tarPadding } from '../src/export/tar.ts';
import { rememberSigner } from '../src/export/keys.ts';
import { signerFromPem } from '../src/signing/index.ts';
import { createVaultPool, migrate, openVault, type NewAttestation } from '../src/vault/index.ts';
import { stackApiOptions, startApiServer, type ApiServer } from './api-server.ts';
import {
  adminClient,
  fmtCount,
  fmtRate,
  fmtRatio,
  goalText,
  median,
  printTable,
  scaled,
  verdict,
  type Benchmark,
  type Goal,
  type SummaryRow,
} from './common.ts';
import { buildRecord, type RunShape } from './records.ts';

const GOAL: Goal = { op: '>=', value: 0.5 };
const ROUNDS = 5;
const MiB = 1024 * 1024;
const NAMESPACE = 'bench-export';
/** Clock ticks per second of /proc/<pid>/stat (USER_HZ: 100 on Linux x86-64 and arm64). */
const CLK_TCK = 100;

interface Measured {
  readonly bytes: number;
  readonly seconds: number;
  /** CPU time of the thread(s) doing the work, in seconds, by party. */
  readonly cpu: Readonly<Record<string, number>>;
}

/** CPU of this thread so far, in seconds. */
function threadCpu(): number {
  const { user, system } = process.threadCpuUsage();
  return (user + system) / 1e6;
}

/**
 * CPU seconds used so far by the PostgreSQL backends serving `database` (procfs utime + stime),
 * per pid: the API's pool connections. Backends started later count from zero; one that exits
 * during a round loses its share (the pool keeps its connections open while it is busy).
 */
async function backendCpu(admin: pg.Client, database: string): Promise<Map<number, number>> {
  const { rows } = await admin.query<{ pid: number }>(
    'SELECT pid FROM pg_stat_activity WHERE datname = $1 AND pid <> pg_backend_pid()',
    [database],
  );
  const out = new Map<number, number>();
  for (const { pid } of rows) {
    try {
      const stat = await readFile(`/proc/${pid}/stat`, 'utf8');
      // Fields after the command name (which may hold spaces): state is field 3, utime 14, stime 15.
      const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
      out.set(pid, (Number(fields[11]) + Number(fields[12])) / CLK_TCK);
    } catch {
      // Gone meanwhile, or not on this machine's procfs: not counted.
    }
  }
  return out;
}

function cpuDelta(before: Map<number, number>, after: Map<number, number>): number {
  let sum = 0;
  for (const [pid, t] of after) sum += t - (before.get(pid) ?? 0);
  return sum;
}

/** The CPU counters of every party on the export side: the API's thread, this thread, PostgreSQL. */
interface Counters {
  readonly server: number;
  readonly client: number;
  readonly backends: Map<number, number>;
}

async function counters(api: ApiServer, pgCpu: () => Promise<Map<number, number>>): Promise<Counters> {
  const server = (await api.cpuMicros()) / 1e6;
  const backends = await pgCpu();
  return { server, backends, client: threadCpu() };
}

/** Runs `work` (which reports the bytes it moved) and what each party spent on it. */
async function measure<T extends { bytes: number }>(
  api: ApiServer,
  pgCpu: () => Promise<Map<number, number>>,
  work: () => Promise<T>,
): Promise<Measured & T> {
  const before = await counters(api, pgCpu);
  const client0 = threadCpu();
  const t0 = performance.now();
  const result = await work();
  const seconds = (performance.now() - t0) / 1000;
  const client = threadCpu() - client0;
  const after = await counters(api, pgCpu);
  return {
    ...result,
    seconds,
    cpu: {
      server: after.server - before.server,
      client,
      postgres: cpuDelta(before.backends, after.backends),
    },
  };
}

/** One response read with node:http: the client counts bytes (and keeps them only when asked). */
function receive(
  url: string,
  init: { method: 'GET' } | { method: 'POST'; token: string; body: string },
  keep: boolean,
): Promise<{ bytes: number; body?: Buffer }> {
  return new Promise((resolve, reject) => {
    const req = http.request(
      url,
      init.method === 'GET'
        ? { method: 'GET' }
        : {
            method: 'POST',
            headers: { authorization: `Bearer ${init.token}`, 'content-type': 'application/json' },
          },
      (res) => {
        if (res.statusCode !== 200) {
          reject(new Error(`${url} answered ${res.statusCode}`));
          res.resume();
          return;
        }
        let n = 0;
        const parts: Buffer[] = [];
        res.on('data', (c: Buffer) => {
          n += c.length;
          if (keep) parts.push(c);
        });
        res.on('end', () => resolve({ bytes: n, ...(keep ? { body: Buffer.concat(parts) } : {}) }));
        res.on('error', reject);
      },
    );
    req.on('error', reject);
    req.end(init.method === 'POST' ? init.body : undefined);
  });
}

/**
 * The baseline: the same entries as a raw tar with SHA-256 over every byte, in 256 KiB chunks.
 * Returns the digest too, so the caller can check it saw the very bytes the export sent.
 */
function rawTar(entries: readonly { path: string; content: Buffer }[]): Measured & { sha256: string } {
  const cpu0 = threadCpu();
  const t0 = performance.now();
  const h = createHash('sha256');
  let parts: Buffer[] = [];
  let pending = 0;
  let bytes = 0;
  const push = (b: Buffer) => {
    parts.push(b);
    pending += b.length;
    if (pending >= 256 * 1024) {
      const chunk = Buffer.concat(parts, pending);
      h.update(chunk);
      bytes += chunk.length;
      parts = [];
      pending = 0;
    }
  };
  for (const e of entries) {
    push(tarHeader(e.path, e.content.length));
    push(e.content);
    push(tarPadding(e.content.length));
  }
  push(END_OF_ARCHIVE);
  const chunk = Buffer.concat(parts, pending);
  h.update(chunk);
  bytes += chunk.length;
  const sha256 = h.digest('hex');
  return { bytes, seconds: (performance.now() - t0) / 1000, cpu: { raw: threadCpu() - cpu0 }, sha256 };
}

export const exportBenchmark: Benchmark = {
  name: 'export',
  title: 'POST /v1/attestations/export throughput vs raw tar + SHA-256 of the same bytes',
  async run(ctx) {
    const total = scaled(20_000, ctx.scale, 1000);
    const stack = await ctx.stack();
    const url = await ctx.freshDatabase('export');
    await migrate(url);
    const pki = await generateDevPki();
    const signer = signerFromPem(pki);
    const pool = createVaultPool(url, { max: 4 });
    const closePool = ctx.track(() => pool.end());
    const vault = await openVault(pool);
    await rememberSigner(vault.signers, signer, { namespace: '', role: 'signer' });
    const t0 = performance.now();
    for (let k = 0; k < total;) {
      const batch: NewAttestation[] = [];
      for (; batch.length < 1000 && k < total; k++) {
        const run: RunShape = {
          namespace: NAMESPACE,
          runId: randomUUID(),
          pack: { name: 'baseline', version: '1.0.0' },
        };
        batch.push(buildRecord(signer, run, k % 4));
      }
      await vault.attestations.append(batch);
      ctx.throwIfStopping();
    }
    await closePool();
    // Statistics, as autovacuum would have gathered them on a live vault: without them the planner
    // takes the namespace's keyset batches for a handful of rows and sorts every remaining row of
    // the namespace for each batch (quadratic in the selection; see docs/bench.md).
    const admin = await adminClient(ctx, url);
    await admin.query('ANALYZE attestations');
    ctx.log(
      `export: ${fmtCount(total)} signed records stored in ${((performance.now() - t0) / 1000).toFixed(1)} s`,
    );

    const api = await startApiServer(ctx, { ...stackApiOptions(stack, url, 10), signer: pki });
    const token = stack.kube.tokens.admin;
    const database = new URL(url).pathname.slice(1);
    const pgCpu = () => backendCpu(admin, database);
    const exportOnce = (keep: boolean) =>
      measure(api, pgCpu, () =>
        receive(
          `${api.url}/v1/attestations/export`,
          { method: 'POST', token, body: JSON.stringify({ namespaces: [NAMESPACE] }) },
          keep,
        ),
      );
    // Warm-up export, kept: its entries are the baseline's input.
    const first = await exportOnce(true);
    // Views into the one received buffer (no copies): the main thread, which runs the client, keeps
    // a small heap, as it does while measuring the exports.
    const body = first.body!;
    const entries: { path: string; content: Buffer }[] = [];
    for (let at = 0; ;) {
      const header = parseTarHeader(body.subarray(at, at + 512));
      if (header === null) break;
      entries.push({ path: header.path, content: body.subarray(at + 512, at + 512 + header.size) });
      at += 512 + Math.ceil(header.size / 512) * 512;
    }
    // The baseline must see exactly the bytes the export sends (headers, padding, end blocks).
    const check = rawTar(entries);
    if (check.bytes !== body.length || check.sha256 !== createHash('sha256').update(body).digest('hex')) {
      throw new Error('the baseline does not rebuild the exported bytes');
    }
    ctx.log(
      `export: bundle of ${fmtCount(first.bytes)} bytes, ${fmtCount(entries.length)} entries (baseline rebuilds it byte for byte)`,
    );
    // The two floors under the export, measured in the same rounds (informational): the same
    // bytes moved over HTTP from memory, and the export's PostgreSQL reads with nothing written.
    const floorUrl = await api.serveBytes(body, DEFAULT_CHUNK_SIZE);
    const transferOnce = () => measure(api, pgCpu, () => receive(floorUrl, { method: 'GET' }, false));
    const readOnce = () =>
      measure(api, pgCpu, async () => {
        const rows = await api.readRecords([NAMESPACE]);
        if (rows !== total) throw new Error(`the read pass saw ${rows} rows, not ${total}`);
        return { bytes: first.bytes };
      });

    const exports: Measured[] = [];
    const transfers: Measured[] = [];
    const reads: Measured[] = [];
    const raw: Measured[] = [];
    for (let r = 0; r < ROUNDS; r++) {
      ctx.throwIfStopping();
      exports.push(await exportOnce(false));
      raw.push(rawTar(entries));
      transfers.push(await transferOnce());
      reads.push(await readOnce());
      raw.push(rawTar(entries));
    }
    await api.close();
    const rates = (xs: readonly Measured[]) => xs.map((x) => x.bytes / x.seconds);
    const rateOf = (xs: readonly Measured[]) => median(rates(xs));
    const spread = (xs: readonly Measured[]) =>
      `${(Math.min(...rates(xs)) / MiB).toFixed(1)}–${(Math.max(...rates(xs)) / MiB).toFixed(1)}`;
    const perRecord = first.bytes / total;
    const rawRate = rateOf(raw);
    const ratio = rateOf(exports) / rawRate;
    const ms = (s: number) => (s * 1000).toFixed(0);
    const cpuText = (xs: readonly Measured[]) => {
      const parties = Object.keys(xs[0]!.cpu);
      const part = (p: string) => median(xs.map((x) => x.cpu[p] ?? 0));
      const sum = median(xs.map((x) => parties.reduce((a, p) => a + (x.cpu[p] ?? 0), 0)));
      const names: Record<string, string> = { server: 'server', client: 'client', postgres: 'PostgreSQL' };
      return parties.length === 1
        ? ms(sum)
        : `${ms(sum)} (${parties.map((p) => `${names[p] ?? p} ${ms(part(p))}`).join(', ')})`;
    };
    const totalCpu = (xs: readonly Measured[]) =>
      median(xs.map((x) => Object.values(x.cpu).reduce((a, b) => a + b, 0)));
    const line = (label: string, xs: readonly Measured[]) => [
      label,
      (rateOf(xs) / MiB).toFixed(1),
      spread(xs),
      fmtRate(rateOf(xs) / perRecord),
      fmtRatio(rateOf(xs) / rawRate),
      cpuText(xs),
    ];
    printTable(
      `export: ${fmtCount(total)} attestations, ${(first.bytes / MiB).toFixed(1)} MiB per bundle (median of ${ROUNDS} / ${ROUNDS} / ${ROUNDS} / ${2 * ROUNDS} rounds, min–max; CPU: median ms per bundle)`,
      ['path', 'MiB/s', 'min–max', 'attestations/s', '÷ raw', 'CPU ms per bundle'],
      [
        line('POST /v1/attestations/export (HTTP, worker thread)', exports),
        line('(floor) the same bytes from memory over HTTP', transfers),
        line("(floor) the export's PostgreSQL reads alone", reads),
        line('raw tar + SHA-256 of the same entries', raw),
        [
          'ratio export / raw',
          fmtRatio(ratio),
          '',
          '',
          '',
          `CPU raw / export: ${fmtRatio(totalCpu(raw) / totalCpu(exports))}`,
        ],
        ['goal', goalText(GOAL), '', verdict(ratio, GOAL), '', ''],
      ],
    );
    const row: SummaryRow = {
      benchmark: 'export',
      case: `${fmtCount(total)} attestations`,
      ratioOf: 'export MiB/s / raw tar+SHA-256 MiB/s',
      ratio,
      goal: GOAL,
    };
    return [row];
  },
};
