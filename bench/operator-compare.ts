/**
 * operator-compare: this checkout's controller against another checkout's (BENCH_OPERATOR_BASELINE,
 * e.g. a `git worktree` of the commit before a change), side by side in one run on one stack, so
 * both meet the same machine load: the figure issue 16 asks for (a burst of 1,000 Runs: AIBOMs/s;
 * a steady 10 Runs/s: p99 from terminal phase to AIBOM), which separate runs on a shared 2-vCPU
 * machine cannot give (load swings of 4× between runs minutes apart).
 *
 * Each side is that checkout's own code, imported from its directory: `startController`,
 * `kubeClient`, the vault, the blob store and the signer. Each has its own database, namespace and
 * Lease, the same dev-PKI key, 4 workers, transparency off, the controller identity of
 * manifests/rbac.yaml. The "pipeline" (creating Runs, applying their steps and terminal phase) is
 * this checkout's `kubeClient` for both, as in `bench/operator.ts`: first every step Succeeded
 * (phase Running) until the side is idle, then the terminal phase.
 *
 * Rounds (3, or BENCH_OPERATOR_ROUNDS) alternate the order: round 1 prepares and flips the baseline
 * first, round 2 the candidate first, and so on; a burst is prepared for both sides before either is flipped. AIBOMs/s = Runs ÷
 * (first terminal apply sent → last AIBOM `created_at`), latency = `created_at` − the moment the
 * terminal apply's response arrived (same clock: PostgreSQL on this machine). Beside them, the CPU
 * seconds the whole process tree (the stack's servers, both controllers, the pipeline) spent per
 * AIBOM: the cost per AIBOM does not move with other tenants' load the way wall-clock rates do.
 */
import { execFile, execFileSync } from 'node:child_process';
import { existsSync, readdirSync, readFileSync, writeFileSync } from 'node:fs';
import { readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';
import { randomBytes } from 'node:crypto';
import type pg from 'pg';
import { pino } from 'pino';
import { Registry } from 'prom-client';
import { parse as parseYaml } from 'yaml';
import { generateDevPki, type DevPki } from '../hack/dev-pki.ts';
import { PIPELINE_FIELD_MANAGER, topoOrder } from '../hack/sample-pipeline.ts';
import { repoRoot } from '../hack/stack/stack.ts';
import type { Run, RunStatus, StepStatus } from '../src/crd/run.ts';
import type { startController as StartController } from '../src/controller/manager.ts';
import { RUN_TYPE } from '../src/controller/run/kube-api.ts';
import {
  applyStatus,
  kubeClient,
  resourcePath,
  type KubeClient,
  type RequestSpec,
  type kubeClient as KubeClientFn,
} from '../src/kube/index.ts';
import type { s3BlobStore as S3BlobStore } from '../src/blob/store.ts';
import type { signerFromPem as SignerFromPem } from '../src/signing/index.ts';
import { CONTROLLER_PLANS } from '../src/controller/manager.ts';
import type * as VaultModule from '../src/vault/index.ts';
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
import { diff, mapLimit, perKind, retrying, snapshot } from './operator.ts';
import { countingClient, loadKube, metric, type Counted, settleController } from './controller-kit.ts';

const WORKERS = 4;
const STEPS = 2;
const BURST = 1000;
const STEADY_RATE = 10;
/** Rounds (BENCH_OPERATOR_ROUNDS, default 3): an odd count gives a true median. */
const ROUNDS = Number(process.env.BENCH_OPERATOR_ROUNDS ?? 3);
const FLIP_CONCURRENCY = 100;
const PREPARE_CONCURRENCY = 16;
const P99_BUDGET_MS = 2000;
const THROUGHPUT_GOAL: Goal = { op: '>=', value: 2 };
const LATENCY_GOAL: Goal = { op: '<=', value: 1 };

const sleep = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));

/** Kernel clock ticks per second (USER_HZ), for /proc/<pid>/stat times. */
const TICKS = (() => {
  try {
    return Number(execFileSync('getconf', ['CLK_TCK'], { encoding: 'utf8' }).trim()) || 100;
  } catch {
    return 100;
  }
})();

/**
 * CPU seconds used so far by this process and every process below it: the stack's servers
 * (kube-apiserver, etcd, PostgreSQL and its backends, MinIO) and so both controllers, the
 * pipeline and the bench itself. A live process counts its own time and that of its children
 * already reaped, so a process exiting in between is neither lost nor counted twice. Linux only
 * (NaN elsewhere). A difference over a scenario is its CPU cost, whatever else the machine ran
 * meanwhile: the figure that other tenants' load does not skew.
 */
function treeCpu(): Map<string, number> {
  let entries: string[];
  try {
    entries = readdirSync('/proc').filter((p) => /^\d+$/.test(p));
  } catch {
    return new Map([['total', Number.NaN]]);
  }
  const children = new Map<number, { pid: number; ticks: number; comm: string }[]>();
  const self = { ticks: 0 };
  for (const p of entries) {
    let stat: string;
    try {
      stat = readFileSync(`/proc/${p}/stat`, 'utf8');
    } catch {
      continue; // gone meanwhile
    }
    const comm = stat.slice(stat.indexOf('(') + 1, stat.lastIndexOf(')'));
    const f = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
    // Fields 14–17 of proc(5): utime, stime, cutime, cstime (f[0] is field 3).
    const ticks = Number(f[11]) + Number(f[12]) + Number(f[13]) + Number(f[14]);
    const pid = Number(p);
    if (pid === process.pid) self.ticks = ticks;
    const ppid = Number(f[1]);
    children.set(ppid, [...(children.get(ppid) ?? []), { pid, ticks, comm }]);
  }
  // By program: the stack's servers by name, this process (controllers, pipeline) as `bench`.
  const out = new Map<string, number>([['bench', self.ticks / TICKS]]);
  let total = self.ticks;
  const todo = [process.pid];
  while (todo.length > 0) {
    for (const c of children.get(todo.pop()!) ?? []) {
      total += c.ticks;
      out.set(c.comm, (out.get(c.comm) ?? 0) + c.ticks / TICKS);
      todo.push(c.pid);
    }
  }
  out.set('total', total / TICKS);
  return out;
}

/** `after − before` per program (a program absent before counts from zero). */
function cpuDiff(before: Map<string, number>, after: Map<string, number>): Map<string, number> {
  const out = new Map<string, number>();
  for (const [k, v] of after) out.set(k, v - (before.get(k) ?? 0));
  return out;
}

/**
 * With BENCH_PPROF_DIR: a CPU profile of kube-apiserver (its /debug/pprof endpoint, on by default)
 * over the first BENCH_PPROF_SECONDS (default 8) of each burst, written as `<name>.pprof` for
 * `go tool pprof -top`: where the API server's share of a Run goes.
 */
function profiler(kubectl: string, kubeconfig: string): (name: string) => Promise<void> {
  const dir = process.env.BENCH_PPROF_DIR;
  if (dir === undefined || dir === '') return () => Promise.resolve();
  const seconds = Number(process.env.BENCH_PPROF_SECONDS ?? '8');
  return (name) =>
    new Promise((resolve, reject) => {
      execFile(
        kubectl,
        ['--kubeconfig', kubeconfig, 'get', '--raw', `/debug/pprof/profile?seconds=${seconds}`],
        { encoding: 'buffer', maxBuffer: 64 * 1024 * 1024 },
        (err, stdout) => {
          if (err !== null) {
            reject(new Error(`API server profile ${name}: ${err.message}`));
            return;
          }
          writeFileSync(join(dir, `${name}.pprof`), stdout);
          resolve();
        },
      );
    });
}

/**
 * BENCH_CANDIDATE_WITHOUT=attestations,events: a what-if, never a result. The candidate's creates
 * of those resources are answered with their own body and not sent, so the run shows what the
 * rest of a Run costs without them (docs/bench.md "operator-compare"). The tables say so.
 */
const WITHOUT: readonly string[] = (process.env.BENCH_CANDIDATE_WITHOUT ?? '')
  .split(',')
  .map((s) => s.trim())
  .filter((s) => s !== '');
for (const w of WITHOUT) {
  if (w !== 'attestations' && w !== 'events') {
    throw new Error(`BENCH_CANDIDATE_WITHOUT: "${w}" is neither attestations nor events`);
  }
}

function withheld(inner: KubeClient, without: readonly string[]): KubeClient {
  if (without.length === 0) return inner;
  return {
    request<T>(spec: RequestSpec): Promise<T> {
      const plural = spec.path.split('/').at(-1) ?? '';
      if (spec.method === 'POST' && without.includes(plural)) return Promise.resolve(spec.body as T);
      return inner.request<T>(spec);
    },
    stream: (spec, onObject) => inner.stream(spec, onObject),
  };
}

/** What the bench uses of one checkout, imported from its own files. */
interface Code {
  readonly startController: typeof StartController;
  readonly kubeClient: typeof KubeClientFn;
  readonly vault: Pick<typeof VaultModule, 'createVaultPool' | 'migrate' | 'openVault'>;
  readonly s3BlobStore: typeof S3BlobStore;
  readonly signerFromPem: typeof SignerFromPem;
}

async function codeAt(root: string): Promise<Code> {
  /** The first of `files` that exists in that checkout (a baseline may predate a move). */
  const load = async <T>(...files: string[]): Promise<T> => {
    const file = files.find((f) => existsSync(join(root, f))) ?? files[0] ?? '';
    return (await import(pathToFileURL(join(root, file)).href)) as T;
  };
  const [manager, runtime, vault, blob, signing] = await Promise.all([
    load<{ startController: Code['startController'] }>('src/controller/manager.ts'),
    load<{ kubeClient: Code['kubeClient'] }>('src/kube/index.ts', 'src/controller/runtime/index.ts'),
    load<Code['vault']>('src/vault/index.ts'),
    load<{ s3BlobStore: Code['s3BlobStore'] }>('src/blob/store.ts'),
    load<{ signerFromPem: Code['signerFromPem'] }>('src/signing/index.ts'),
  ]);
  return {
    startController: manager.startController,
    kubeClient: runtime.kubeClient,
    vault,
    s3BlobStore: blob.s3BlobStore,
    signerFromPem: signing.signerFromPem,
  };
}

interface Side {
  readonly label: 'baseline' | 'candidate';
  readonly ns: string;
  readonly registry: Registry;
  readonly counted: Counted;
  readonly admin: pg.Client;
  stop(): Promise<void>;
}

interface Prepared {
  readonly name: string;
  readonly uid: string;
  readonly steps: StepStatus[];
}

interface Result {
  readonly side: Side['label'];
  readonly round: number;
  readonly scenario: 'burst' | 'steady';
  readonly runs: number;
  readonly aibomsPerSecond: number;
  readonly p50: number;
  readonly p99: number;
  /** Controller requests per Run from the first terminal apply until idle (no leases, no watches). */
  readonly requestsPerRun: number;
  /** CPU seconds of the whole process tree (stack, controllers, pipeline) per AIBOM, flip to idle. */
  readonly cpuPerRun: number;
  /** The same, by program (`bench` = this process: both controllers and the pipeline). */
  readonly cpuByProgram: ReadonlyMap<string, number>;
}

export const operatorCompareBenchmark: Benchmark = {
  name: 'operator-compare',
  title:
    'this controller vs BENCH_OPERATOR_BASELINE (another checkout), side by side: burst AIBOMs/s, steady p99',
  async run(ctx) {
    if (!Number.isInteger(ROUNDS) || ROUNDS < 1)
      throw new Error('BENCH_OPERATOR_ROUNDS is a positive integer');
    const baseline = process.env.BENCH_OPERATOR_BASELINE;
    if (baseline === undefined || baseline === '') {
      throw new Error(
        'operator-compare needs BENCH_OPERATOR_BASELINE=<checkout to compare with> (e.g. git worktree add --detach ../base <commit>, with its node_modules)',
      );
    }
    return new Compare(ctx, baseline).run();
  },
};

class Compare {
  readonly #ctx: BenchContext;
  readonly #baselineRoot: string;
  #pipe!: KubeClient;
  #sample!: Run;
  #seq = 0;
  #profile: (name: string) => Promise<void> = () => Promise.resolve();

  constructor(ctx: BenchContext, baselineRoot: string) {
    this.#ctx = ctx;
    this.#baselineRoot = baselineRoot;
  }

  async run(): Promise<SummaryRow[]> {
    const ctx = this.#ctx;
    const stack = await ctx.stack();
    this.#pipe = kubeClient(loadKube(stack.kube.kubeconfigs.admin), { userAgent: 'bench-operator-compare' });
    this.#profile = profiler(stack.tools.kubectl, stack.kube.kubeconfigs.admin);
    this.#sample = parseYaml(await readFile(`${repoRoot}/manifests/samples/run.yaml`, 'utf8')) as Run;
    this.#sample.spec.steps = this.#sample.spec.steps.slice(0, STEPS);
    const pki = await generateDevPki();
    const sides = [
      await this.#side('baseline', this.#baselineRoot, pki),
      await this.#side('candidate', repoRoot, pki),
    ] as const;
    const burst = scaled(BURST, ctx.scale, 10);
    const steadyRuns = STEADY_RATE * scaled(20, ctx.scale, 5, 120);
    const results: Result[] = [];
    for (let round = 1; round <= ROUNDS; round++) {
      const order = round % 2 === 1 ? [sides[0], sides[1]] : [sides[1], sides[0]];
      ctx.log(`operator-compare: round ${round}: ${order.map((s) => s.label).join(' then ')}`);
      const bursts = [];
      for (const side of order) bursts.push(await this.#prepare(side, `b${round}-`, burst));
      for (const [i, side] of order.entries()) {
        results.push(
          await this.#scenario(side, round, 'burst', bursts[i]!, (runs, retries) =>
            mapLimit(runs, FLIP_CONCURRENCY, (r) => this.#flip(side, r, retries)),
          ),
        );
      }
      const steadies = [];
      for (const side of order) steadies.push(await this.#prepare(side, `s${round}-`, steadyRuns));
      for (const [i, side] of order.entries()) {
        results.push(
          await this.#scenario(side, round, 'steady', steadies[i]!, async (runs, retries) => {
            const t0 = performance.now();
            const flips: Promise<{ run: Prepared; sent: number; done: number }>[] = [];
            for (let k = 0; k < runs.length; k++) {
              const wait = t0 + (k * 1000) / STEADY_RATE - performance.now();
              if (wait > 0) await sleep(wait);
              flips.push(this.#flip(side, runs[k]!, retries));
            }
            return Promise.all(flips);
          }),
        );
      }
    }
    for (const side of sides) await side.stop();
    return this.#report(results, burst, steadyRuns);
  }

  async #side(label: Side['label'], root: string, pki: DevPki): Promise<Side> {
    const ctx = this.#ctx;
    const stack = await ctx.stack();
    const code = await codeAt(root);
    const ns = `bench-cmp-${label}-${randomBytes(3).toString('hex')}`;
    await this.#pipe.request({
      method: 'POST',
      path: '/api/v1/namespaces',
      body: { metadata: { name: ns } },
    });
    const dbUrl = await ctx.freshDatabase(`cmp_${label}`);
    await code.vault.migrate(dbUrl);
    const admin = await adminClient(ctx, dbUrl);
    const pool = code.vault.createVaultPool(dbUrl, {
      applicationName: `bench-compare-${label}`,
      // As each checkout's controller process opens it (a checkout without the option ignores it).
      plans: CONTROLLER_PLANS,
    });
    const closePool = ctx.track(() => pool.end());
    const vault = await code.vault.openVault(pool);
    const signer = code.signerFromPem(pki);
    const registry = new Registry();
    const counting = countingClient(
      withheld(
        code.kubeClient(loadKube(stack.kube.kubeconfigs['aibom-vault'])),
        label === 'candidate' ? WITHOUT : [],
      ),
    );
    const env = stack.env;
    const controller = code.startController({
      client: counting.client,
      vault,
      blobs: code.s3BlobStore({
        endpoint: env.S3_ENDPOINT!,
        accessKey: env.S3_ACCESS_KEY!,
        secretKey: env.S3_SECRET_KEY!,
        bucket: env.S3_BUCKET!,
      }),
      runtimeSigner: signer,
      envelopeSigner: () => Promise.resolve({ signer: signer, authority: 'service' as const }),
      logger: pino({ level: 'silent' }),
      registry,
      namespace: 'aibom-vault-system',
      leaseName: `bench-cmp-${label}-${randomBytes(3).toString('hex')}`,
      watchNamespace: ns,
      workers: WORKERS,
      lease: { durationSeconds: 6, renewDeadlineSeconds: 4, retryPeriodSeconds: 1 },
    });
    const closeController = ctx.track(() => controller.stop());
    const deadline = Date.now() + 60_000;
    while (!(controller.isLeader() && (await metric(registry, 'informer_synced')) === 1)) {
      if (Date.now() > deadline) throw new Error(`${label}: the controller did not lead in 60 s`);
      await sleep(100);
    }
    ctx.log(`operator-compare: ${label} from ${root}, namespace ${ns}`);
    return {
      label,
      ns,
      registry,
      counted: counting.counted,
      admin,
      stop: async () => {
        await closeController();
        await closePool();
        // Runs keep the finalizer of a stopped controller: the namespace goes with the stack.
        await this.#pipe
          .request({ method: 'DELETE', path: `/api/v1/namespaces/${ns}` })
          .catch(() => undefined);
      },
    };
  }

  #apply(side: Side, name: string, status: RunStatus): Promise<unknown> {
    return applyStatus(
      this.#pipe,
      RUN_TYPE,
      { namespace: side.ns, name },
      status as Record<string, unknown>,
      {
        fieldManager: PIPELINE_FIELD_MANAGER,
        force: false,
      },
    );
  }

  /** `n` Runs with every step Succeeded (phase Running), attested, the side's controller idle. */
  async #prepare(side: Side, prefix: string, n: number): Promise<Prepared[]> {
    const retries = { n: 0 };
    const t0 = performance.now();
    const prepared = await mapLimit(
      Array.from({ length: n }, (_, i) => i),
      PREPARE_CONCURRENCY,
      async () => {
        const name = `r${prefix}${this.#seq++}`;
        const created = await retrying(
          () =>
            this.#pipe.request<Run>({
              method: 'POST',
              path: resourcePath(RUN_TYPE, { namespace: side.ns }),
              body: { ...this.#sample, metadata: { name, namespace: side.ns } },
            }),
          retries,
        );
        const at = new Date().toISOString();
        const steps = topoOrder(created).map((id) => ({
          id,
          phase: 'Succeeded' as const,
          startedAt: at,
          finishedAt: at,
          output: { result: `output of ${id}` },
        }));
        await retrying(() => this.#apply(side, name, { phase: 'Running', steps }), retries);
        return { name, uid: created.metadata.uid, steps };
      },
    );
    const uids = prepared.map((p) => p.uid);
    await this.#settle(side, `${side.label}: steps of ${n} Runs attested`, 120_000 + n * 500, async () => {
      const { rows } = await side.admin.query<{ n: string }>(
        `SELECT count(*) AS n FROM attestations WHERE kind = 'step' AND run_id = ANY($1::uuid[])`,
        [uids],
      );
      return Number(rows[0]!.n) === n * STEPS;
    });
    this.#ctx.log(
      `operator-compare: ${side.label}: ${fmtCount(n)} Runs prepared in ${((performance.now() - t0) / 1000).toFixed(1)} s`,
    );
    return prepared;
  }

  /** Waits until `done()` holds and the side's controller has been idle for 1.5 s. */
  #settle(side: Side, what: string, timeoutMs: number, done: () => Promise<boolean>): Promise<void> {
    return settleController(this.#ctx, side.registry, what, timeoutMs, done);
  }

  async #flip(side: Side, run: Prepared, retries: { n: number }) {
    const sent = Date.now();
    await retrying(() => this.#apply(side, run.name, { phase: 'Succeeded', steps: run.steps }), retries);
    return { run, sent, done: Date.now() };
  }

  async #scenario(
    side: Side,
    round: number,
    scenario: Result['scenario'],
    runs: readonly Prepared[],
    flip: (
      runs: readonly Prepared[],
      retries: { n: number },
    ) => Promise<{ run: Prepared; sent: number; done: number }[]>,
  ): Promise<Result> {
    this.#ctx.log(`operator-compare: ${side.label}: ${scenario}, ${fmtCount(runs.length)} Runs`);
    const before = snapshot(side.counted.byCategory);
    const cpuBefore = treeCpu();
    const retries = { n: 0 };
    const profiled = scenario === 'burst' ? this.#profile(`${side.label}-${scenario}-${round}`) : undefined;
    const flipping = flip(runs, retries);
    let flipError: Error | undefined;
    flipping.catch((err: unknown) => (flipError = err as Error));
    const uids = runs.map((r) => r.uid);
    const recordedAt = new Map<string, number>();
    const deadline = Date.now() + 120_000 + runs.length * 500;
    while (recordedAt.size < runs.length) {
      this.#ctx.throwIfStopping();
      if (flipError !== undefined) throw flipError;
      if (Date.now() > deadline)
        throw new Error(`${side.label} ${scenario}: ${recordedAt.size}/${runs.length} AIBOMs`);
      await sleep(100);
      const { rows } = await side.admin.query<{ run_id: string; ms: number }>(
        `SELECT run_id::text, (extract(epoch FROM created_at) * 1000)::float8 AS ms
           FROM artifacts WHERE kind = 'aibom' AND run_id = ANY($1::uuid[])`,
        [uids],
      );
      for (const r of rows) recordedAt.set(r.run_id, r.ms);
    }
    const flipped = await flipping;
    await profiled;
    await this.#settle(side, `${side.label} ${scenario}: idle`, 300_000, () => Promise.resolve(true));
    const cpuBy = cpuDiff(cpuBefore, treeCpu());
    const cpu = cpuBy.get('total')!;
    const k = perKind(diff(side.counted.byCategory, before));
    const sent = Math.min(...flipped.map((f) => f.sent));
    const latencies = flipped.map((f) => recordedAt.get(f.run.uid)! - f.done);
    const result: Result = {
      side: side.label,
      round,
      scenario,
      runs: runs.length,
      aibomsPerSecond: runs.length / ((Math.max(...recordedAt.values()) - sent) / 1000),
      p50: percentile(latencies, 50),
      p99: percentile(latencies, 99),
      requestsPerRun: (k.read + k.write + k.create) / runs.length,
      cpuPerRun: cpu / runs.length,
      cpuByProgram: new Map([...cpuBy].filter(([k]) => k !== 'total').map(([k, v]) => [k, v / runs.length])),
    };
    this.#ctx.log(
      `operator-compare: ${side.label}: ${scenario} ${fmtRate(result.aibomsPerSecond)} AIBOMs/s, p99 ${fmtMs(result.p99)}, ${(result.cpuPerRun * 1000).toFixed(0)} CPU-ms per AIBOM`,
    );
    return result;
  }

  #report(results: readonly Result[], burst: number, steadyRuns: number): SummaryRow[] {
    printTable(
      `${WITHOUT.length > 0 ? `WHAT-IF (the candidate sends no creates of ${WITHOUT.join(', ')}) ` : ''}operator-compare — ${fmtCount(burst)} Runs at once and ${fmtCount(steadyRuns)} at ${STEADY_RATE} Runs/s, per side and round (alternating order), ${WORKERS} workers, sample Run (first ${STEPS} steps)`,
      [
        'round',
        'scenario',
        'side',
        'Runs',
        'AIBOMs/s',
        'p50',
        'p99',
        'requests/Run after terminal',
        'CPU-ms/AIBOM',
      ],
      results.map((r) => [
        String(r.round),
        r.scenario,
        r.side,
        fmtCount(r.runs),
        fmtRate(r.aibomsPerSecond),
        fmtMs(r.p50),
        fmtMs(r.p99),
        r.requestsPerRun.toFixed(2),
        (r.cpuPerRun * 1000).toFixed(0),
      ]),
    );
    const programs = [...new Set(results.flatMap((r) => [...r.cpuByProgram.keys()]))].sort(
      (a, b) => (results[0]!.cpuByProgram.get(b) ?? 0) - (results[0]!.cpuByProgram.get(a) ?? 0),
    );
    printTable(
      'operator-compare — CPU-ms per AIBOM by program (bench = this process: both controllers and the pipeline)',
      ['round', 'scenario', 'side', ...programs],
      results.map((r) => [
        String(r.round),
        r.scenario,
        r.side,
        ...programs.map((p) => ((r.cpuByProgram.get(p) ?? 0) * 1000).toFixed(1)),
      ]),
    );
    const of = (side: Side['label'], scenario: Result['scenario']) =>
      results.filter((r) => r.side === side && r.scenario === scenario);
    const ratios = of('candidate', 'burst').map(
      (c) => c.aibomsPerSecond / of('baseline', 'burst').find((b) => b.round === c.round)!.aibomsPerSecond,
    );
    const ratio = median(ratios);
    const cpuRatios = of('candidate', 'burst').map(
      (c) => of('baseline', 'burst').find((b) => b.round === c.round)!.cpuPerRun / c.cpuPerRun,
    );
    const steadyP99 = median(of('candidate', 'steady').map((r) => r.p99));
    const baseP99 = median(of('baseline', 'steady').map((r) => r.p99));
    printTable(
      `${WITHOUT.length > 0 ? 'WHAT-IF ' : ''}operator-compare — summary`,
      ['measure', 'baseline', 'candidate', 'ratio (per round)', 'goal', 'verdict'],
      [
        [
          `${fmtCount(burst)} at once: AIBOMs/s (median of rounds)`,
          fmtRate(median(of('baseline', 'burst').map((r) => r.aibomsPerSecond))),
          fmtRate(median(of('candidate', 'burst').map((r) => r.aibomsPerSecond))),
          `${fmtRatio(ratio)} (${ratios.map(fmtRatio).join(', ')})`,
          goalText(THROUGHPUT_GOAL),
          verdict(ratio, THROUGHPUT_GOAL),
        ],
        [
          `${fmtCount(burst)} at once: AIBOMs per CPU-second of the whole stack`,
          fmtRate(1 / median(of('baseline', 'burst').map((r) => r.cpuPerRun))),
          fmtRate(1 / median(of('candidate', 'burst').map((r) => r.cpuPerRun))),
          `${fmtRatio(median(cpuRatios))} (${cpuRatios.map(fmtRatio).join(', ')})`,
          '(info)',
          '',
        ],
        [
          `${STEADY_RATE} Runs/s: p99 terminal → AIBOM (median of rounds)`,
          fmtMs(baseP99),
          fmtMs(steadyP99),
          `${fmtRatio(steadyP99 / P99_BUDGET_MS)} of the 2 s budget`,
          goalText(LATENCY_GOAL),
          verdict(steadyP99 / P99_BUDGET_MS, LATENCY_GOAL),
        ],
      ],
    );
    return [
      {
        benchmark: 'operator-compare',
        case: `${WITHOUT.length > 0 ? 'WHAT-IF ' : ''}${fmtCount(burst)} at once: AIBOMs/s vs baseline`,
        ratioOf: 'candidate AIBOMs/s ÷ baseline AIBOMs/s',
        ratio,
        goal: THROUGHPUT_GOAL,
      },
      {
        benchmark: 'operator-compare',
        case: `${STEADY_RATE} Runs/s: p99 terminal → AIBOM`,
        ratioOf: 'p99 ÷ 2 s budget',
        ratio: steadyP99 / P99_BUDGET_MS,
        goal: LATENCY_GOAL,
      },
    ];
  }
}
