/**
 * Issue 28 item 3: a Run's evidence never claims steps that did not run. Admission refuses a
 * terminal phase while a step is Running, and Succeeded until every step of the spec finished
 * (test/integration/admission/status.test.ts has each refusal); a Failed run may stop before some
 * steps, and then its AIBOM names only the steps that ran: components and trust subjects, the run
 * provenance's resolved dependencies, the metadata record's summary; the CycloneDX view marks the
 * others `vault:step_not_run`; `service-ctl aibom generate` reproduces the stored bytes. The
 * controller is the real one (in-process), the Runs go through the stack's kube-apiserver.
 */
import { execFile } from 'node:child_process';
import { createHash } from 'node:crypto';
import { promisify } from 'node:util';
import { CustomObjectsApi } from '@kubernetes/client-node';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { canonicalJson } from '../../../src/attest/index.ts';
import { validateCycloneDx, type Aibom, type CycloneDxBom } from '../../../src/aibom/index.ts';
import { GROUP, VERSION, type Run, type RunSpec, type StepStatus } from '../../../src/crd/run.ts';
import type { RunningController } from '../../../src/controller/manager.ts';
import { startTestController } from '../../helpers/controller.ts';
import { generateDevPki } from '../../../hack/dev-pki.ts';
import { repoRoot } from '../../../hack/stack/stack.ts';
import { signerFromPem } from '../../../src/signing/index.ts';
import { createVaultPool, migrate, openVault, type Vault } from '../../../src/vault/index.ts';
import { stackBlobs } from '../../helpers/blobs.ts';
import { createNamespace } from '../../helpers/rbac.ts';
import { freshDatabase, kubeConfig, uniqueName } from '../../helpers/stack.ts';
import { waitFor } from '../../helpers/wait.ts';
import { applyPipelineStatus, expectRefused, patchRun } from '../admission/helpers.ts';

const exec = promisify(execFile);
const ns = uniqueName('unfinished');
let dbUrl: string;
let vault: Vault;
let controller: RunningController;

/** a → b → c (tool, model, tool) and d beside them: four steps of three kinds. */
const spec: RunSpec = {
  policyPack: { name: 'baseline', version: '1' },
  steps: [
    { id: 'fetch', tool: { name: 'fetcher', command: ['fetch'] } },
    {
      id: 'answer',
      dependsOn: ['fetch'],
      model: { name: 'model-x', provider: 'lab', version: '1', temperature: 0.1 },
    },
    { id: 'publish', dependsOn: ['answer'], tool: { name: 'publisher' } },
    { id: 'audit', model: { name: 'model-never', provider: 'other-lab', version: '2' } },
  ],
};

const api = () => kubeConfig('admin').makeApiClient(CustomObjectsApi);
const ref = (name: string) => ({ group: GROUP, version: VERSION, namespace: ns, plural: 'runs', name });
const getRun = async (name: string) => (await api().getNamespacedCustomObject(ref(name))) as Run;
const create = async (name: string) =>
  (await api().createNamespacedCustomObject({
    ...ref(name),
    body: { apiVersion: `${GROUP}/${VERSION}`, kind: 'Run', metadata: { name, namespace: ns }, spec },
  })) as Run;
const at = '2026-01-01T00:00:00Z';
const ok = (id: string): StepStatus => ({
  id,
  phase: 'Succeeded',
  startedAt: at,
  finishedAt: at,
  output: { id },
});
const broke = (id: string): StepStatus => ({
  id,
  phase: 'Failed',
  startedAt: at,
  finishedAt: at,
  error: 'boom',
});

async function aibomOf(name: string): Promise<{ run: Run; bom: Aibom; meta: Record<string, unknown> }> {
  const run = await waitFor(`AIBOM of ${name}`, async () => {
    const r = await getRun(name);
    return r.status?.conditions?.some((c) => c.type === 'AIBOMReady' && c.status === 'True') ? r : undefined;
  });
  const meta = run.status!.artifacts!.aibom as Record<string, unknown> & { key: string; digest: string };
  const stored = await stackBlobs().get(meta.key);
  expect(stored, 'the stored AIBOM').not.toBeNull();
  const bytes = stored!;
  expect(`sha256:${createHash('sha256').update(bytes).digest('hex')}`).toBe(meta.digest);
  return { run, bom: JSON.parse(bytes.toString('utf8')) as Aibom, meta };
}

async function generate(runId: string, format: 'aibom' | 'cyclonedx'): Promise<string> {
  const { stdout } = await exec(
    process.execPath,
    [`${repoRoot}/src/bin/service-ctl.ts`, 'aibom', 'generate', '--run', runId, '--format', format],
    { env: { ...process.env, DATABASE_URL: dbUrl } },
  );
  return stdout;
}

beforeAll(async () => {
  dbUrl = await freshDatabase('unfinished');
  await migrate(dbUrl);
  vault = await openVault(createVaultPool(dbUrl));
  await createNamespace(ns);
  const signer = signerFromPem(await generateDevPki());
  controller = startTestController({
    vault,
    signer,
    leasePrefix: 'unfinished',
    watchNamespace: ns,
    checkpoints: { intervalMs: 3_600_000 },
  });
});

afterAll(async () => {
  await controller?.stop();
  await vault?.close();
});

describe('a Run that is not over cannot end as if it were (the issue, reproduced)', () => {
  it('Succeeded with no step run, and Succeeded or Failed with a step Running, are refused; no AIBOM', async () => {
    await create('claims');
    await expectRefused(
      patchRun(ns, 'claims', { status: { phase: 'Succeeded' } }, { subresource: 'status' }),
      'status.phase cannot become Succeeded while step fetch has not finished',
    );
    await applyPipelineStatus(ns, 'claims', {
      phase: 'Running',
      steps: [{ id: 'fetch', phase: 'Running', startedAt: at }],
    });
    for (const phase of ['Succeeded', 'Failed'] as const) {
      await expectRefused(
        patchRun(ns, 'claims', { status: { phase } }, { subresource: 'status' }),
        `status.phase cannot become ${phase} while step fetch is Running`,
      );
    }
    const run = await getRun('claims');
    expect(run.status?.phase).toBe('Running');
    expect(await vault.artifacts.get(run.metadata.uid, 'aibom')).toBeNull();
  });
});

describe('a Failed run that stopped before some steps', () => {
  let run: Run;
  let bom: Aibom;
  let meta: Record<string, unknown>;

  beforeAll(async () => {
    await create('stopped');
    // fetch succeeded, answer failed; publish was never started, audit reported but still Pending.
    await applyPipelineStatus(ns, 'stopped', {
      phase: 'Failed',
      steps: [ok('fetch'), broke('answer'), { id: 'audit', phase: 'Pending' }],
    });
    ({ run, bom, meta } = await aibomOf('stopped'));
  });

  it('has step records for the steps that ran only', async () => {
    const steps = await vault.attestations.query({ namespaces: [ns], runId: run.metadata.uid, kind: 'step' });
    expect(steps.items.map((s) => s.stepId).sort()).toEqual(['answer', 'fetch']);
  });

  it('names only those steps in the AIBOM: components, trust subjects, summary', () => {
    const id = run.metadata.uid;
    expect(bom.metadata.status).toBe('failed');
    expect(bom.components.tools.map((t) => t.id)).toEqual(['fetch']);
    expect(bom.components.models.map((m) => m.id)).toEqual(['answer']);
    expect(bom.trust.subjects).toEqual([`run:${id}`, `step:${id}:fetch`, `step:${id}:answer`]);
    expect(JSON.stringify(bom)).not.toContain('publish');
    expect(JSON.stringify(bom)).not.toContain('model-never');
    expect(meta).toMatchObject({
      status: 'failed',
      trust_subjects: bom.trust.subjects,
      summary: { models: 1, tools: 1 },
    });
  });

  it('lists every record of the run made before the AIBOM, and the run provenance resolves only what ran', async () => {
    const records = await vault.attestations.query({ namespaces: [ns], runId: run.metadata.uid });
    // In insert order: the AIBOM's own record and its views (recorded after it) are not listed.
    const aibomAt = records.items.findIndex((r) => r.kind === 'aibom');
    expect(aibomAt).toBeGreaterThan(0);
    expect(bom.trust.attestation_ids).toEqual(records.items.slice(0, aibomAt).map((r) => r.id));
    const provenance = records.items.find((r) => r.kind === 'run')!;
    const statement = JSON.parse(Buffer.from(provenance.envelope.payload, 'base64').toString('utf8')) as {
      predicate: {
        buildDefinition: { externalParameters: RunSpec; resolvedDependencies: { name: string }[] };
      };
    };
    expect(statement.predicate.buildDefinition.resolvedDependencies.map((d) => d.name).sort()).toEqual([
      'model:lab/model-x',
      'tool:fetcher',
    ]);
    // What was asked for stays the whole spec.
    expect(statement.predicate.buildDefinition.externalParameters.steps).toHaveLength(4);
  });

  it('service-ctl aibom generate reproduces the stored bytes; the CycloneDX view marks the steps that never ran', async () => {
    const regenerated = Buffer.from(canonicalJson(JSON.parse(await generate(run.metadata.uid, 'aibom'))));
    expect(`sha256:${createHash('sha256').update(regenerated).digest('hex')}`).toBe(meta.digest);
    const text = await generate(run.metadata.uid, 'cyclonedx');
    expect(await validateCycloneDx(text)).toEqual([]);
    const cdx = JSON.parse(text) as CycloneDxBom;
    const notRun = cdx.metadata.properties.filter((p) => p.name === 'vault:step_not_run');
    expect(notRun.map((p) => p.value)).toEqual(['publish', 'audit']);
    expect(cdx.components.map((c) => c.name)).toEqual(expect.arrayContaining(['fetcher', 'model-x']));
    expect(cdx.components.some((c) => c.name === 'publisher' || c.name === 'model-never')).toBe(false);
  });
});

describe('a Failed run in which nothing ran', () => {
  it('gets an AIBOM with no step component and only the run as trust subject', async () => {
    await create('nothing');
    await patchRun(ns, 'nothing', { status: { phase: 'Failed' } }, { subresource: 'status' });
    const { run, bom } = await aibomOf('nothing');
    expect(bom.metadata.status).toBe('failed');
    expect(bom.components.models).toEqual([]);
    expect(bom.components.tools).toEqual([]);
    expect(bom.trust.subjects).toEqual([`run:${run.metadata.uid}`]);
  });
});
