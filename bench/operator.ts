/**
 * operator: the controller (`startController`, in-process, one namespace, 4 workers, its kubeClient
 * under the controller's identity) against the stack's real kube-apiserver, PostgreSQL and MinIO,
 * with a fresh database and a dev-PKI signer.
 *
 * - Latency from a Run's terminal phase to its AIBOM recorded: every Run is created from
 *   manifests/samples/run.yaml (its first 2 steps), its steps are set Succeeded by server-side apply
 *   under the pipeline's field manager and the controller is left to attest them and go idle; then
 *   the phase is applied as Succeeded. Latency per Run = `artifacts.created_at` of its AIBOM
 *   (PostgreSQL's `clock_timestamp()` at the insert, committed in the same transaction) minus the
 *   moment the terminal apply's response arrived (`Date.now()`, same machine and clock). When a watch
 *   in this process first sees `AIBOMReady=True` is shown too (that also covers the Attestation
 *   resources and the status write that follow the record).
 * - Scenarios: single Runs on an idle controller (the floor), a steady 10 Runs/s for 20 s × scale
 *   (the goal's condition: p50 ≤ 250 ms, p99 ≤ 2 s), then 10, 100 and 1,000 Runs (× scale, at least
 *   10) applied as Succeeded at once (up to 100 writes in flight).
 * - Sustained rate (issue 29, goal ≥ 25 Runs/s): after the steady 10 Runs/s, rising offered rates
 *   (15, 20, 25, 30, 40, 50 Runs/s; below BENCH_SCALE 0.5 only 25) for the same time each, on Runs
 *   prepared for each, until one's p99 terminal → AIBOM exceeds 250 ms; the highest rate held ÷ 25.
 * - Throughput ceiling: closed loops with the controller's concurrency (4, its workers) and its client
 *   measure the API server's rate for each kind of request the controller makes (read, apply/patch,
 *   create), right after each scenario. With the controller's own requests per Run
 *   (counted by a wrapper around the KubeClient it is given) the ceiling in Runs/s is
 *   1 / Σ(requests per Run of a kind ÷ rate of that kind); AIBOMs/s are reported against it.
 * - Memory per cached Run: heap (after forced GC) while the idle controller caches every Run minus
 *   heap after `stop()`, per Run, against the JSON size of the cached objects; an informer of the
 *   same code started alone shows the cache's own share.
 *
 * The bench's own writes (the "pipeline") go through the same kubeClient code (kept-alive
 * connections): on a cluster they come from elsewhere, here they share the two vCPUs with the controller.
 * The latency goals are absolute (as the issue states them), so their summary ratios divide by the
 * budget; the table shows the unloaded floor measured in the same run next to them. The memory goal
 * is a true ratio (heap bytes ÷ JSON bytes of the same objects).
 */
import { createHash, randomBytes } from 'node:crypto';
import { readFile } from 'node:fs/promises';
import v8 from 'node:v8';
import vm from 'node:vm';
import type pg from 'pg';
import { pino } from 'pino';
import { Registry } from 'prom-client';
import { uuidv7 } from 'uuidv7';
import { parse as parseYaml } from 'yaml';
import { repoRoot, type StackInfo } from '../hack/stack/stack.ts';
import type { Run, RunStatus, StepStatus } from '../src/crd/run.ts';
import { canonicalJson } from '../src/attest/index.ts';
import { PIPELINE_FIELD_MANAGER, topoOrder } from '../hack/sample-pipeline.ts';
import type { RunningController } from '../src/controller/manager.ts';
import { ATTESTATION_TYPE, RUN_TYPE } from '../src/controller/run/kube-api.ts';
import { FIELD_MANAGER, FINALIZER } from '../src/crd/reasons.ts';
import {
  applyStatus,
  Informer,
  isNotFound,
  KubeApiError,
  kubeClient,
  kubeListerWatcher,
  resourcePath,
  type KubeAccess,
  type KubeClient,
} from '../src/kube/index.ts';
import { generateDevPki } from '../hack/dev-pki.ts';
import {
  controllerVaultPool,
  countingClient,
  loadKube,
  metric,
  settleController,
  startBenchController,
  waitLeading,
  WORKERS,
} from './controller-kit.ts';
import { signerFromPem } from '../src/signing/index.ts';
import { migrate, openVault } from '../src/vault/index.ts';
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

const BURSTS = [10, 100, 1000];
const STEADY_RATE = 10; // Runs/s: the goal's condition
/**
 * Issue 29's sustained rate: the highest offered rate whose p99 terminal → AIBOM stays within
 * 250 ms, goal ≥ 25 Runs/s. The rates tried after the steady 10 Runs/s, rising, until one misses;
 * below BENCH_SCALE 0.5 only the goal's rate is tried (a smoke run, not a search).
 */
const SUSTAINED_LADDER = [15, 20, 25, 30, 40, 50];
const SUSTAINED_GOAL_RATE = 25;
const SUSTAINED_P99_MS = 250;
const SUSTAINED_GOAL: Goal = { op: '>=', value: 1 };
const FLOOR_RUNS = 5;
const STEPS = 2;
/** Terminal writes in flight at once: half of kube-apiserver's default 200 mutating requests in flight. */
const FLIP_CONCURRENCY = 100;
const PREPARE_CONCURRENCY = 16;
const P50_BUDGET_MS = 250;
const P99_BUDGET_MS = 2000;
const LATENCY_GOAL: Goal = { op: '<=', value: 1 };
const MEMORY_GOAL: Goal = { op: '<=', value: 2 };

const sleep = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));

// ---------------------------------------------------------------------------------------------
// Counting the controller's API requests (the counting client: bench/controller-kit.ts)

export const snapshot = (m: Map<string, number>): Map<string, number> => new Map(m);
export function diff(after: Map<string, number>, before: Map<string, number>): Map<string, number> {
  const out = new Map<string, number>();
  for (const [k, v] of after) if (v - (before.get(k) ?? 0) > 0) out.set(k, v - (before.get(k) ?? 0));
  return out;
}

/** Requests of the controller per kind, without leader election (not per Run) and watches (long-lived). */
export function perKind(counts: Map<string, number>): Record<'read' | 'write' | 'create', number> {
  const out = { read: 0, write: 0, create: 0 };
  for (const [category, n] of counts) {
    if (category.includes('leases')) continue;
    const method = category.split(' ')[0]!;
    if (method === 'WATCH') continue;
    if (method === 'GET' || method === 'LIST') out.read += n;
    else if (method === 'POST') out.create += n;
    else out.write += n;
  }
  return out;
}

// ---------------------------------------------------------------------------------------------
// Small helpers

export async function mapLimit<T, R>(
  items: readonly T[],
  limit: number,
  fn: (item: T, i: number) => Promise<R>,
): Promise<R[]> {
  const out: R[] = new Array<R>(items.length);
  let next = 0;
  await Promise.all(
    Array.from({ length: Math.min(limit, items.length) }, async () => {
      while (next < items.length) {
        const i = next++;
        out[i] = await fn(items[i]!, i);
      }
    }),
  );
  return out;
}

/**
 * Strips the finalizer a stopped controller left on `runs` of `namespace` (32 at once, retried like
 * every bench write; a Run already gone is fine), so that the namespace can be deleted.
 */
export async function dropFinalizers(
  pipe: KubeClient,
  namespace: string,
  runs: readonly Run[],
  retries: { n: number },
): Promise<void> {
  await mapLimit(runs, 32, (r) =>
    retrying(
      () =>
        pipe.request({
          method: 'PATCH',
          path: resourcePath(RUN_TYPE, { namespace, name: r.metadata.name }),
          contentType: 'application/merge-patch+json',
          body: { metadata: { finalizers: null } },
        }),
      retries,
    ).catch((err: unknown) => {
      if (!isNotFound(err)) throw err;
    }),
  );
}

/** Retries what the API server sheds under load (429, 5xx, reset connections); counts the retries. */
export async function retrying<T>(fn: () => Promise<T>, retries: { n: number }): Promise<T> {
  for (let attempt = 0; ; attempt++) {
    try {
      return await fn();
    } catch (err) {
      const transient =
        err instanceof KubeApiError
          ? err.code === 429 || err.code >= 500
          : /ECONNRESET|EPIPE|ETIMEDOUT|socket hang up/.test(String((err as Error)?.message ?? err));
      if (!transient || attempt >= 20) throw err;
      retries.n++;
      const wait = err instanceof KubeApiError && err.retryAfterSeconds ? err.retryAfterSeconds * 1000 : 50;
      await sleep(Math.min(1000, wait * (1 + Math.random())));
    }
  }
}

export const aibomReady = (r: Run): boolean =>
  r.status?.conditions?.some((c) => c.type === 'AIBOMReady' && c.status === 'True') ?? false;

/** Every Run of `namespace`, listed in pages of 500 (a namespace may hold tens of thousands). */
export async function listRuns(pipe: KubeClient, namespace: string): Promise<Run[]> {
  const runs: Run[] = [];
  let cont: string | undefined;
  do {
    const page = await pipe.request<{ items: Run[]; metadata: { continue?: string } }>({
      method: 'GET',
      path: resourcePath(RUN_TYPE, { namespace }),
      query: { limit: 500, ...(cont !== undefined ? { continue: cont } : {}) },
    });
    runs.push(...page.items);
    cont = page.metadata.continue || undefined;
  } while (cont !== undefined);
  return runs;
}

/** Every step of `run` Succeeded with an output and its digest, as the pipeline reports them. */
export function succeededSteps(run: Run): StepStatus[] {
  const at = new Date().toISOString();
  return topoOrder(run).map((id) => {
    const output = { result: `output of ${id}`, at };
    const outputDigest = `sha256:${createHash('sha256').update(canonicalJson(output)).digest('hex')}`;
    return { id, phase: 'Succeeded' as const, startedAt: at, finishedAt: at, output, outputDigest };
  });
}

/**
 * A bench's cleanup once its controller is stopped: strips the finalizers left on the Runs of
 * `runsNamespace`, deletes `namespaces` and the controller's Lease (failures are logged, not thrown).
 */
export async function cleanupBenchKube(
  pipe: KubeClient,
  opts: { runsNamespace: string; namespaces: readonly string[]; lease: string; log: (m: string) => void },
): Promise<void> {
  const retries = { n: 0 };
  const runs = await listRuns(pipe, opts.runsNamespace).catch(() => [] as Run[]);
  const t0 = performance.now();
  const held = runs.filter((r) => (r.metadata.finalizers ?? []).includes(FINALIZER));
  if (held.length > 0) opts.log(`removing the finalizer of ${fmtCount(held.length)} Runs`);
  await dropFinalizers(pipe, opts.runsNamespace, held, retries);
  if (held.length > 0) opts.log(`finalizers removed in ${((performance.now() - t0) / 1000).toFixed(1)} s`);
  for (const ns of opts.namespaces) {
    await pipe
      .request({ method: 'DELETE', path: `/api/v1/namespaces/${ns}` })
      .catch((err: unknown) => opts.log(`deleting namespace ${ns}: ${(err as Error).message}`));
  }
  await pipe
    .request({
      method: 'DELETE',
      path: `/apis/coordination.k8s.io/v1/namespaces/aibom-vault-system/leases/${opts.lease}`,
    })
    .catch(() => undefined);
}

/** When AIBOMReady=True is first seen for a Run. */
export interface ReadyWatch {
  /** Name → Date.now() when first seen ready; only names in the set given (read at each event). */
  readonly seen: Map<string, number>;
  /** The watch ended before close(). */
  failed(): boolean;
  close(): Promise<void>;
}

/**
 * A watch of `namespace`'s Runs from now on, recording when each of `names` is first seen
 * AIBOMReady=True (`names` may grow while it runs).
 */
export async function watchReady(
  pipe: KubeClient,
  namespace: string,
  names: ReadonlySet<string>,
  log: (m: string) => void,
): Promise<ReadyWatch> {
  const path = resourcePath(RUN_TYPE, { namespace });
  const list = await pipe.request<{ metadata: { resourceVersion: string } }>({
    method: 'GET',
    path,
    query: { limit: 1 },
  });
  const seen = new Map<string, number>();
  const abort = new AbortController();
  let failed = false;
  const ended = pipe
    .stream(
      {
        path,
        query: { watch: true, resourceVersion: list.metadata.resourceVersion, timeoutSeconds: 3600 },
        signal: abort.signal,
      },
      (value) => {
        const ev = value as { type: string; object: Run };
        const name = ev.object?.metadata?.name;
        if (name !== undefined && names.has(name) && !seen.has(name) && aibomReady(ev.object)) {
          seen.set(name, Date.now());
        }
      },
    )
    .catch((err: unknown) => {
      if (!abort.signal.aborted) log(`AIBOMReady watch failed: ${(err as Error).message}`);
    })
    .finally(() => {
      if (!abort.signal.aborted) failed = true;
    });
  return {
    seen,
    failed: () => failed,
    close: async () => {
      abort.abort(new Error('done'));
      await ended;
    },
  };
}

/** `CONCURRENCY` loops calling `fn` until `ms` have passed. */
async function closedLoop(
  concurrency: number,
  ms: number,
  fn: (worker: number) => Promise<void>,
): Promise<{ count: number; ms: number; latencies: number[] }> {
  const latencies: number[] = [];
  const t0 = performance.now();
  const deadline = t0 + ms;
  await Promise.all(
    Array.from({ length: concurrency }, async (_, w) => {
      while (performance.now() < deadline) {
        const t = performance.now();
        await fn(w);
        latencies.push(performance.now() - t);
      }
    }),
  );
  return { count: latencies.length, ms: performance.now() - t0, latencies };
}

// ---------------------------------------------------------------------------------------------
// The benchmark

interface Prepared {
  readonly name: string;
  readonly uid: string;
  readonly steps: StepStatus[];
}

interface Flipped {
  readonly run: Prepared;
  /** Date.now() before the terminal apply was sent and after its response arrived. */
  readonly sent: number;
  readonly done: number;
}

interface CeilingRound {
  /** After which scenario it ran. */
  readonly after: string;
  readonly cases: Map<string, { rate: number; latencies: number[] }>;
}

const CEILING_KINDS = {
  read: 'read: GET Run',
  write: 'write: SSA status apply',
  create: 'create: POST Attestation',
} as const;

interface Outcome {
  readonly label: string;
  readonly runs: number;
  /** Controller API requests per Run from its creation until its steps were attested. */
  readonly preTerminal: number;
  /** First terminal write sent → last terminal write answered (ms). */
  readonly flipMs: number;
  /** First terminal write sent → last AIBOM recorded (ms). */
  readonly windowMs: number;
  readonly recorded: number[];
  readonly ready: number[];
  readonly counts: Map<string, number>;
  readonly failures: Map<string, number>;
  readonly reconciles: number;
  readonly pipelineMeanMs: number;
  readonly retries: number;
  /** The API ceiling measured right after this scenario (controller idle). */
  ceiling?: CeilingRound;
}

/** A kubeClient for the bench's own "pipeline" writes, which on a real cluster come from other machines. */
function benchClient(kc: KubeAccess, userAgent: string): KubeClient {
  return kubeClient(kc, { userAgent });
}

export const operatorBenchmark: Benchmark = {
  name: 'operator',
  title:
    'terminal Run → AIBOM recorded: p50/p99 at 10 Runs/s and for bursts, AIBOMs/s vs API ceiling, memory per cached Run',
  async run(ctx) {
    const stack = await ctx.stack();
    return new OperatorBench(ctx, stack).run();
  },
};

class OperatorBench {
  readonly #ctx: BenchContext;
  readonly #stack: StackInfo;
  readonly #ns = `bench-operator-${randomBytes(4).toString('hex')}`;
  readonly #ceilNs = `${this.#ns}-ceiling`;
  readonly #lease = `bench-operator-${randomBytes(3).toString('hex')}`;
  readonly #registry = new Registry();
  /** The "pipeline" (and the bench's own reads): admin identity, keep-alive. */
  readonly #pipe: KubeClient;
  /** The controller's identity and client as configured (manifests/rbac.yaml); uncounted. */
  readonly #ctrlRaw: KubeClient;
  /** What the controller is given: `#ctrlRaw` with request counting. */
  readonly #ctrl: ReturnType<typeof countingClient>;
  #ceiling: { name: string; fn: (w: number) => Promise<void> }[] | undefined;
  readonly #ceilingRounds: CeilingRound[] = [];
  #sample!: Run;
  #admin!: pg.Client;
  #controller: RunningController | undefined;
  readonly #created: string[] = [];
  #seq = 0;

  constructor(ctx: BenchContext, stack: StackInfo) {
    this.#ctx = ctx;
    this.#stack = stack;
    this.#pipe = benchClient(loadKube(stack.kube.kubeconfigs.admin), 'bench-operator-pipeline');
    const ctrlKc = loadKube(stack.kube.kubeconfigs['aibom-vault']);
    this.#ctrlRaw = kubeClient(ctrlKc);
    this.#ctrl = countingClient(this.#ctrlRaw);
  }

  async run(): Promise<SummaryRow[]> {
    const ctx = this.#ctx;
    const env = this.#stack.env;
    const dbUrl = await ctx.freshDatabase('operator');
    await migrate(dbUrl);
    this.#admin = await adminClient(ctx, dbUrl);
    const pool = controllerVaultPool(dbUrl, 'bench-operator-controller');
    const closePool = ctx.track(() => pool.end());
    const closeNamespaces = ctx.track(() => this.#cleanupKube());
    let closeController: (() => Promise<void>) | undefined;
    try {
      // The sample Run's first two steps (retrieve, then summarise with a model): 7 vault records per
      // Run (2 capability, 2 step, 1 policy, the run's provenance, the AIBOM).
      this.#sample = parseYaml(await readFile(`${repoRoot}/manifests/samples/run.yaml`, 'utf8')) as Run;
      this.#sample.spec.steps = this.#sample.spec.steps.slice(0, STEPS);
      for (const ns of [this.#ns, this.#ceilNs]) {
        await this.#pipe.request({
          method: 'POST',
          path: '/api/v1/namespaces',
          body: { metadata: { name: ns } },
        });
        this.#created.push(ns);
      }
      const signer = signerFromPem(await generateDevPki());
      const vault = await openVault(pool);
      const clock = await this.#clockOffset();
      ctx.log(
        `operator: namespace ${this.#ns}; PostgreSQL clock − node clock ${clock.offset.toFixed(2)} ms (round trip ${clock.rtt.toFixed(2)} ms)`,
      );

      this.#controller = startBenchController({
        client: this.#ctrl.client,
        vault,
        env,
        signer,
        registry: this.#registry,
        leaseName: this.#lease,
        watchNamespace: this.#ns,
      });
      const controller = this.#controller;
      closeController = ctx.track(() => controller.stop());
      await this.#waitLeading();

      // 1. The API ceiling is measured right after each scenario (below): the API server of a
      //    freshly started stack is still warming up at this point (about half its later rate).

      // 2. Floor (single Runs on an idle controller), then the steady rate (the goal's condition).
      const steadySeconds = scaled(20, ctx.scale, 5, 120);
      const steadyRuns = STEADY_RATE * steadySeconds;
      ctx.log(`operator: preparing ${FLOOR_RUNS} + ${steadyRuns} Runs for the floor and the steady rate`);
      const steadyPrepared = await this.#prepare('s', FLOOR_RUNS + steadyRuns);
      const floor: Outcome[] = [];
      for (const run of steadyPrepared.runs.slice(0, FLOOR_RUNS)) {
        floor.push(
          await this.#scenario('floor', [run], this.#flipAll([run], 1), steadyPrepared.requestsPerRun),
        );
      }
      ctx.log(`operator: steady ${STEADY_RATE} Runs/s for ${steadySeconds} s`);
      const steadyRunsPrepared = steadyPrepared.runs.slice(FLOOR_RUNS);
      const steady = await this.#scenario(
        'steady',
        steadyRunsPrepared,
        this.#flipAtRate(steadyRunsPrepared, STEADY_RATE),
        steadyPrepared.requestsPerRun,
      );
      steady.ceiling = await this.#ceilingRound('after steady');
      const sustained = await this.#sustained(steady, steadySeconds);

      // 3. Bursts: N Runs reaching their terminal phase at once.
      const sizes = [...new Set(BURSTS.map((n) => scaled(n, ctx.scale, 10)))];
      const bursts: Outcome[] = [];
      for (const n of sizes) {
        ctx.throwIfStopping();
        ctx.log(`operator: preparing ${fmtCount(n)} Runs for the burst`);
        const prepared = await this.#prepare(`b${n}-`, n);
        ctx.log(`operator: flipping ${fmtCount(n)} Runs to Succeeded at once`);
        const burst = await this.#scenario(
          `${fmtCount(n)} at once`,
          prepared.runs,
          this.#flipAll(prepared.runs, FLIP_CONCURRENCY),
          prepared.requestsPerRun,
        );
        burst.ceiling = await this.#ceilingRound(`after ${burst.label}`);
        bursts.push(burst);
      }

      // 4. Memory per cached Run (every Run made above is in the controller's cache).
      const memory = await this.#memory(controller);
      closeController = undefined; // stopped by #memory

      return [
        ...this.#report(floor, steady, bursts, memory, steadySeconds),
        this.#reportSustained(steady, sustained, steadySeconds),
      ];
    } finally {
      if (closeController !== undefined) await closeController();
      await closeNamespaces();
      await closePool();
    }
  }

  // -------------------------------------------------------------------------------------------
  // Setup and cleanup

  async #clockOffset(): Promise<{ offset: number; rtt: number }> {
    let best = { offset: Number.NaN, rtt: Number.POSITIVE_INFINITY };
    for (let i = 0; i < 7; i++) {
      // Date.now(), as the latencies use it (ms resolution); the round trip by the monotonic clock.
      const [t0, p0] = [Date.now(), performance.now()];
      const { rows } = await this.#admin.query<{ ms: number }>(
        'SELECT (extract(epoch FROM clock_timestamp()) * 1000)::float8 AS ms',
      );
      const [t1, rtt] = [Date.now(), performance.now() - p0];
      if (rtt < best.rtt) best = { offset: rows[0]!.ms - (t0 + t1) / 2, rtt };
    }
    return best;
  }

  #waitLeading(): Promise<void> {
    return waitLeading(this.#controller!, this.#registry);
  }

  /** Stopped controller first (LIFO): strip the finalizers it left, then delete what was created. */
  #cleanupKube(): Promise<void> {
    return cleanupBenchKube(this.#pipe, {
      runsNamespace: this.#ns,
      namespaces: this.#created.splice(0),
      lease: this.#lease,
      log: (m) => this.#ctx.log(`operator: ${m}`),
    });
  }

  // -------------------------------------------------------------------------------------------
  // Runs: prepare (create, steps Succeeded, controller idle), flip, wait for AIBOMs

  #applyPipeline(name: string, status: RunStatus): Promise<unknown> {
    return applyStatus(
      this.#pipe,
      RUN_TYPE,
      { namespace: this.#ns, name },
      status as Record<string, unknown>,
      {
        fieldManager: PIPELINE_FIELD_MANAGER,
        force: false,
      },
    );
  }

  /** Creates `n` Runs with every step Succeeded (phase Running) and waits until the controller is idle. */
  async #prepare(prefix: string, n: number): Promise<{ runs: Prepared[]; requestsPerRun: number }> {
    const retries = { n: 0 };
    const t0 = performance.now();
    const before = snapshot(this.#ctrl.counted.byCategory);
    const prepared = await mapLimit(
      Array.from({ length: n }, (_, i) => i),
      PREPARE_CONCURRENCY,
      async () => {
        const name = `r${prefix}${this.#seq++}`;
        const body = { ...this.#sample, metadata: { name, namespace: this.#ns } };
        const created = await retrying(
          () =>
            this.#pipe.request<Run>({
              method: 'POST',
              path: resourcePath(RUN_TYPE, { namespace: this.#ns }),
              body,
            }),
          retries,
        );
        const steps = succeededSteps(created);
        await retrying(() => this.#applyPipeline(name, { phase: 'Running', steps }), retries);
        return { name, uid: created.metadata.uid, steps };
      },
    );
    const uids = prepared.map((p) => p.uid);
    const expected = n * this.#sample.spec.steps.length;
    await this.#settle(`steps of ${n} Runs attested`, 60_000 + n * 200, async () => {
      const { rows } = await this.#admin.query<{ n: string }>(
        `SELECT count(*) AS n FROM attestations WHERE kind = 'step' AND run_id = ANY($1::uuid[])`,
        [uids],
      );
      return Number(rows[0]!.n) === expected;
    });
    const k = perKind(diff(this.#ctrl.counted.byCategory, before));
    this.#ctx.log(
      `operator: ${fmtCount(n)} Runs created, steps attested, controller idle in ${((performance.now() - t0) / 1000).toFixed(1)} s`,
    );
    return { runs: prepared, requestsPerRun: (k.read + k.write + k.create) / n };
  }

  /** Waits until `done()` holds and the controller's queue has been empty and idle for 1.5 s. */
  #settle(what: string, timeoutMs: number, done: () => Promise<boolean>): Promise<void> {
    return settleController(this.#ctx, this.#registry, what, timeoutMs, done);
  }

  async #flip(run: Prepared, retries: { n: number }): Promise<Flipped> {
    const sent = Date.now();
    await retrying(() => this.#applyPipeline(run.name, { phase: 'Succeeded', steps: run.steps }), retries);
    return { run, sent, done: Date.now() };
  }

  #flipAll(runs: readonly Prepared[], concurrency: number): (retries: { n: number }) => Promise<Flipped[]> {
    return (retries) => mapLimit(runs, concurrency, (r) => this.#flip(r, retries));
  }

  #flipAtRate(runs: readonly Prepared[], perSecond: number): (retries: { n: number }) => Promise<Flipped[]> {
    return async (retries) => {
      const t0 = performance.now();
      const flips: Promise<Flipped>[] = [];
      for (let i = 0; i < runs.length; i++) {
        const wait = t0 + (i * 1000) / perSecond - performance.now();
        if (wait > 0) await sleep(wait);
        flips.push(this.#flip(runs[i]!, retries));
      }
      return Promise.all(flips);
    };
  }

  /**
   * The offered rates of the sustained-rate search, each for `seconds` on Runs prepared for it, rising
   * until one's p99 terminal → AIBOM passes SUSTAINED_P99_MS (the steady 10 Runs/s is the first rung).
   */
  async #sustained(steady: Outcome, seconds: number): Promise<Array<{ rate: number; outcome: Outcome }>> {
    const rungs = [{ rate: STEADY_RATE, outcome: steady }];
    if (percentile(steady.recorded, 99) > SUSTAINED_P99_MS) return rungs;
    const ladder = this.#ctx.scale >= 0.5 ? SUSTAINED_LADDER : [SUSTAINED_GOAL_RATE];
    for (const rate of ladder) {
      this.#ctx.throwIfStopping();
      const n = rate * seconds;
      this.#ctx.log(`operator: preparing ${fmtCount(n)} Runs for ${rate} Runs/s`);
      const prepared = await this.#prepare(`t${rate}-`, n);
      this.#ctx.log(`operator: ${rate} Runs/s for ${seconds} s`);
      const outcome = await this.#scenario(
        `${rate} Runs/s`,
        prepared.runs,
        this.#flipAtRate(prepared.runs, rate),
        prepared.requestsPerRun,
      );
      rungs.push({ rate, outcome });
      if (percentile(outcome.recorded, 99) > SUSTAINED_P99_MS) break;
    }
    return rungs;
  }

  /** Flips `runs`, waits for every AIBOM (and AIBOMReady) and for the controller to go idle. */
  async #scenario(
    label: string,
    runs: readonly Prepared[],
    flip: (retries: { n: number }) => Promise<Flipped[]>,
    preTerminal: number,
  ): Promise<Outcome> {
    const reg = this.#registry;
    const before = snapshot(this.#ctrl.counted.byCategory);
    const failuresBefore = snapshot(this.#ctrl.counted.failures);
    const reconcilesBefore = await metric(reg, 'controller_runtime_reconcile_total');
    const pipeBefore = {
      sum: await metric(reg, 'aibom_vault_aibom_record_duration_seconds', '_sum'),
      count: await metric(reg, 'aibom_vault_aibom_record_duration_seconds', '_count'),
    };
    const watch = await watchReady(this.#pipe, this.#ns, new Set(runs.map((r) => r.name)), (m) =>
      this.#ctx.log(`operator: ${m}`),
    );
    const retries = { n: 0 };
    let flipped: Flipped[];
    try {
      const flipping = flip(retries);
      // Handled here so a failed apply ends the wait below instead of surfacing as unhandled.
      let flipError: Error | undefined;
      flipping.catch((err: unknown) => {
        flipError = err instanceof Error ? err : new Error(`terminal apply failed: ${String(err)}`);
      });
      const recordedAt = new Map<string, number>();
      const uids = runs.map((r) => r.uid);
      const deadline = Date.now() + 60_000 + runs.length * 300;
      for (;;) {
        this.#ctx.throwIfStopping();
        if (flipError !== undefined) throw flipError;
        const { rows } = await this.#admin.query<{ run_id: string; ms: number }>(
          `SELECT run_id::text, (extract(epoch FROM created_at) * 1000)::float8 AS ms
             FROM artifacts WHERE kind = 'aibom' AND run_id = ANY($1::uuid[])`,
          [uids],
        );
        for (const r of rows) recordedAt.set(r.run_id, r.ms);
        if (recordedAt.size === runs.length && (watch.seen.size === runs.length || watch.failed())) break;
        if (Date.now() > deadline) {
          throw new Error(`${label}: ${recordedAt.size}/${runs.length} AIBOMs recorded before the timeout`);
        }
        await sleep(runs.length === 1 ? 10 : 100);
      }
      flipped = await flipping;
      await this.#settle(`${label}: controller idle`, 120_000, () => Promise.resolve(true));
      const sent = Math.min(...flipped.map((f) => f.sent));
      const counts = diff(this.#ctrl.counted.byCategory, before);
      const pipeCount =
        (await metric(reg, 'aibom_vault_aibom_record_duration_seconds', '_count')) - pipeBefore.count;
      const pipeSum =
        (await metric(reg, 'aibom_vault_aibom_record_duration_seconds', '_sum')) - pipeBefore.sum;
      return {
        label,
        runs: runs.length,
        preTerminal,
        flipMs: Math.max(...flipped.map((f) => f.done)) - sent,
        windowMs: Math.max(...recordedAt.values()) - sent,
        recorded: flipped.map((f) => recordedAt.get(f.run.uid)! - f.done),
        ready: flipped.flatMap((f) => {
          const seen = watch.seen.get(f.run.name);
          return seen === undefined ? [] : [seen - f.done];
        }),
        counts,
        failures: diff(this.#ctrl.counted.failures, failuresBefore),
        reconciles: (await metric(reg, 'controller_runtime_reconcile_total')) - reconcilesBefore,
        pipelineMeanMs: pipeCount > 0 ? (pipeSum / pipeCount) * 1000 : Number.NaN,
        retries: retries.n,
      };
    } finally {
      await watch.close();
    }
  }

  // -------------------------------------------------------------------------------------------
  // API ceiling for the controller's request kinds

  /** Objects and request functions of the ceiling loops, made once. */
  async #ceilingCases(): Promise<{ name: string; fn: (w: number) => Promise<void> }[]> {
    const ns = this.#ceilNs;
    const targets = await mapLimit(
      Array.from({ length: WORKERS }, (_, i) => `ceiling-${i}`),
      WORKERS,
      (name) =>
        this.#pipe.request<Run>({
          method: 'POST',
          path: resourcePath(RUN_TYPE, { namespace: ns }),
          body: { ...this.#sample, metadata: { name, namespace: ns } },
        }),
    );
    let seq = 0;
    // Every apply changes the status (as the controller's do): an unchanged apply skips the etcd write.
    const status = (): Record<string, unknown> => {
      seq++;
      return {
        attestations: { count: seq },
        conditions: [
          {
            type: 'Attested',
            status: 'True',
            reason: 'StepsAttested',
            message: `${seq} finished step(s) attested; waiting for the run to finish`,
            lastTransitionTime: new Date().toISOString(),
            observedGeneration: 1,
          },
        ],
        observedGeneration: 1,
      };
    };
    const apply = (client: KubeClient) => async (w: number) => {
      await applyStatus(client, RUN_TYPE, { namespace: ns, name: targets[w]!.metadata.name }, status(), {
        fieldManager: FIELD_MANAGER,
      });
    };
    const client = this.#ctrlRaw;
    return [
      {
        name: 'read: GET Run',
        fn: async (w) => {
          await client.request({
            method: 'GET',
            path: resourcePath(RUN_TYPE, { namespace: ns, name: targets[w]!.metadata.name }),
          });
        },
      },
      { name: 'write: SSA status apply', fn: apply(client) },
      {
        name: 'create: POST Attestation',
        fn: async (w) => {
          const t = targets[w]!;
          const id = uuidv7();
          await client.request({
            method: 'POST',
            path: resourcePath(ATTESTATION_TYPE, { namespace: ns }),
            query: { fieldManager: FIELD_MANAGER },
            body: {
              apiVersion: 'vault.service.dev/v1',
              kind: 'Attestation',
              metadata: {
                name: id,
                namespace: ns,
                labels: { 'vault.service.dev/run': t.metadata.name, 'vault.service.dev/kind': 'step' },
                ownerReferences: [
                  {
                    apiVersion: 'vault.service.dev/v1',
                    kind: 'Run',
                    name: t.metadata.name,
                    uid: t.metadata.uid,
                    controller: true,
                    blockOwnerDeletion: false,
                  },
                ],
              },
              spec: {
                id,
                kind: 'step',
                predicateType: 'https://slsa.dev/provenance/v1',
                subjects: [`step:${t.metadata.uid}:retrieve`],
                digest: `sha256:${randomBytes(32).toString('hex')}`,
                runId: t.metadata.uid,
              },
            },
          });
        },
      },
    ];
  }

  /**
   * One round of closed loops (controller idle) over every kind. A round runs right after each
   * scenario, so each scenario is compared with the API
   * server's rate of the same minutes.
   */
  async #ceilingRound(after: string): Promise<CeilingRound> {
    this.#ceiling ??= await this.#ceilingCases();
    const cases = this.#ceiling;
    const roundMs = scaled(1000, this.#ctx.scale, 500, 3000);
    if (this.#ceilingRounds.length === 0) {
      for (const c of cases) await closedLoop(WORKERS, Math.min(300, roundMs), c.fn); // warm-up
    }
    const round: CeilingRound = { after, cases: new Map() };
    const offset = this.#ceilingRounds.length;
    for (let i = 0; i < cases.length; i++) {
      this.#ctx.throwIfStopping();
      const c = cases[(i + offset) % cases.length]!;
      const m = await closedLoop(WORKERS, roundMs, c.fn);
      round.cases.set(c.name, { rate: (m.count * 1000) / m.ms, latencies: m.latencies });
    }
    this.#ceilingRounds.push(round);
    const r = (name: string): string => fmtRate(round.cases.get(name)?.rate ?? Number.NaN);
    this.#ctx.log(
      `operator: API ceiling (${after}): read ${r('read: GET Run')}, apply ${r('write: SSA status apply')}, create ${r('create: POST Attestation')} req/s`,
    );
    return round;
  }

  // -------------------------------------------------------------------------------------------
  // Memory per cached Run

  async #memory(controller: RunningController): Promise<{
    runs: number;
    controllerDelta: number;
    informerDelta: number;
    jsonBytes: number;
  }> {
    v8.setFlagsFromString('--expose-gc');
    const gc = vm.runInNewContext('gc') as () => void;
    const heap = async (): Promise<number> => {
      const samples: number[] = [];
      for (let i = 0; i < 5; i++) {
        await sleep(100);
        gc();
        gc();
        samples.push(process.memoryUsage().heapUsed);
      }
      return median(samples);
    };
    await this.#settle('controller idle before the memory sample', 60_000, () => Promise.resolve(true));
    const withCache = await heap();
    await controller.stop();
    await sleep(500); // let sockets of the stopped watch and workers close
    const withoutCache = await heap();

    // The same informer code alone, over the same Runs.
    const inf = new Informer<Run>({
      name: 'bench-memory',
      listerWatcher: kubeListerWatcher<Run>(this.#ctrlRaw, resourcePath(RUN_TYPE, { namespace: this.#ns })),
      logger: pino({ level: 'silent' }),
      resyncSeconds: 0,
    });
    const before = await heap();
    inf.start();
    let after: number;
    let runs: Run[];
    try {
      await inf.waitForSync();
      after = await heap();
      runs = inf.list();
    } finally {
      await inf.stop();
    }
    const jsonBytes = runs.reduce((s, r) => s + JSON.stringify(r).length, 0);
    return {
      runs: runs.length,
      controllerDelta: withCache - withoutCache,
      informerDelta: after - before,
      jsonBytes,
    };
  }

  // -------------------------------------------------------------------------------------------
  // Report

  /**
   * The sustained-rate table and its summary row: the highest rate held (p99 within budget, every
   * lower rung too) ÷ the goal's 25 Runs/s; 0 when not even the steady 10 Runs/s held.
   */
  #reportSustained(
    steady: Outcome,
    rungs: ReadonlyArray<{ rate: number; outcome: Outcome }>,
    seconds: number,
  ): SummaryRow {
    const held = (o: Outcome): boolean => percentile(o.recorded, 99) <= SUSTAINED_P99_MS;
    let best = 0;
    for (const { rate, outcome } of rungs) {
      if (!held(outcome)) break;
      best = rate;
    }
    printTable(
      `operator — sustained rate: Runs reaching their terminal phase at an offered rate for ${seconds} s each, rising until p99 terminal → AIBOM exceeds ${SUSTAINED_P99_MS} ms (goal: held at ≥ ${SUSTAINED_GOAL_RATE} Runs/s)`,
      ['offered', 'Runs', 'flips took', 'AIBOMs/s', 'p50', 'p99', 'max', 'AIBOMReady p99', 'p99 held'],
      rungs.map(({ rate, outcome: o }) => [
        `${rate} Runs/s${o === steady ? ' (the steady case)' : ''}`,
        fmtCount(o.runs),
        `${(o.flipMs / 1000).toFixed(1)} s`,
        fmtRate((o.runs * 1000) / o.windowMs),
        fmtMs(percentile(o.recorded, 50)),
        fmtMs(percentile(o.recorded, 99)),
        fmtMs(Math.max(...o.recorded)),
        fmtMs(percentile(o.ready, 99)),
        held(o) ? 'yes' : 'no',
      ]),
    );
    return {
      benchmark: 'operator',
      case: `sustained Runs/s with p99 terminal → AIBOM ≤ ${SUSTAINED_P99_MS} ms`,
      ratioOf: `highest rate held (${best} Runs/s) ÷ ${SUSTAINED_GOAL_RATE} Runs/s`,
      ratio: best / SUSTAINED_GOAL_RATE,
      goal: SUSTAINED_GOAL,
    };
  }

  #report(
    floor: Outcome[],
    steady: Outcome,
    bursts: Outcome[],
    memory: { runs: number; controllerDelta: number; informerDelta: number; jsonBytes: number },
    steadySeconds: number,
  ): SummaryRow[] {
    /**
     * Runs/s the API server could serve for this scenario's per-Run request mix at the controller's
     * concurrency, from the ceiling round measured right after it.
     */
    const ceilingRuns = (
      o: Outcome,
    ): { perRun: Record<'read' | 'write' | 'create', number>; runsPerS: number } => {
      const rate = (kind: keyof typeof CEILING_KINDS): number =>
        o.ceiling?.cases.get(CEILING_KINDS[kind])?.rate ?? Number.NaN;
      const k = perKind(o.counts);
      const perRun = { read: k.read / o.runs, write: k.write / o.runs, create: k.create / o.runs };
      const secondsPerRun =
        perRun.read / rate('read') + perRun.write / rate('write') + perRun.create / rate('create');
      return { perRun, runsPerS: 1 / secondsPerRun };
    };
    const reqPerRun = (o: Outcome): number => {
      const k = perKind(o.counts);
      return (k.read + k.write + k.create) / o.runs;
    };

    const floorLat = floor.flatMap((o) => o.recorded);
    const floorReady = floor.flatMap((o) => o.ready);
    const floorP50 = percentile(floorLat, 50);
    const p50 = percentile(steady.recorded, 50);
    const p99 = percentile(steady.recorded, 99);
    printTable(
      `operator — latency from terminal phase (SSA response) to AIBOM recorded (artifacts.created_at), ${WORKERS} workers, sample Run (first ${STEPS} steps)`,
      [
        'scenario',
        'Runs',
        'flips took',
        'p50',
        'p99',
        'max',
        'AIBOMReady p50',
        'AIBOMReady p99',
        'p50 ÷ floor',
        'goal',
        'verdict',
      ],
      [
        [
          `floor: one Run at a time, idle controller`,
          fmtCount(floorLat.length),
          '-',
          fmtMs(floorP50),
          fmtMs(percentile(floorLat, 99)),
          fmtMs(Math.max(...floorLat)),
          fmtMs(percentile(floorReady, 50)),
          fmtMs(percentile(floorReady, 99)),
          '1.00×',
          '',
          '',
        ],
        [
          `steady ${STEADY_RATE} Runs/s for ${steadySeconds} s`,
          fmtCount(steady.runs),
          `${(steady.flipMs / 1000).toFixed(1)} s`,
          fmtMs(p50),
          fmtMs(p99),
          fmtMs(Math.max(...steady.recorded)),
          fmtMs(percentile(steady.ready, 50)),
          fmtMs(percentile(steady.ready, 99)),
          fmtRatio(p50 / floorP50),
          `p50 ≤ ${P50_BUDGET_MS} ms, p99 ≤ ${P99_BUDGET_MS / 1000} s`,
          p50 <= P50_BUDGET_MS && p99 <= P99_BUDGET_MS ? 'PASS' : 'BELOW',
        ],
        ...bursts.map((b) => {
          const bp50 = percentile(b.recorded, 50);
          const bp99 = percentile(b.recorded, 99);
          return [
            `${b.label}`,
            fmtCount(b.runs),
            fmtMs(b.flipMs),
            fmtMs(bp50),
            fmtMs(bp99),
            fmtMs(Math.max(...b.recorded)),
            fmtMs(percentile(b.ready, 50)),
            fmtMs(percentile(b.ready, 99)),
            fmtRatio(bp50 / floorP50),
            `(info) p99 ≤ ${P99_BUDGET_MS / 1000} s`,
            bp99 <= P99_BUDGET_MS ? 'PASS' : 'BELOW',
          ];
        }),
      ],
    );

    const caseNames = Object.values(CEILING_KINDS);
    printTable(
      `operator — API server rate per request kind: ${WORKERS} closed-loop clients (the controller's workers), controller identity, ` +
        `its kubeClient (kept-alive connections, ADR 0017); one round after each scenario, controller idle`,
      ['request', 'rounds', 'req/s (median)', 'min–max', 'p50', 'p99'],
      caseNames.map((name) => {
        const runs = this.#ceilingRounds.flatMap((r) => {
          const c = r.cases.get(name);
          return c === undefined ? [] : [c];
        });
        const rates = runs.map((c) => c.rate);
        const lat = runs.flatMap((c) => c.latencies);
        return [
          name,
          String(runs.length),
          fmtRate(median(rates)),
          `${fmtRate(Math.min(...rates))}–${fmtRate(Math.max(...rates))}`,
          fmtMs(percentile(lat, 50)),
          fmtMs(percentile(lat, 99)),
        ];
      }),
    );

    const all = [steady, ...bursts];
    printTable(
      `operator — throughput: AIBOMs/s against the API ceiling for the controller's own request mix (requests per Run counted from the terminal write until the controller is idle)`,
      [
        'scenario',
        'Runs',
        'first write → last AIBOM',
        'AIBOMs/s',
        'ctrl req/Run',
        'read/write/create per Run',
        'req/Run before terminal',
        'reconciles/Run',
        'pipeline mean',
        'ceiling Runs/s',
        'AIBOMs/s ÷ ceiling',
      ],
      all.map((o) => {
        const c = ceilingRuns(o);
        const aibomsPerS = (o.runs * 1000) / o.windowMs;
        return [
          o.label,
          fmtCount(o.runs),
          `${(o.windowMs / 1000).toFixed(2)} s`,
          fmtRate(aibomsPerS),
          reqPerRun(o).toFixed(1),
          `${c.perRun.read.toFixed(1)} / ${c.perRun.write.toFixed(1)} / ${c.perRun.create.toFixed(1)}`,
          o.preTerminal.toFixed(1),
          (o.reconciles / o.runs).toFixed(2),
          fmtMs(o.pipelineMeanMs),
          fmtRate(c.runsPerS),
          o.label.startsWith('steady')
            ? `${fmtRatio(STEADY_RATE / c.runsPerS)} (offered ${STEADY_RATE}/s)`
            : fmtRatio(aibomsPerS / c.runsPerS),
        ];
      }),
    );
    const largest = bursts.at(-1)!;
    const breakdown = [...largest.counts].filter(([k]) => !k.includes('leases')).sort((a, b) => b[1] - a[1]);
    printTable(
      `operator — the controller's API requests per Run after the terminal write (${largest.label}); failed ones by HTTP code`,
      ['request', 'per Run', 'failed per Run'],
      breakdown.map(([k, n]) => {
        const failed = [...largest.failures]
          .filter(([f]) => f.startsWith(`${k} `))
          .map(([f, m]) => `${(m / largest.runs).toFixed(2)} × ${f.slice(k.length + 1)}`)
          .join(', ');
        return [k, (n / largest.runs).toFixed(2), failed];
      }),
    );

    const jsonPerRun = memory.jsonBytes / memory.runs;
    const ctrlPerRun = memory.controllerDelta / memory.runs;
    const infPerRun = memory.informerDelta / memory.runs;
    const memRatio = ctrlPerRun / jsonPerRun;
    const kib = (b: number): string => `${(b / 1024).toFixed(1)} KiB`;
    printTable(
      `operator — memory per cached Run: V8 heap after forced GC (median of 5 samples), ${fmtCount(memory.runs)} Runs cached, vs JSON.stringify size of the cached objects`,
      ['measure', 'Runs', 'heap Δ', 'per Run', 'JSON per Run', 'ratio', 'goal', 'verdict'],
      [
        [
          'controller: heap idle with cache − heap after stop()',
          fmtCount(memory.runs),
          `${(memory.controllerDelta / 2 ** 20).toFixed(1)} MiB`,
          kib(ctrlPerRun),
          kib(jsonPerRun),
          fmtRatio(memRatio),
          goalText(MEMORY_GOAL),
          verdict(memRatio, MEMORY_GOAL),
        ],
        [
          'informer alone (same code): heap after sync − before',
          fmtCount(memory.runs),
          `${(memory.informerDelta / 2 ** 20).toFixed(1)} MiB`,
          kib(infPerRun),
          kib(jsonPerRun),
          fmtRatio(infPerRun / jsonPerRun),
          '(info)',
          '',
        ],
      ],
    );
    const retries = all.reduce((s, o) => s + o.retries, 0);
    if (retries > 0) this.#ctx.log(`operator: ${retries} terminal writes retried after 429/5xx`);

    return [
      {
        benchmark: 'operator',
        case: `${STEADY_RATE} Runs/s: p50 terminal → AIBOM`,
        ratioOf: `p50 ÷ ${P50_BUDGET_MS} ms budget (floor ${fmtMs(floorP50)})`,
        ratio: p50 / P50_BUDGET_MS,
        goal: LATENCY_GOAL,
      },
      {
        benchmark: 'operator',
        case: `${STEADY_RATE} Runs/s: p99 terminal → AIBOM`,
        ratioOf: `p99 ÷ ${P99_BUDGET_MS / 1000} s budget`,
        ratio: p99 / P99_BUDGET_MS,
        goal: LATENCY_GOAL,
      },
      {
        benchmark: 'operator',
        case: 'controller memory per cached Run',
        ratioOf: 'heap bytes ÷ JSON bytes per Run',
        ratio: memRatio,
        goal: MEMORY_GOAL,
      },
    ];
  }
}
