/**
 * Issue 11 item 7: one tenant cannot starve the others. Five Runs of the largest size admission
 * allows (128 steps, 256 capabilities: 646 records and Attestation resources each) finish at once
 * in one namespace while they occupy the controller; then a 3-step Run finishes in another
 * namespace. The work queue is round-robin across namespaces and a reconcile of a large Run stops
 * after a bounded batch (plan.ts RECONCILE_LIMITS), so the small Run's AIBOM is recorded before
 * any of the large Runs' (checked in the vault's insert order, by UUIDv7 id), and the large Runs
 * still end complete. The wait is printed for the record, never asserted.
 */
import { randomBytes } from 'node:crypto';
import { CustomObjectsApi, PatchStrategy, setHeaderOptions } from '@kubernetes/client-node';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { generateDevPki } from '../../../hack/dev-pki.ts';
import { GROUP, VERSION, type Run, type RunSpec } from '../../../src/crd/run.ts';
import type { RunningController } from '../../../src/controller/manager.ts';
import { startTestController } from '../../helpers/controller.ts';
import { signerFromPem } from '../../../src/signing/index.ts';
import { createVaultPool, migrate, openVault, type Vault } from '../../../src/vault/index.ts';
import { createNamespace } from '../../helpers/rbac.ts';
import { freshDatabase, kubeConfig, uniqueName } from '../../helpers/stack.ts';
import { waitFor } from '../../helpers/wait.ts';

const BIG = 5;
/**
 * 128 step records + their 128 output artifact records + 256 capability records + 129 policy
 * records + provenance + AIBOM + its two standard views + the AIBOM blob's artifact record.
 */
const BIG_RECORDS = 3 * 128 + 256 + 6;
const hog = uniqueName('fair-hog');
const small = uniqueName('fair-small');
const label = `fairness-${randomBytes(4).toString('hex')}`;
let vault: Vault;
let controller: RunningController;

const api = () => kubeConfig('admin').makeApiClient(CustomObjectsApi);
const ref = (namespace: string, name: string) => ({
  group: GROUP,
  version: VERSION,
  namespace,
  plural: 'runs',
  name,
});
const getRun = async (ns: string, name: string) =>
  (await api().getNamespacedCustomObject(ref(ns, name))) as Run;
const aibomReady = (r: Run) =>
  r.status?.conditions?.some((c) => c.type === 'AIBOMReady' && c.status === 'True') === true;

/** The largest Run admission allows: 128 steps of 2 capabilities (256), each under its own pack. */
const bigSpec = (): RunSpec => ({
  policyPack: { name: 'baseline', version: '1' },
  steps: Array.from({ length: 128 }, (_, i) => ({
    id: `s${i}`,
    policyPack: { name: `pack-${i}`, version: '1' },
    tool: { name: `tool-${i}`, command: ['run', String(i)] },
    capabilities: [0, 1].map((c) => ({
      scope: `scope:${i}:${c}`,
      grantedBy: 'team:x',
      approvedBy: 'user:y',
    })),
  })),
});
const smallSpec = (): RunSpec => ({
  steps: ['a', 'b', 'c'].map((id) => ({ id, tool: { name: `tool-${id}` } })),
});

async function create(ns: string, name: string, spec: RunSpec): Promise<Run> {
  return (await api().createNamespacedCustomObject({
    ...ref(ns, name),
    body: {
      apiVersion: `${GROUP}/${VERSION}`,
      kind: 'Run',
      metadata: { name, namespace: ns, labels: { fairness: label } },
      spec,
    },
  })) as Run;
}

/** The pipeline reports every step and the run Succeeded in one server-side apply. */
async function finish(ns: string, name: string, spec: RunSpec): Promise<void> {
  const t = new Date().toISOString();
  await api().patchNamespacedCustomObjectStatus(
    {
      ...ref(ns, name),
      body: {
        apiVersion: `${GROUP}/${VERSION}`,
        kind: 'Run',
        metadata: { name, namespace: ns },
        status: {
          phase: 'Succeeded',
          steps: spec.steps.map((s) => ({
            id: s.id,
            phase: 'Succeeded',
            startedAt: t,
            finishedAt: t,
            output: { id: s.id },
          })),
        },
      },
      fieldManager: 'fairness-pipeline',
      force: true,
    },
    setHeaderOptions('Content-Type', PatchStrategy.ServerSideApply),
  );
}

beforeAll(async () => {
  const url = await freshDatabase('fair');
  await migrate(url);
  vault = await openVault(createVaultPool(url));
  const signer = signerFromPem(await generateDevPki());
  await Promise.all([createNamespace(hog), createNamespace(small)]);
  // Every namespace, but only this test's Runs (other files' controllers watch their own namespaces).
  controller = startTestController({
    vault,
    signer,
    leaseName: uniqueName('fairness'),
    runLabelSelector: `fairness=${label}`,
  });
});

afterAll(async () => {
  await controller?.stop();
  await vault?.close();
});

it('a small Run in another namespace gets its AIBOM before any of the large Runs', async () => {
  const bigs: Run[] = [];
  for (let i = 0; i < BIG; i++) bigs.push(await create(hog, `big-${i}`, bigSpec()));
  for (let i = 0; i < BIG; i++) await finish(hog, `big-${i}`, bigSpec());
  // Every large Run is being recorded: the controller is busy with them.
  await waitFor(
    'records of every large Run',
    async () => {
      for (const b of bigs)
        if ((await vault.attestations.ofRun(hog, b.metadata.uid)).length === 0) return undefined;
      return true;
    },
    300_000,
  );
  const tiny = await create(small, 'tiny', smallSpec());
  await finish(small, 'tiny', smallSpec());
  const t0 = performance.now();
  await waitFor(
    'the small Run’s AIBOM',
    async () => aibomReady(await getRun(small, 'tiny')) || undefined,
    600_000,
  );
  const waited = performance.now() - t0;
  const progress = await Promise.all(
    bigs.map(async (b) => (await vault.attestations.ofRun(hog, b.metadata.uid)).length),
  );
  console.log(
    `small Run waited ${(waited / 1000).toFixed(1)} s for its AIBOM; the large Runs had ${progress.join(', ')} of ${BIG_RECORDS} records by then`,
  );

  // The large Runs end complete: every record, every Attestation resource, counted in the status.
  for (const b of bigs) {
    const done = await waitFor(
      `large Run ${b.metadata.name} complete`,
      async () => {
        const r = await getRun(hog, b.metadata.name);
        return aibomReady(r) && r.status?.attestations?.count === BIG_RECORDS ? r : undefined;
      },
      900_000,
    );
    expect(await vault.attestations.ofRun(hog, done.metadata.uid)).toHaveLength(BIG_RECORDS);
    const resources = (await api().listNamespacedCustomObject({
      group: GROUP,
      version: VERSION,
      namespace: hog,
      plural: 'attestations',
      labelSelector: `vault.service.dev/run=${b.metadata.name}`,
    })) as { items: unknown[] };
    expect(resources.items).toHaveLength(BIG_RECORDS);
  }

  // Order, from the vault itself: ids are UUIDv7 in insert order.
  const aibomId = async (ns: string, run: Run) =>
    (await vault.attestations.ofRun(ns, run.metadata.uid)).find((a) => a.kind === 'aibom')!.id;
  const tinyAibom = await aibomId(small, tiny);
  for (const b of bigs) expect(tinyAibom < (await aibomId(hog, b)), b.metadata.name).toBe(true);
}, 1_800_000);
