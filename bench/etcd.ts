/**
 * etcd: what a burst of Runs leaves in etcd, per ATTESTATION_RESOURCES mode, side by side (issue
 * 29 item 2). For each mode (perRecord: today's default, perRun, none), in a namespace and a fresh
 * database of its own, the controller (`startController`, in-process, 4 workers) against the
 * stack's real kube-apiserver + etcd, PostgreSQL and MinIO:
 *
 * - N Runs (1,000 × BENCH_SCALE, at least 10) of the sample's first two steps are created with
 *   every step Succeeded and the controller is left to attest them and go idle; then all N are
 *   applied as Succeeded at once (up to 100 writes in flight). AIBOMs/s = N ÷ the time from the
 *   first terminal apply to the moment a LIST (every 100 ms) first shows every Run with
 *   AIBOMReady=True (written after the Attestation resources of the mode, so their cost is in it).
 * - etcd bytes per Run: the keys and values etcd itself holds for the namespace, read from etcd's
 *   own API (its gRPC gateway, `POST /v3/kv/range` over `/registry/vault.service.dev/runs/<ns>/`,
 *   `/registry/vault.service.dev/attestations/<ns>/` and `/registry/events/<ns>/`): the stored
 *   bytes of the live objects (custom resources are stored as JSON, Events as protobuf), not the
 *   database file, which also holds history until the API server's compaction and a defrag.
 * - Then the controller restarts with ATTESTATION_RESOURCE_RETENTION=1s and the same mode; once every
 *   Run shows `status.attestations.resources: pruned`, the same bytes again ("after retention").
 *   Events stay until the API server's --event-ttl (1 h by default) and are shown apart.
 *
 * Ratios: AIBOMs/s of each mode ÷ perRecord's (measured in the same run; informational, goal ≥ 1),
 * and etcd objects per Run after retention, Events aside (goal: ≤ 1, the Run itself).
 */
import { createHash, randomBytes } from 'node:crypto';
import { readFile } from 'node:fs/promises';
import { Registry } from 'prom-client';
import { parse as parseYaml } from 'yaml';
import { PIPELINE_FIELD_MANAGER, topoOrder } from '../hack/sample-pipeline.ts';
import { repoRoot, type StackInfo } from '../hack/stack/stack.ts';
import { canonicalJson } from '../src/attest/index.ts';
import type { RunningController } from '../src/controller/manager.ts';
import { RUN_TYPE } from '../src/controller/run/kube-api.ts';
import type { AttestationResourceMode, ResourcePolicy } from '../src/controller/run/resources.ts';
import { ConditionTypes, FINALIZER } from '../src/crd/reasons.ts';
import type { Run, RunStatus, StepStatus } from '../src/crd/run.ts';
import { applyStatus, kubeClient, resourcePath, type KubeClient } from '../src/kube/index.ts';
import { generateDevPki } from '../hack/dev-pki.ts';
import { signerFromPem } from '../src/signing/index.ts';
import { migrate, openVault, type Vault } from '../src/vault/index.ts';
import {
  fmtCount,
  fmtRate,
  fmtRatio,
  goalText,
  printTable,
  scaled,
  verdict,
  type BenchContext,
  type Benchmark,
  type Goal,
  type SummaryRow,
} from './common.ts';
import { dropFinalizers, mapLimit, retrying } from './operator.ts';
import { controllerVaultPool, loadKube, startBenchController, waitLeading } from './controller-kit.ts';

const MODES: readonly AttestationResourceMode[] = ['perRecord', 'perRun', 'none'];
const STEPS = 2;
const CONCURRENCY = 16;
const FLIP_CONCURRENCY = 100;
const RATE_GOAL: Goal = { op: '>=', value: 1 };
const OBJECTS_GOAL: Goal = { op: '<=', value: 1 };

const sleep = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));

/** Live keys and stored bytes (key + value) under one prefix, read from etcd itself. */
interface Stored {
  readonly keys: number;
  readonly bytes: number;
}

/** Every key under `prefix`, from etcd's gRPC gateway (JSON, base64 keys and values). */
export async function etcdRange(etcd: string, prefix: string): Promise<Stored> {
  const key = Buffer.from(prefix);
  const end = Buffer.from(prefix);
  end[end.length - 1]! += 1;
  const res = await fetch(`${etcd}/v3/kv/range`, {
    method: 'POST',
    body: JSON.stringify({ key: key.toString('base64'), range_end: end.toString('base64') }),
  });
  if (!res.ok) throw new Error(`etcd range ${prefix}: HTTP ${res.status} ${await res.text()}`);
  const body = (await res.json()) as { kvs?: { key: string; value?: string }[] };
  let bytes = 0;
  for (const kv of body.kvs ?? []) {
    bytes += Buffer.from(kv.key, 'base64').length + Buffer.from(kv.value ?? '', 'base64').length;
  }
  return { keys: body.kvs?.length ?? 0, bytes };
}

interface Footprint {
  readonly runs: Stored;
  readonly attestations: Stored;
  readonly events: Stored;
}

async function footprint(etcd: string, ns: string): Promise<Footprint> {
  const [runs, attestations, events] = await Promise.all([
    etcdRange(etcd, `/registry/vault.service.dev/runs/${ns}/`),
    etcdRange(etcd, `/registry/vault.service.dev/attestations/${ns}/`),
    etcdRange(etcd, `/registry/events/${ns}/`),
  ]);
  return { runs, attestations, events };
}

interface ModeResult {
  readonly mode: AttestationResourceMode;
  readonly runs: number;
  readonly records: number;
  readonly seconds: number;
  readonly burst: Footprint;
  readonly retained: Footprint;
}

export const etcdBenchmark: Benchmark = {
  name: 'etcd',
  title:
    'etcd bytes per Run and AIBOMs/s of a Run burst, per attestationResources mode, before and after retention',
  async run(ctx) {
    const stack = await ctx.stack();
    const etcd = stack.kube.etcd;
    if (etcd === undefined)
      throw new Error('the stack does not say where its etcd listens (stack.kube.etcd)');
    const n = scaled(1000, ctx.scale, 10);
    const results: ModeResult[] = [];
    for (const mode of MODES) {
      ctx.throwIfStopping();
      results.push(await new ModeBench(ctx, stack, etcd, mode, n).run());
    }
    return report(results);
  },
};

class ModeBench {
  readonly #ctx: BenchContext;
  readonly #stack: StackInfo;
  readonly #etcd: string;
  readonly #mode: AttestationResourceMode;
  readonly #n: number;
  readonly #ns: string;
  readonly #lease = `bench-etcd-${randomBytes(3).toString('hex')}`;
  readonly #pipe: KubeClient;
  #registry = new Registry();
  #controller: RunningController | undefined;

  constructor(ctx: BenchContext, stack: StackInfo, etcd: string, mode: AttestationResourceMode, n: number) {
    this.#ctx = ctx;
    this.#stack = stack;
    this.#etcd = etcd;
    this.#mode = mode;
    this.#n = n;
    this.#ns = `bench-etcd-${mode.toLowerCase()}-${randomBytes(3).toString('hex')}`;
    this.#pipe = kubeClient(loadKube(stack.kube.kubeconfigs.admin), { userAgent: 'bench-etcd-pipeline' });
  }

  async run(): Promise<ModeResult> {
    const ctx = this.#ctx;
    const dbUrl = await ctx.freshDatabase('etcd');
    await migrate(dbUrl);
    const pool = controllerVaultPool(dbUrl, 'bench-etcd-controller');
    const closePool = ctx.track(() => pool.end());
    const closeKube = ctx.track(() => this.#cleanup());
    try {
      await this.#pipe.request({
        method: 'POST',
        path: '/api/v1/namespaces',
        body: { metadata: { name: this.#ns } },
      });
      const vault = await openVault(pool);
      const signer = signerFromPem(await generateDevPki());
      await this.#start(vault, signer, { mode: this.#mode });
      const sample = parseYaml(await readFile(`${repoRoot}/manifests/samples/run.yaml`, 'utf8')) as Run;
      sample.spec.steps = sample.spec.steps.slice(0, STEPS);
      ctx.log(`etcd: ${this.#mode}: preparing ${fmtCount(this.#n)} Runs in ${this.#ns}`);
      const steps = await this.#prepare(sample);
      const names = [...steps.keys()];
      ctx.log(`etcd: ${this.#mode}: ${fmtCount(this.#n)} Runs Succeeded at once`);
      const t0 = performance.now();
      const retries = { n: 0 };
      await mapLimit(names, FLIP_CONCURRENCY, (name) =>
        // The pipeline's whole set of fields (server-side apply: a field left out is removed).
        retrying(() => this.#apply(name, { phase: 'Succeeded', steps: steps.get(name)! }), retries),
      );
      await this.#until((runs) => runs.every(aibomReady));
      const seconds = (performance.now() - t0) / 1000;
      const burst = await footprint(this.#etcd, this.#ns);
      const { rows } = await pool.query<{ n: string }>('SELECT count(*)::text AS n FROM attestations');
      const records = Number(rows[0]!.n);

      ctx.log(`etcd: ${this.#mode}: restarting the controller with a retention of 1 s`);
      await this.#controller?.stop();
      await this.#start(vault, signer, { mode: this.#mode, retentionMs: 1000 });
      await this.#until((runs) => runs.every((r) => r.status?.attestations?.resources === 'pruned'));
      const retained = await footprint(this.#etcd, this.#ns);
      return { mode: this.#mode, runs: this.#n, records, seconds, burst, retained };
    } finally {
      await this.#controller?.stop();
      await closeKube();
      await closePool();
    }
  }

  async #start(
    vault: Vault,
    signer: ReturnType<typeof signerFromPem>,
    policy: ResourcePolicy,
  ): Promise<void> {
    this.#registry = new Registry();
    this.#controller = startBenchController({
      client: kubeClient(loadKube(this.#stack.kube.kubeconfigs['aibom-vault'])),
      vault,
      env: this.#stack.env,
      signer,
      registry: this.#registry,
      leaseName: this.#lease,
      watchNamespace: this.#ns,
      attestationResources: policy,
    });
    await waitLeading(this.#controller, this.#registry);
  }

  #apply(name: string, status: RunStatus): Promise<unknown> {
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

  /** N Runs with every step Succeeded (phase Running), attested: their steps, by name. */
  async #prepare(sample: Run): Promise<Map<string, StepStatus[]>> {
    const retries = { n: 0 };
    const names = Array.from({ length: this.#n }, (_, i) => `r${i}`);
    const out = new Map<string, StepStatus[]>();
    await mapLimit(names, CONCURRENCY, async (name) => {
      const created = await retrying(
        () =>
          this.#pipe.request<Run>({
            method: 'POST',
            path: resourcePath(RUN_TYPE, { namespace: this.#ns }),
            body: { ...sample, metadata: { name, namespace: this.#ns } },
          }),
        retries,
      );
      const steps = succeededSteps(created);
      out.set(name, steps);
      await retrying(() => this.#apply(name, { phase: 'Running', steps }), retries);
    });
    await this.#until((runs) =>
      runs.every(
        (r) => r.status?.conditions?.find((c) => c.type === ConditionTypes.Attested)?.status === 'True',
      ),
    );
    return new Map(names.map((n) => [n, out.get(n)!]));
  }

  /** Polls the namespace's Runs (every 100 ms, at most 30 min) until `done` holds for the N of them. */
  async #until(done: (runs: Run[]) => boolean): Promise<void> {
    const deadline = Date.now() + 30 * 60_000;
    for (;;) {
      this.#ctx.throwIfStopping();
      const { items } = await this.#pipe.request<{ items: Run[] }>({
        method: 'GET',
        path: resourcePath(RUN_TYPE, { namespace: this.#ns }),
      });
      if (items.length === this.#n && done(items)) return;
      if (Date.now() > deadline) throw new Error(`etcd: ${this.#mode}: the Runs did not get there in 30 min`);
      await sleep(100);
    }
  }

  /** The stopped controller's finalizers off, then the namespace and the Lease deleted. */
  async #cleanup(): Promise<void> {
    const list = await this.#pipe
      .request<{ items: Run[] }>({ method: 'GET', path: resourcePath(RUN_TYPE, { namespace: this.#ns }) })
      .catch(() => ({ items: [] as Run[] }));
    const retries = { n: 0 };
    await dropFinalizers(
      this.#pipe,
      this.#ns,
      list.items.filter((r) => (r.metadata.finalizers ?? []).includes(FINALIZER)),
      retries,
    );
    await this.#pipe
      .request({ method: 'DELETE', path: `/api/v1/namespaces/${this.#ns}` })
      .catch((err: unknown) =>
        this.#ctx.log(`etcd: deleting namespace ${this.#ns}: ${(err as Error).message}`),
      );
    await this.#pipe
      .request({
        method: 'DELETE',
        path: `/apis/coordination.k8s.io/v1/namespaces/aibom-vault-system/leases/${this.#lease}`,
      })
      .catch(() => undefined);
  }
}

const aibomReady = (r: Run): boolean =>
  r.status?.conditions?.find((c) => c.type === ConditionTypes.AIBOMReady)?.status === 'True';

function succeededSteps(run: Run): StepStatus[] {
  const at = new Date().toISOString();
  return topoOrder(run).map((id) => {
    const output = { result: `output of ${id}`, at };
    const outputDigest = `sha256:${createHash('sha256').update(canonicalJson(output)).digest('hex')}`;
    return { id, phase: 'Succeeded' as const, startedAt: at, finishedAt: at, output, outputDigest };
  });
}

const perRun = (bytes: number, runs: number): string => fmtCount(Math.round(bytes / runs));

function report(results: readonly ModeResult[]): SummaryRow[] {
  const rows: string[][] = [];
  for (const r of results) {
    for (const [when, f] of [
      ['burst', r.burst],
      ['after retention', r.retained],
    ] as const) {
      const total = f.runs.bytes + f.attestations.bytes + f.events.bytes;
      rows.push([
        r.mode,
        when,
        fmtCount(r.runs),
        when === 'burst' ? fmtRate(r.runs / r.seconds) : '',
        (f.attestations.keys / r.runs).toFixed(2),
        perRun(f.runs.bytes, r.runs),
        perRun(f.attestations.bytes, r.runs),
        perRun(f.events.bytes, r.runs),
        perRun(total, r.runs),
        perRun(total - f.events.bytes, r.runs),
      ]);
    }
  }
  printTable(
    `etcd: ${fmtCount(results[0]?.runs ?? 0)} Runs at once per mode (${fmtCount(Math.round((results[0]?.records ?? 0) / (results[0]?.runs ?? 1)))} records a Run); stored bytes per Run read from etcd`,
    [
      'mode',
      'when',
      'Runs',
      'AIBOMs/s',
      'Attestations/Run',
      'Run B',
      'Attestations B',
      'Events B',
      'total B/Run',
      'without Events B/Run',
    ],
    rows,
  );
  const base = results.find((r) => r.mode === 'perRecord');
  const summary: SummaryRow[] = [];
  const verdicts: string[][] = [];
  for (const r of results) {
    const rate = r.runs / r.seconds / (base !== undefined ? base.runs / base.seconds : Number.NaN);
    const objects = (r.retained.runs.keys + r.retained.attestations.keys) / r.runs;
    summary.push(
      {
        benchmark: 'etcd',
        case: `${r.mode} burst`,
        ratioOf: 'AIBOMs/s ÷ perRecord AIBOMs/s',
        ratio: rate,
        goal: RATE_GOAL,
      },
      {
        benchmark: 'etcd',
        case: `${r.mode} after retention`,
        ratioOf: 'etcd objects per Run (Events aside)',
        ratio: objects,
        goal: OBJECTS_GOAL,
      },
    );
    verdicts.push(
      [
        `${r.mode} burst`,
        'AIBOMs/s ÷ perRecord',
        fmtRatio(rate),
        goalText(RATE_GOAL),
        verdict(rate, RATE_GOAL),
      ],
      [
        `${r.mode} after retention`,
        'objects per Run, Events aside',
        fmtRatio(objects),
        goalText(OBJECTS_GOAL),
        verdict(objects, OBJECTS_GOAL),
      ],
    );
  }
  printTable('etcd: ratios', ['case', 'ratio of', 'ratio', 'goal', 'verdict'], verdicts);
  return summary;
}
