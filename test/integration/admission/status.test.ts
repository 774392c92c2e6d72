/**
 * Terminal is terminal, on the real kube-apiserver: a terminal phase is refused while a step is
 * Running (and Succeeded until every step of the spec finished); once status.phase is Succeeded or
 * Failed, the phase and the steps cannot change, a finished step's result cannot change or disappear (also before
 * the run ends), and the status cannot be removed; the pipeline still moves unfinished steps forward
 * and the controller still writes its own fields on a terminal Run. Writes are made the way pipelines
 * make them: server-side apply under the pipeline's field manager (hack/sample-pipeline.ts), merge patches
 * and JSON patches on the status subresource.
 */
import { execFile } from 'node:child_process';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { beforeAll, describe, expect, it } from 'vitest';
import { repoRoot } from '../../../hack/stack/stack.ts';
import type { RunStatus, StepStatus } from '../../../src/crd/run.ts';
import { driveRun } from '../../../hack/sample-pipeline.ts';
import { kubeConfig, stack } from '../../helpers/stack.ts';

const exec = promisify(execFile);
import {
  applyControllerStatus,
  applyPipelineStatus,
  createRun,
  expectRefused,
  freshNamespace,
  getRun,
  patchRun,
  toolStep,
} from './helpers.ts';

let ns: string;
beforeAll(async () => {
  ns = await freshNamespace('adm-status');
});

const T0 = '2025-06-01T10:00:00Z';
const T1 = '2025-06-01T10:00:05Z';
const succeeded = (id: string, output: unknown = { n: 1 }): StepStatus => ({
  id,
  phase: 'Succeeded',
  startedAt: T0,
  finishedAt: T1,
  output,
});
const failed = (id: string, error = 'boom'): StepStatus => ({
  id,
  phase: 'Failed',
  startedAt: T0,
  finishedAt: T1,
  error,
});

let counter = 0;
/** A fresh Run with steps a → b → c, its status applied by the pipeline. */
async function runWith(status: Pick<RunStatus, 'phase' | 'steps'>): Promise<string> {
  const name = `r${++counter}`;
  await createRun(ns, name, {
    steps: [toolStep('a'), toolStep('b', { dependsOn: ['a'] }), toolStep('c', { dependsOn: ['b'] })],
  });
  await applyPipelineStatus(ns, name, status);
  return name;
}

describe('the steps the status reports', () => {
  it('are steps of the spec: a step the spec does not list is refused (it would never be attested)', async () => {
    const name = await runWith({ phase: 'Running', steps: [succeeded('a')] });
    await expectRefused(
      applyPipelineStatus(ns, name, { phase: 'Running', steps: [succeeded('a'), succeeded('ghost')] }),
      'status.steps names a step that is not in spec.steps',
    );
    await expectRefused(
      patchRun(ns, name, { status: { steps: [succeeded('ghost')] } }, { subresource: 'status' }),
      'status.steps names a step that is not in spec.steps',
    );
    // The spec's own steps still move forward.
    await applyPipelineStatus(ns, name, {
      phase: 'Succeeded',
      steps: [succeeded('a'), succeeded('b'), succeeded('c')],
    });
    expect((await getRun(ns, name)).status?.steps?.map((s) => s.id)).toEqual(['a', 'b', 'c']);
  });
});

describe('a terminal phase', () => {
  it('Failed → Succeeded is refused (server-side apply and merge patch)', async () => {
    const name = await runWith({ phase: 'Failed', steps: [succeeded('a'), failed('b')] });
    await expectRefused(
      applyPipelineStatus(ns, name, { phase: 'Succeeded', steps: [succeeded('a'), failed('b')] }),
      'status.phase',
      'status.phase is Failed, a terminal phase',
    );
    await expectRefused(
      patchRun(ns, name, { status: { phase: 'Succeeded' } }, { subresource: 'status' }),
      'status.phase',
      'cannot change',
    );
    expect((await getRun(ns, name)).status?.phase).toBe('Failed');
  });

  it('sample-pipeline refuses a terminal Run before trying: one line on stderr, exit 1, nothing written', async () => {
    for (const phase of ['Failed', 'Succeeded'] as const) {
      const name = await runWith(
        phase === 'Failed'
          ? { phase, steps: [succeeded('a'), failed('b')] }
          : { phase, steps: [succeeded('a'), succeeded('b'), succeeded('c')] },
      );
      const before = await getRun(ns, name);
      const out = await exec(process.execPath, [join(repoRoot, 'hack/sample-pipeline.ts'), `${ns}/${name}`], {
        env: { ...process.env, KUBECONFIG: stack().kube.kubeconfigs.admin },
      }).then(
        () => ({ code: 0, stdout: '', stderr: '' }),
        (e: { code: number; stdout: string; stderr: string }) => e,
      );
      expect(out.code).toBe(1);
      expect(out.stdout).toBe('');
      const lines = out.stderr.trimEnd().split('\n');
      expect(lines).toHaveLength(1);
      // Its own refusal, not the API server's answer to a write it tried.
      expect(lines[0]).toBe(
        `sample-pipeline: run ${ns}/${name} is already ${phase}: a finished run cannot be driven again`,
      );
      expect((await getRun(ns, name)).metadata.resourceVersion).toBe(before.metadata.resourceVersion);
    }
  });

  it('Succeeded → Running, and Succeeded → Failed, are refused', async () => {
    const steps = [succeeded('a'), succeeded('b'), succeeded('c')];
    const name = await runWith({ phase: 'Succeeded', steps });
    await expectRefused(applyPipelineStatus(ns, name, { phase: 'Running', steps }), 'status.phase');
    await expectRefused(applyPipelineStatus(ns, name, { phase: 'Failed', steps }), 'status.phase');
  });

  it('cannot be removed: phase null, phase dropped from the apply, status removed', async () => {
    const steps = [succeeded('a')];
    const name = await runWith({ phase: 'Failed', steps });
    await expectRefused(
      patchRun(ns, name, { status: { phase: null } }, { subresource: 'status' }),
      'status.phase',
      'status.phase is Failed',
    );
    await expectRefused(applyPipelineStatus(ns, name, { steps }), 'status.phase');
    await expectRefused(
      patchRun(ns, name, [{ op: 'remove', path: '/status' }], { subresource: 'status', type: 'json' }),
      'status',
      'status cannot be removed',
    );
    await expectRefused(
      patchRun(ns, name, { status: null }, { subresource: 'status' }),
      'status cannot be removed',
    );
  });

  it('freezes status.steps: no step added, no unfinished step moved', async () => {
    // A Failed run may end with a step that never started (Pending); never with one Running.
    const name = await runWith({ phase: 'Failed', steps: [succeeded('a'), { id: 'b', phase: 'Pending' }] });
    await expectRefused(
      applyPipelineStatus(ns, name, {
        phase: 'Failed',
        steps: [succeeded('a'), { id: 'b', phase: 'Pending' }, succeeded('c')],
      }),
      'status.steps',
      'status.steps cannot change once status.phase is Failed',
    );
    await expectRefused(
      applyPipelineStatus(ns, name, { phase: 'Failed', steps: [succeeded('a'), failed('b')] }),
      'status.steps',
    );
  });
});

describe('ending a run (issue 28: a terminal phase never claims steps that did not run)', () => {
  /** A Run whose status the pipeline has written, not yet terminal. */
  async function running(steps: StepStatus[]): Promise<string> {
    return runWith({ phase: 'Running', steps });
  }

  it('Succeeded is refused while a step of the spec has not finished: unreported, Pending or Running', async () => {
    // No step ever reported: the run did nothing.
    const none = await running([]);
    await expectRefused(
      applyPipelineStatus(ns, none, { phase: 'Succeeded', steps: [] }),
      'status.phase',
      'status.phase cannot become Succeeded while step a has not finished',
    );
    await expectRefused(
      patchRun(ns, none, { status: { phase: 'Succeeded' } }, { subresource: 'status' }),
      'status.phase cannot become Succeeded while step a has not finished',
    );
    // a and b done, c never reported.
    const partial = await running([succeeded('a'), succeeded('b')]);
    await expectRefused(
      applyPipelineStatus(ns, partial, { phase: 'Succeeded', steps: [succeeded('a'), succeeded('b')] }),
      'status.phase cannot become Succeeded while step c has not finished',
    );
    // c reported, but Pending.
    await expectRefused(
      applyPipelineStatus(ns, partial, {
        phase: 'Succeeded',
        steps: [succeeded('a'), succeeded('b'), { id: 'c', phase: 'Pending' }],
      }),
      'status.phase cannot become Succeeded while step c has not finished',
    );
    for (const name of [none, partial]) expect((await getRun(ns, name)).status?.phase).toBe('Running');
  });

  it('Succeeded and Failed are refused while a step is Running (merge patch and server-side apply)', async () => {
    const name = await running([succeeded('a'), { id: 'b', phase: 'Running', startedAt: T0 }]);
    for (const phase of ['Succeeded', 'Failed'] as const) {
      await expectRefused(
        patchRun(ns, name, { status: { phase } }, { subresource: 'status' }),
        'status.phase',
        `status.phase cannot become ${phase} while step b is Running`,
      );
      await expectRefused(
        applyPipelineStatus(ns, name, {
          phase,
          steps: [succeeded('a'), { id: 'b', phase: 'Running', startedAt: T0 }],
        }),
        `status.phase cannot become ${phase} while step b is Running`,
      );
    }
    expect((await getRun(ns, name)).status?.phase).toBe('Running');
  });

  it('Failed is legal with steps that never started, and Succeeded once every step finished (one failed)', async () => {
    const stopped = await running([succeeded('a')]);
    const ended = await applyPipelineStatus(ns, stopped, {
      phase: 'Failed',
      steps: [succeeded('a'), failed('b'), { id: 'c', phase: 'Pending' }],
    });
    expect(ended.status?.phase).toBe('Failed');
    // Nothing ran at all: a run that failed before its first step.
    const never = await running([]);
    expect(
      (await patchRun(ns, never, { status: { phase: 'Failed' } }, { subresource: 'status' })).status?.phase,
    ).toBe('Failed');
    const tolerant = await running([]);
    const done = await applyPipelineStatus(ns, tolerant, {
      phase: 'Succeeded',
      steps: [succeeded('a'), failed('b'), succeeded('c')],
    });
    expect(done.status?.phase).toBe('Succeeded');
  });
});

describe('a finished step (also while the run is Running)', () => {
  const changes: [string, StepStatus][] = [
    ['output changed', succeeded('a', { n: 2 })],
    ['output removed', { id: 'a', phase: 'Succeeded', startedAt: T0, finishedAt: T1 }],
    ['moved back to Running', { ...succeeded('a'), phase: 'Running' }],
    ['Succeeded → Failed', { ...succeeded('a'), phase: 'Failed', error: 'late' }],
    ['finishedAt changed', { ...succeeded('a'), finishedAt: '2025-06-01T10:00:09Z' }],
    ['startedAt changed', { ...succeeded('a'), startedAt: '2025-06-01T09:00:00Z' }],
    ['outputDigest added', { ...succeeded('a'), outputDigest: 'sha256:00' }],
  ];
  for (const [what, next] of changes) {
    it(`is refused: ${what}`, async () => {
      const name = await runWith({
        phase: 'Running',
        steps: [succeeded('a'), { id: 'b', phase: 'Running' }],
      });
      await expectRefused(
        applyPipelineStatus(ns, name, { phase: 'Running', steps: [next, { id: 'b', phase: 'Running' }] }),
        'status.steps[0]',
        'step a has finished (Succeeded)',
      );
    });
  }

  it('a failed step: its error cannot change', async () => {
    const name = await runWith({ phase: 'Running', steps: [failed('a')] });
    await expectRefused(
      applyPipelineStatus(ns, name, { phase: 'Running', steps: [failed('a', 'other')] }),
      'status.steps[0]',
      'step a has finished (Failed)',
    );
  });

  it('cannot be removed: dropped from the apply, by JSON patch, or with the whole list', async () => {
    const name = await runWith({ phase: 'Running', steps: [succeeded('a'), { id: 'b', phase: 'Running' }] });
    await expectRefused(
      applyPipelineStatus(ns, name, { phase: 'Running', steps: [{ id: 'b', phase: 'Running' }] }),
      'status.steps',
      'step a has finished and cannot be removed',
    );
    await expectRefused(
      patchRun(ns, name, [{ op: 'remove', path: '/status/steps/0' }], {
        subresource: 'status',
        type: 'json',
      }),
      'step a has finished and cannot be removed',
    );
    await expectRefused(
      patchRun(ns, name, { status: { steps: null } }, { subresource: 'status' }),
      'status.steps',
      'cannot be removed while it holds finished steps',
    );
    expect((await getRun(ns, name)).status?.steps).toHaveLength(2);
  });
});

describe('what stays legal', () => {
  it('a pipeline moves steps forward one apply at a time (hack/sample-pipeline.ts, then a failure)', async () => {
    await createRun(ns, 'driven', {
      steps: [toolStep('a'), toolStep('b', { dependsOn: ['a'] }), toolStep('c', { dependsOn: ['b'] })],
    });
    expect(await driveRun(kubeConfig('admin'), ns, 'driven')).toBe('Succeeded');
    await createRun(ns, 'driven-fail', { steps: [toolStep('a'), toolStep('b', { dependsOn: ['a'] })] });
    expect(await driveRun(kubeConfig('admin'), ns, 'driven-fail', { fail: 'b' })).toBe('Failed');
  });

  it('an unfinished step may go back (Running → Pending) and steps may be added while Running', async () => {
    const name = await runWith({ phase: 'Running', steps: [{ id: 'a', phase: 'Running' }] });
    await applyPipelineStatus(ns, name, { phase: 'Pending', steps: [{ id: 'a', phase: 'Pending' }] });
    await applyPipelineStatus(ns, name, {
      phase: 'Running',
      steps: [succeeded('a'), { id: 'b', phase: 'Running', startedAt: T1 }],
    });
    // An identical re-apply of a finished step is not a change.
    const run = await applyPipelineStatus(ns, name, {
      phase: 'Succeeded',
      steps: [succeeded('a'), succeeded('b'), succeeded('c', 'plain string output')],
    });
    expect(run.status?.steps?.map((s) => s.phase)).toEqual(['Succeeded', 'Succeeded', 'Succeeded']);
  });

  it('the controller writes conditions, artifacts, attestations, transparency on a terminal Run', async () => {
    const name = await runWith({ phase: 'Failed', steps: [succeeded('a'), failed('b')] });
    const at = new Date().toISOString().replace(/\.\d+Z$/, 'Z');
    const condition = (status: 'True' | 'False', reason: string) => ({
      type: 'AIBOMReady',
      status,
      reason,
      message: reason,
      lastTransitionTime: at,
      observedGeneration: 1,
    });
    await applyControllerStatus(ns, name, {
      conditions: [condition('False', 'VaultUnavailable')],
      observedGeneration: 1,
    });
    const run = await applyControllerStatus(ns, name, {
      conditions: [condition('True', 'AIBOMRecorded')],
      artifacts: { aibom: { digest: `sha256:${'a'.repeat(64)}`, key: 'runs/x/aibom.json' } },
      attestations: { count: 7 },
      transparency: { state: 'queued', queued: 7, published: 0, retrying: 0, notQueued: 0 },
      observedGeneration: 1,
    });
    expect(run.status).toMatchObject({ phase: 'Failed', attestations: { count: 7 } });
    expect(run.status?.conditions?.[0]).toMatchObject({ status: 'True', reason: 'AIBOMRecorded' });
    expect(run.status?.steps).toEqual([succeeded('a'), failed('b')]);
  });
});

describe('NUL in status (the vault mirrors status.steps into jsonb)', () => {
  it('is refused in a step output (policy) and in a step error (CRD pattern)', async () => {
    const name = await runWith({ phase: 'Running', steps: [{ id: 'a', phase: 'Running' }] });
    await expectRefused(
      applyPipelineStatus(ns, name, { phase: 'Running', steps: [succeeded('a', { text: 'x\u0000' })] }),
      'status.steps[id=a].output',
      'NUL character',
    );
    await expectRefused(
      applyPipelineStatus(ns, name, { phase: 'Running', steps: [succeeded('a', '\u0000')] }),
      'status.steps[id=a].output',
    );
    await expectRefused(
      applyPipelineStatus(ns, name, { phase: 'Running', steps: [failed('a', 'bad\u0000')] }),
      'status.steps[0].error',
    );
    // Other control characters are data: a multi-line error or output is fine.
    await applyPipelineStatus(ns, name, {
      phase: 'Failed',
      steps: [{ ...failed('a', 'Traceback:\n\tline 1\u001b[31m') }],
    });
  });
});
