/**
 * memory: the controller's memory with a cluster of Runs in its cache (issue 29: ≤ 300 MB RSS at
 * 10,000 Runs). 10,000 × BENCH_SCALE Runs of the sample spec in a fresh namespace, each created as
 * `kubectl apply` leaves it (with the last-applied annotation) and carrying a converged status
 * (pipeline steps, the controller's conditions, attestations and artifacts), so managedFields has
 * two managers. Then, in a fresh Node process per case, the controller's module graph is loaded
 * (src/controller/manager.ts) and its Run informer lists the namespace; once synced and after a
 * full GC the child reports its RSS (and the peak) and heap. Every child runs with the controller's
 * V8 flags (src/bin/node-flags.ts) but one. Cases: the controller's cache (slimForCache), the same
 * without the flags (what capping the young generation saves), the cache keeping whole objects
 * (what stripping saves), and the process with no Runs (the floor). The goal row divides the
 * controller's RSS by 300 MB.
 */
import { execFile } from 'node:child_process';
import { readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { parse as parseYaml } from 'yaml';
import { repoRoot } from '../hack/stack/stack.ts';
import { CONTROLLER_NODE_FLAGS, PROCESS_ENV } from '../src/bin/node-flags.ts';
import type { Run } from '../src/crd/run.ts';
import { RUN_TYPE } from '../src/controller/run/kube-api.ts';
import { applyStatus, kubeClient, LAST_APPLIED_ANNOTATION, resourcePath } from '../src/kube/index.ts';
import { printTable, scaled, type Benchmark, type BenchContext, type SummaryRow } from './common.ts';
import { loadKube } from './controller-kit.ts';

const IN_FLIGHT = 16;
const GOAL_MB = 300;

/** What `memory-child.ts` prints. */
interface ChildReport {
  readonly runs: number;
  readonly rssMB: number;
  readonly heapUsedMB: number;
  readonly heapTotalMB: number;
  readonly maxRssMB: number;
  readonly syncMs: number;
}

/** A converged Run's status as the pipeline and the controller leave it (shape of the real one). */
function convergedStatus(i: number, steps: readonly { id: string }[]): Record<string, unknown> {
  const digest = (c: string): string => `sha256:${(c + String(i)).repeat(64).slice(0, 64)}`;
  const id = (n: number): string =>
    `0190a3b2-${String(n).padStart(4, '0')}-7000-8000-${String(i).padStart(12, '0')}`;
  const at = '2026-11-24T00:00:01Z';
  const condition = (type: string, reason: string, message: string) => ({
    type,
    status: 'True',
    reason,
    message,
    lastTransitionTime: at,
    observedGeneration: 1,
  });
  return {
    phase: 'Succeeded',
    observedGeneration: 1,
    steps: steps.map((s) => ({
      id: s.id,
      phase: 'Succeeded',
      startedAt: '2026-11-24T00:00:00Z',
      finishedAt: at,
      output: { result: `output of ${s.id} for run ${i}` },
    })),
    attestations: { count: 7, runAttestationId: id(1), aibomAttestationId: id(2) },
    artifacts: {
      aibom: { digest: digest('a'), location: `s3://aibom/runs/${i}/aibom.json`, attestationId: id(2) },
      cyclonedx: { digest: digest('c'), location: `s3://aibom/runs/${i}/aibom.cdx.json` },
      spdx: { digest: digest('d'), location: `s3://aibom/runs/${i}/aibom.spdx.json` },
    },
    conditions: [
      condition('Attested', 'StepsAttested', `${steps.length} steps attested`),
      condition('AIBOMReady', 'AIBOMRecorded', `AIBOM ${digest('a')} stored`),
      condition('Ready', 'AIBOMRecorded', 'the run is recorded'),
    ],
  };
}

async function child(
  ctx: BenchContext,
  kubeconfig: string,
  namespace: string,
  mode: 'controller' | 'whole',
  flags: readonly string[] = CONTROLLER_NODE_FLAGS,
): Promise<ChildReport> {
  ctx.throwIfStopping();
  const { stdout } = await promisify(execFile)(
    process.execPath,
    [...flags, '--expose-gc', join(repoRoot, 'bench/memory-child.ts'), kubeconfig, namespace, mode],
    { maxBuffer: 1 << 20, env: { ...process.env, ...PROCESS_ENV } },
  );
  return JSON.parse(stdout.trim().split('\n').at(-1) ?? '') as ChildReport;
}

export const controllerMemoryBenchmark: Benchmark = {
  name: 'memory',
  title: 'controller RSS with 10,000 Runs in its cache (slimmed objects vs whole, vs none)',
  async run(ctx: BenchContext): Promise<SummaryRow[]> {
    const stack = await ctx.stack();
    const kubeconfig = stack.kube.kubeconfigs.admin;
    const client = kubeClient(loadKube(kubeconfig), { userAgent: 'bench-memory' });
    const ns = `bench-memory-${Date.now().toString(36)}`;
    const empty = `${ns}-empty`;
    for (const name of [ns, empty])
      await client.request({
        method: 'POST',
        path: '/api/v1/namespaces',
        body: { apiVersion: 'v1', kind: 'Namespace', metadata: { name } },
      });
    const sample = parseYaml(await readFile(`${repoRoot}/manifests/samples/run.yaml`, 'utf8')) as Run;
    const n = scaled(10_000, ctx.scale, 100);
    ctx.log(`memory: creating ${n} converged Runs in ${ns}`);
    const t0 = performance.now();
    let next = 0;
    await Promise.all(
      Array.from({ length: IN_FLIGHT }, async () => {
        for (let i = next++; i < n; i = next++) {
          ctx.throwIfStopping();
          const name = `run-${i}`;
          const body = {
            apiVersion: sample.apiVersion,
            kind: 'Run',
            metadata: { name, namespace: ns },
            spec: sample.spec,
          };
          await client.request({
            method: 'POST',
            path: resourcePath(RUN_TYPE, { namespace: ns }),
            query: { fieldManager: 'kubectl-client-side-apply' },
            body: {
              ...body,
              metadata: { name, annotations: { [LAST_APPLIED_ANNOTATION]: JSON.stringify(body) } },
            },
          });
          await applyStatus(
            client,
            RUN_TYPE,
            { namespace: ns, name },
            convergedStatus(i, sample.spec.steps),
            { fieldManager: 'aibom-vault-controller', force: true },
          );
          if (i > 0 && i % 1000 === 0) ctx.log(`memory: ${i} Runs`);
        }
      }),
    );
    ctx.log(`memory: ${n} Runs in ${((performance.now() - t0) / 1000).toFixed(0)} s; measuring`);
    const cases = [
      {
        label: `controller cache (slimForCache), ${n} Runs`,
        report: await child(ctx, kubeconfig, ns, 'controller'),
      },
      {
        label: `same, V8's default young generation (no ${CONTROLLER_NODE_FLAGS.join(' ')}), ${n} Runs`,
        report: await child(ctx, kubeconfig, ns, 'controller', []),
      },
      {
        label: `whole objects (managedFields, last-applied), ${n} Runs`,
        report: await child(ctx, kubeconfig, ns, 'whole'),
      },
      { label: 'controller modules, no Runs', report: await child(ctx, kubeconfig, empty, 'controller') },
    ];
    printTable(
      `memory: ${n} Runs cached by the controller's informer (fresh process per case, after GC; ` +
        `controller flags ${CONTROLLER_NODE_FLAGS.join(' ')} unless said)`,
      ['case', 'Runs', 'RSS MB', 'peak RSS MB', 'heap used MB', 'heap total MB', 'list+sync ms'],
      cases.map(({ label, report: r }) => [
        label,
        String(r.runs),
        r.rssMB.toFixed(0),
        r.maxRssMB.toFixed(0),
        r.heapUsedMB.toFixed(0),
        r.heapTotalMB.toFixed(0),
        r.syncMs.toFixed(0),
      ]),
    );
    const rss = cases[0]!.report.rssMB;
    return [
      {
        benchmark: 'memory',
        case: `${n} Runs cached`,
        ratioOf: `controller RSS / ${GOAL_MB} MB`,
        ratio: rss / GOAL_MB,
        goal: { op: '<=', value: 1 },
      },
    ];
  },
};
