/**
 * "Admitted, then stuck forever" (issue 10), end to end: Runs the old CRD admitted but the recorder
 * could not attest (a tool step without a command; odd but legal strings at the bounds) now reach
 * AIBOMReady=True through the real controller (in-process, scoped to this test's namespace) against
 * the stack's PostgreSQL and MinIO, and what the records say matches the spec.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Run, RunSpec } from '../../../src/crd/run.ts';
import { driveRun } from '../../../hack/sample-pipeline.ts';
import type { RunningController } from '../../../src/controller/manager.ts';
import { startTestController } from '../../helpers/controller.ts';
import { generateDevPki } from '../../../hack/dev-pki.ts';
import { signerFromPem } from '../../../src/signing/index.ts';
import {
  createVaultPool,
  migrate,
  openVault,
  type AttestationKind,
  type Vault,
} from '../../../src/vault/index.ts';
import { freshDatabase, kubeConfig } from '../../helpers/stack.ts';
import { waitFor } from '../../helpers/wait.ts';
import { RUN_TYPE } from '../../../src/controller/run/kube-api.ts';
import { isNotFound, resourcePath } from '../../../src/kube/index.ts';
import { applyPipelineStatus, client, createRun, freshNamespace, getRun } from './helpers.ts';

let ns: string;
let vault: Vault;
let controller: RunningController;

beforeAll(async () => {
  ns = await freshNamespace('adm-ctl');
  const url = await freshDatabase('admctl');
  await migrate(url);
  vault = await openVault(createVaultPool(url));
  const signer = signerFromPem(await generateDevPki());
  controller = startTestController({
    vault,
    signer,
    leasePrefix: 'adm',
    watchNamespace: ns,
  });
});

afterAll(async () => {
  await controller?.stop();
  await vault?.close();
});

const condition = (r: Run, type: string) => r.status?.conditions?.find((c) => c.type === type);

/** Creates, drives (as `sample-pipeline` does) and waits for the AIBOM. */
async function toAibom(name: string, spec: RunSpec, fail?: string): Promise<Run> {
  await createRun(ns, name, spec);
  await driveRun(kubeConfig('admin'), ns, name, fail !== undefined ? { fail } : {});
  return waitFor(`${name}: AIBOMReady`, async () => {
    const r = await getRun(ns, name);
    const c = condition(r, 'AIBOMReady');
    if (c?.reason === 'RecordingFailed') throw new Error(`${name}: ${c.message}`);
    return c?.status === 'True' ? r : undefined;
  });
}

/** The stored predicates of a run, by kind. */
async function predicates(runId: string, kind: string): Promise<Record<string, unknown>[]> {
  const out: Record<string, unknown>[] = [];
  for await (const r of vault.attestations.stream({
    namespaces: [ns],
    runId,
    kind: kind as AttestationKind,
  })) {
    const statement = JSON.parse(Buffer.from(r.envelope.payload, 'base64').toString('utf8')) as {
      predicate: Record<string, unknown>;
    };
    out.push(statement.predicate);
  }
  return out;
}

describe('Runs the old CRD admitted and the recorder refused', () => {
  it('a tool step without a command gets its AIBOM (command recorded as [])', async () => {
    const run = await toAibom('no-command', {
      steps: [
        { id: 'call-api', tool: { name: 'http-request' } },
        { id: 'sum', dependsOn: ['call-api'], model: { name: 'm', provider: 'p', version: '1' } },
      ],
    });
    expect(condition(run, 'Attested')).toMatchObject({ status: 'True' });
    const steps = await predicates(run.metadata.uid, 'step');
    expect(steps.find((p) => p.stepId === 'call-api')).toMatchObject({
      kind: 'tool',
      tool: { name: 'http-request', command: [] },
    });
  });

  it('odd but legal strings at their bounds, and a failed run, get their AIBOM', async () => {
    const run = await toAibom(
      'odd-strings',
      {
        policyPack: { name: 'ポリシー-🛡️', version: '', guardrails: ['👩🏽 review', 'pii', 'pii'] },
        inputs: { prompt: 'line 1\nline 2\t\u0001 and the text \\x00', nested: [{ 'k\u2028': null }] },
        steps: [
          {
            id: 'a.b_c-1',
            model: { name: 'm'.repeat(253), provider: 'مرحبا', version: 'cafe\u0301', temperature: 10 },
            capabilities: [{ scope: 'kb:read', grantedBy: 'team:𝔘', approvedBy: `user:${'a'.repeat(248)}` }],
          },
          {
            id: 'z',
            dependsOn: ['a.b_c-1'],
            tool: { name: 'no\u00a0break', command: ['', '"quoted" \\ /'] },
            policyPack: { name: 'x'.repeat(253), version: 'v'.repeat(128) },
          },
        ],
      },
      'z',
    );
    expect(run.status?.phase).toBe('Failed');
    expect((run.status?.artifacts?.aibom as { status?: string } | undefined)?.status).toBe('failed');
    const policies = await predicates(run.metadata.uid, 'policy');
    expect(policies.map((p) => [p.pack, p.version])).toEqual([
      ['ポリシー-🛡️', 'unversioned'],
      ['x'.repeat(253), 'v'.repeat(128)],
    ]);
  });
});

/** `value` wrapped in `depth` arrays. */
function nested(depth: number, value: unknown = 'x'): unknown {
  let v = value;
  for (let i = 0; i < depth; i++) v = [v];
  return v;
}

describe('Runs admitted but beyond what the vault records (JSON nested deeper than 64 levels)', () => {
  /** Waits for the controller's verdict on `name`: both conditions False, RunNotRecordable. */
  const refused = (name: string) =>
    waitFor(`${name}: RunNotRecordable`, async () => {
      const r = await getRun(ns, name);
      const c = condition(r, 'AIBOMReady');
      if (c?.reason === 'RecordingFailed' || c?.reason === 'VaultUnavailable')
        throw new Error(`${name}: ${c.reason} ${c.message}`);
      return c?.reason === 'RunNotRecordable' ? r : undefined;
    });
  /** Deletes `name` and waits until it is gone (the finalizer does not hold it). */
  const deleted = async (name: string) => {
    await client().request({ method: 'DELETE', path: resourcePath(RUN_TYPE, { namespace: ns, name }) });
    await waitFor(`${name}: deleted`, async () => {
      try {
        await getRun(ns, name);
        return undefined;
      } catch (err) {
        if (isNotFound(err)) return true;
        throw err;
      }
    });
  };

  it('a step output 3,000 deep: a clear condition naming the field, nothing recorded, and it can be deleted', async () => {
    await createRun(ns, 'deep-output', { steps: [{ id: 'a', tool: { name: 't' } }] });
    const at = new Date().toISOString();
    await applyPipelineStatus(ns, 'deep-output', {
      phase: 'Succeeded',
      steps: [{ id: 'a', phase: 'Succeeded', startedAt: at, finishedAt: at, output: nested(3000) }],
    });
    const run = await refused('deep-output');
    expect(condition(run, 'Attested')).toMatchObject({ status: 'False', reason: 'RunNotRecordable' });
    expect(condition(run, 'AIBOMReady')?.message).toMatch(
      /^status\.steps\[id=a\]\.output nests JSON more than 64 levels deep/,
    );
    expect(await vault.attestations.ofRun(ns, run.metadata.uid)).toEqual([]);
    await deleted('deep-output');
  });

  it('spec inputs 3,000 deep: the same, never blamed on the vault', async () => {
    await createRun(ns, 'deep-inputs', {
      inputs: { d: nested(3000) },
      steps: [{ id: 'a', tool: { name: 't' } }],
    });
    const run = await refused('deep-inputs');
    expect(condition(run, 'AIBOMReady')?.message).toMatch(/^spec\.inputs nests JSON/);
    await deleted('deep-inputs');
  });

  it('exactly 64 levels deep is recorded to its AIBOM', async () => {
    const run = await toAibom('depth-64', {
      inputs: { d: nested(63) },
      steps: [{ id: 'a', tool: { name: 't' } }],
    });
    expect(condition(run, 'AIBOMReady')).toMatchObject({ status: 'True' });
  });
});
