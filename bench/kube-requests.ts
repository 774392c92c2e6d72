/**
 * kube-requests: what each kind of request a Run causes costs the API server (and etcd), in
 * CPU-ms per request, measured on the stack's real kube-apiserver from its /proc counters. The
 * figures behind docs/bench.md "operator-compare": they say which requests of a Run are worth
 * removing. 300 × BENCH_SCALE Runs of the sample spec in a fresh namespace, then, for each kind in
 * turn, one request per Run (4 in flight): the pipeline's status applies (steps, then the terminal
 * phase), the controller's status write (server-side apply, and the same as a JSON merge patch),
 * an Attestation create, an Event create and a GET. Informational: no goal, no verdict.
 */
import { readFileSync } from 'node:fs';
import { readFile } from 'node:fs/promises';
import { parse as parseYaml } from 'yaml';
import { repoRoot } from '../hack/stack/stack.ts';
import type { Run } from '../src/crd/run.ts';
import { ATTESTATION_TYPE, RUN_TYPE } from '../src/controller/run/kube-api.ts';
import { applyStatus, kubeClient, resourcePath, type KubeClient } from '../src/kube/index.ts';
import { printTable, scaled, type Benchmark, type BenchContext, type SummaryRow } from './common.ts';
import { loadKube } from './controller-kit.ts';

const IN_FLIGHT = 4;
/** Clock ticks per second of /proc/<pid>/stat (USER_HZ: 100 on Linux x86-64 and arm64). */
const TICKS = 100;

function cpuSeconds(pid: number): number {
  const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
  const f = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
  return (Number(f[11]) + Number(f[12])) / TICKS;
}

/** The status the controller writes when a Run's AIBOM is recorded (shape of the real one). */
function controllerStatus(i: number, v: number): Record<string, unknown> {
  const digest = `sha256:${String(v).repeat(64).slice(0, 64)}`;
  return {
    observedGeneration: 1,
    attestations: { count: 5 + v },
    artifacts: { aibom: { digest, location: `s3://aibom/runs/${i}/aibom.json`, status: 'succeeded' } },
    conditions: [
      {
        type: 'Ready',
        status: 'True',
        reason: 'AIBOMRecorded',
        message: `AIBOM ${digest} stored`,
        lastTransitionTime: `2026-11-24T00:00:0${v}Z`,
        observedGeneration: 1,
      },
    ],
  };
}

async function measure(
  ctx: BenchContext,
  pids: { api: number; etcd: number },
  n: number,
  label: string,
  request: (i: number) => Promise<unknown>,
): Promise<string[]> {
  ctx.throwIfStopping();
  const api = cpuSeconds(pids.api);
  const etcd = cpuSeconds(pids.etcd);
  const t0 = performance.now();
  let next = 0;
  await Promise.all(
    Array.from({ length: IN_FLIGHT }, async () => {
      while (next < n) await request(next++);
    }),
  );
  const ms = (v: number): string => ((v * 1000) / n).toFixed(2);
  ctx.log(`kube-requests: ${label}`);
  return [
    label,
    ms(cpuSeconds(pids.api) - api),
    ms(cpuSeconds(pids.etcd) - etcd),
    ms((performance.now() - t0) / 1000),
  ];
}

export const kubeRequestsBenchmark: Benchmark = {
  name: 'kube-requests',
  title: 'API server CPU-ms per request of each kind a Run causes (Run status writes, creates, GET)',
  async run(ctx: BenchContext): Promise<SummaryRow[]> {
    const stack = await ctx.stack();
    const pidOf = (name: string): number => {
      const p = stack.procs.find((x) => x.name === name);
      if (p === undefined) throw new Error(`the stack has no ${name} process`);
      return p.pid;
    };
    const pids = { api: pidOf('kube-apiserver'), etcd: pidOf('etcd') };
    const client: KubeClient = kubeClient(loadKube(stack.kube.kubeconfigs.admin), {
      userAgent: 'bench-kube-requests',
    });
    const ns = `bench-kube-requests-${Date.now().toString(36)}`;
    await client.request({
      method: 'POST',
      path: '/api/v1/namespaces',
      body: { apiVersion: 'v1', kind: 'Namespace', metadata: { name: ns } },
    });
    const sample = parseYaml(await readFile(`${repoRoot}/manifests/samples/run.yaml`, 'utf8')) as Run;
    const n = scaled(300, ctx.scale, 20);
    const name = (i: number): string => `run-${i}`;
    const ref = (i: number) => ({ namespace: ns, name: name(i) });
    const steps = sample.spec.steps.map((s) => ({
      id: s.id,
      phase: 'Succeeded',
      startedAt: '2026-11-24T00:00:00Z',
      finishedAt: '2026-11-24T00:00:01Z',
      output: { summary: 'done' },
    }));
    const recordId = (i: number): string => `0190a3b2-0000-7000-8000-${String(i).padStart(12, '0')}`;
    const create = (type: typeof RUN_TYPE, objectName: string, spec: unknown): Promise<unknown> =>
      client.request({
        method: 'POST',
        path: resourcePath(type, { namespace: ns }),
        body: { apiVersion: sample.apiVersion, kind: type.kind, metadata: { name: objectName }, spec },
      });
    const rows = [
      await measure(ctx, pids, n, 'create Run (pipeline)', (i) => create(RUN_TYPE, name(i), sample.spec)),
      await measure(ctx, pids, n, 'status apply: steps (pipeline)', (i) =>
        applyStatus(client, RUN_TYPE, ref(i), { phase: 'Running', steps }, { fieldManager: 'pipeline' }),
      ),
      await measure(ctx, pids, n, 'status apply: terminal phase (pipeline)', (i) =>
        applyStatus(client, RUN_TYPE, ref(i), { phase: 'Succeeded', steps }, { fieldManager: 'pipeline' }),
      ),
      await measure(ctx, pids, n, 'status apply: AIBOM recorded (controller)', (i) =>
        applyStatus(client, RUN_TYPE, ref(i), controllerStatus(i, 1), { fieldManager: 'controller' }),
      ),
      await measure(ctx, pids, n, 'same status as a JSON merge patch', (i) =>
        client.request({
          method: 'PATCH',
          path: resourcePath(RUN_TYPE, { ...ref(i), subresource: 'status' }),
          contentType: 'application/merge-patch+json',
          body: { status: controllerStatus(i, 2) },
        }),
      ),
      await measure(ctx, pids, n, 'create Attestation (controller)', (i) =>
        create(ATTESTATION_TYPE, recordId(i), {
          id: recordId(i),
          kind: 'run',
          predicateType: 'https://slsa.dev/provenance/v1',
          subjects: [`run:${i}`],
          digest: `sha256:${'b'.repeat(64)}`,
        }),
      ),
      await measure(ctx, pids, n, 'create Event (controller)', (i) =>
        client.request({
          method: 'POST',
          path: `/api/v1/namespaces/${ns}/events`,
          body: {
            apiVersion: 'v1',
            kind: 'Event',
            metadata: { name: `event-${i}` },
            involvedObject: { apiVersion: sample.apiVersion, kind: 'Run', namespace: ns, name: name(i) },
            reason: 'AIBOMRecorded',
            message: 'recorded 3 attestation(s) for run and policies',
            type: 'Normal',
            source: { component: 'bench-kube-requests' },
            firstTimestamp: '2026-11-24T00:00:00Z',
            lastTimestamp: '2026-11-24T00:00:00Z',
            count: 1,
          },
        }),
      ),
      await measure(ctx, pids, n, 'GET Run', (i) =>
        client.request({ method: 'GET', path: resourcePath(RUN_TYPE, ref(i)) }),
      ),
    ];
    printTable(
      `kube-requests — ${n} Runs of the sample spec, one request of each kind per Run, ${IN_FLIGHT} in flight`,
      ['request', 'kube-apiserver CPU-ms', 'etcd CPU-ms', 'wall ms per request'],
      rows,
    );
    return [];
  },
};
