import { randomUUID } from 'node:crypto';
import { pino } from 'pino';
import type { Phase, Run, RunSpec, StepStatus } from '../../../src/crd/run.ts';
import { reconcileRun, type RunApi, type RunReconcilerDeps } from '../../../src/controller/run/reconciler.ts';
import { createRecorder, type Recorder } from '../../../src/recorder/index.ts';
import { signerFromPem, type KeySigner } from '../../../src/signing/index.ts';
import { FakeBlobs, FakeKube, FakeVault } from '../../helpers/fakes.ts';
import { generateDevPki, type DevPki } from '../../helpers/pki.ts';

export const logger = pino({ level: 'silent' });

/** Three steps: a tool with a capability, a model under another pack, a tool. */
export const SPEC: RunSpec = {
  policyPack: { name: 'baseline', version: '1.2.0', guardrails: ['pii-redaction'] },
  inputs: { ticket: 'SUP-1' },
  steps: [
    {
      id: 'retrieve',
      tool: { name: 'vector-search', command: ['vector-search', '--top-k', '5'] },
      capabilities: [{ scope: 'kb:read', grantedBy: 'team:platform', approvedBy: 'user:alice' }],
    },
    {
      id: 'summarise',
      dependsOn: ['retrieve'],
      model: { name: 'claude', provider: 'anthropic', version: '2025-05-14', temperature: 0.2 },
      policyPack: { name: 'strict', version: '2' },
    },
    {
      id: 'post',
      dependsOn: ['summarise'],
      tool: { name: 'commenter', command: ['commenter', '--ticket', 'SUP-1'] },
    },
  ],
};

/** A Run as the API server hands it out (modifiers in the cert-manager fixture style). */
export function runFixture(...mods: ((r: Run) => void)[]): Run {
  const run: Run = {
    apiVersion: 'vault.service.dev/v1',
    kind: 'Run',
    metadata: {
      name: 'r1',
      namespace: 'team-a',
      uid: randomUUID(),
      generation: 1,
      creationTimestamp: '2026-03-01T10:00:00Z',
    },
    spec: structuredClone(SPEC),
    status: {},
  };
  for (const m of mods) m(run);
  return run;
}

const step = (id: string, phase: Phase, at: number): StepStatus => ({
  id,
  phase,
  startedAt: new Date(Date.parse('2026-03-01T10:00:00Z') + at * 1000).toISOString(),
  ...(phase === 'Succeeded' || phase === 'Failed'
    ? { finishedAt: new Date(Date.parse('2026-03-01T10:00:00Z') + at * 1000 + 500).toISOString() }
    : {}),
  ...(phase === 'Succeeded' ? { output: { result: id } } : {}),
  ...(phase === 'Failed' ? { error: 'boom' } : {}),
});

/** Steps finished in order (the first `n`), the run still Running. */
export const stepsDone =
  (n: number) =>
  (r: Run): void => {
    r.status = {
      ...r.status,
      phase: 'Running',
      steps: r.spec.steps.slice(0, n).map((s, i) => step(s.id, 'Succeeded', i)),
    };
  };

export const succeeded = (r: Run): void => {
  stepsDone(r.spec.steps.length)(r);
  r.status = { ...r.status, phase: 'Succeeded' };
};

export const failedAt =
  (id: string) =>
  (r: Run): void => {
    const i = r.spec.steps.findIndex((s) => s.id === id);
    r.status = {
      phase: 'Failed',
      steps: [...r.spec.steps.slice(0, i).map((s, k) => step(s.id, 'Succeeded', k)), step(id, 'Failed', i)],
    };
  };

let pki: Promise<{ pki: DevPki; signer: KeySigner }> | undefined;

/** One dev PKI per test file (generated, never committed), and its signer. */
export function testSigner(): Promise<{ pki: DevPki; signer: KeySigner }> {
  pki ??= generateDevPki().then((p) => ({ pki: p, signer: signerFromPem(p) }));
  return pki;
}

export interface World {
  readonly vault: FakeVault;
  readonly blobs: FakeBlobs;
  readonly kube: FakeKube;
  readonly recorder: Recorder;
  readonly signer: KeySigner;
  readonly pki: DevPki;
  /** Envelope signer failures to inject. */
  signerDown: boolean;
}

export async function world(options: { transparency?: boolean } = {}): Promise<World> {
  const { pki: p, signer } = await testSigner();
  const vault = new FakeVault();
  const blobs = new FakeBlobs();
  const w: World = {
    vault,
    blobs,
    kube: new FakeKube(),
    signer,
    pki: p,
    signerDown: false,
    recorder: createRecorder({
      vault,
      blobs,
      runtimeSigner: signer,
      envelopeSigner: () =>
        w.signerDown
          ? Promise.reject(new Error('secret team-a/signer not found'))
          : Promise.resolve({ signer, authority: 'service' as const }),
      enqueueTransparency: options.transparency === true,
      logger,
      now: () => new Date('2026-03-01T11:00:00Z'),
    }),
  };
  return w;
}

/** Every write anywhere (Kubernetes requests other than reads, vault writes, object puts). */
export function writes(w: World): Record<string, number> {
  const out: Record<string, number> = {};
  for (const [k, n] of w.kube.requests.calls) if (!k.startsWith('GET') && !k.startsWith('LIST')) out[k] = n;
  for (const [k, n] of w.vault.writes.calls) out[`vault ${k}`] = n;
  for (const [k, n] of w.blobs.writes.calls) out[`blob ${k}`] = n;
  return out;
}

export function resetCounts(w: World): void {
  w.kube.requests.reset();
  w.vault.writes.reset();
  w.blobs.writes.reset();
}

/** The reconciler's dependencies in `w` (a fixed clock), through `api` (default: the fake's). */
export const reconcilerDeps = (w: World, api: RunApi = w.kube.runApi()): RunReconcilerDeps => ({
  api,
  vault: w.vault,
  recorder: w.recorder,
  logger,
  now: () => new Date('2026-03-01T12:00:00Z'),
});

/** One reconcile of `run` in `w`. */
export const reconcileIn = (w: World, run: Run, api?: RunApi) =>
  reconcileRun(reconcilerDeps(w, api), run.metadata.namespace, run.metadata.name);

/** The Run as the fake API server holds it now. */
export const storedRun = (w: World, run: Run): Run => w.kube.run(run.metadata.namespace, run.metadata.name)!;

/** A condition of `run`, by type. */
export const conditionOf = (run: Run, type: string) => run.status?.conditions?.find((c) => c.type === type);
