/**
 * End to end on the real stack: Runs driven by a pipeline (SSA under its own field manager), the
 * controller (in-process, scoped to this test's namespace) attesting steps and emitting the AIBOM,
 * then every place the result must show up, checked by independent tools where they exist.
 */
import { execFile } from 'node:child_process';
import { createHash, randomBytes } from 'node:crypto';
import type { AddressInfo } from 'node:net';
import { promisify } from 'node:util';
import { Reader } from '@contentauth/c2pa-node';
import { CoreV1Api, CustomObjectsApi } from '@kubernetes/client-node';
import type { FastifyInstance } from 'fastify';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { parse as parseYaml } from 'yaml';
import { readFile } from 'node:fs/promises';
import type { Run } from '../../../src/crd/run.ts';
import { validateCycloneDx } from '../../../src/aibom/index.ts';
import { envelopeDigest } from '../../../src/attest/index.ts';
import { driveRun } from '../../../hack/sample-pipeline.ts';
import type { RunningController } from '../../../src/controller/manager.ts';
import { startTestController } from '../../helpers/controller.ts';
import { generateDevPki } from '../../../hack/dev-pki.ts';
import { signerFromPem, type KeySigner } from '../../../src/signing/index.ts';
import { createVaultPool, migrate, openVault, type Vault } from '../../../src/vault/index.ts';
import { repoRoot } from '../../../hack/stack/stack.ts';
import { stackApp } from '../../helpers/app.ts';
import { serviceCtlEnv } from '../../helpers/cli-main.ts';
import { stackBlobs } from '../../helpers/blobs.ts';
import { createNamespace } from '../../helpers/rbac.ts';
import { freshDatabase, kubeConfig, stack, uniqueName } from '../../helpers/stack.ts';
import { waitFor } from '../../helpers/wait.ts';
import { expectRefused, patchRun } from '../admission/helpers.ts';

const run = promisify(execFile);
const ns = uniqueName('e2e');
const group = 'vault.service.dev';
let vault: Vault;
/** The test's own view of the database (superuser), for checks the service has no reader for. */
let db: pg.Pool;
let dbUrl: string;
let signer: KeySigner;
let caPem: string;
let controller: RunningController;
let app: FastifyInstance;
let apiUrl: string;

const runs = () => kubeConfig('admin').makeApiClient(CustomObjectsApi);
const getRun = async (name: string) =>
  (await runs().getNamespacedCustomObject({
    group,
    version: 'v1',
    namespace: ns,
    plural: 'runs',
    name,
  })) as Run;

async function createSampleRun(name: string): Promise<Run> {
  const sample = parseYaml(await readFile(`${repoRoot}/manifests/samples/run.yaml`, 'utf8')) as Run;
  sample.metadata = { ...sample.metadata, name, namespace: ns };
  return (await runs().createNamespacedCustomObject({
    group,
    version: 'v1',
    namespace: ns,
    plural: 'runs',
    body: sample,
  })) as Run;
}

const aibomReady = (r: Run) => r.status?.conditions?.find((c) => c.type === 'AIBOMReady')?.status === 'True';

/** service-ctl against this file's API; an `env` entry set to undefined is removed. */
async function cli(args: string[], env: Record<string, string | undefined> = {}) {
  return run(process.execPath, [`${repoRoot}/src/bin/service-ctl.ts`, ...args], {
    env: serviceCtlEnv(apiUrl, stack().kube.tokens.admin, env),
  });
}

beforeAll(async () => {
  dbUrl = await freshDatabase('e2e');
  await migrate(dbUrl);
  vault = await openVault(createVaultPool(dbUrl));
  db = new pg.Pool({ connectionString: dbUrl, max: 2 });
  const pki = await generateDevPki();
  caPem = pki['ca.crt'];
  signer = signerFromPem(pki);
  await createNamespace(ns);
  controller = startTestController({
    vault,
    signer,
    leaseName: `e2e-${randomBytes(3).toString('hex')}`,
    watchNamespace: ns,
    // As src/bin/controller.ts runs it; here only on request (POST /v1/chain/checkpoint).
    checkpoints: { intervalMs: 3_600_000 },
  });
  app = await stackApp(vault, signer.caCertificates);
  await app.listen({ host: '127.0.0.1', port: 0 });
  apiUrl = `http://127.0.0.1:${(app.server.address() as AddressInfo).port}`;
});

afterAll(async () => {
  await controller?.stop();
  await app?.close();
  await vault?.close();
  await db?.end();
});

describe('a Run driven to Succeeded', () => {
  let done: Run;
  let runId: string;

  beforeAll(async () => {
    const created = await createSampleRun('ok');
    runId = created.metadata.uid;
    await driveRun(kubeConfig('admin'), ns, 'ok');
    done = await waitFor('AIBOMReady', async () => {
      const r = await getRun('ok');
      return aibomReady(r) ? r : undefined;
    });
  });

  it('has its AIBOM record on status.artifacts.aibom with every field of the spec table', () => {
    const meta = done.status?.artifacts?.aibom as Record<string, unknown>;
    for (const f of [
      'kind',
      'run_id',
      'status',
      'trust_subjects',
      'attestation_ids',
      'summary',
      'c2pa_manifest',
      'signature',
    ]) {
      expect(meta, f).toHaveProperty(f);
    }
    expect(meta).toMatchObject({ kind: 'aibom', run_id: runId, status: 'succeeded' });
    expect(meta.summary).toEqual({ models: 1, tools: 2, guardrails: 4, policy_pack: 'baseline' });
    expect(meta.signature).toMatchObject({ algorithm: 'ECDSA_P256_SHA256', key_id: signer.keyId });
    expect(meta.transparency).toBeUndefined();
    expect(done.status?.conditions?.find((c) => c.type === 'Attested')).toMatchObject({ status: 'True' });
  });

  it('stored the AIBOM, its C2PA sidecar and the metadata beside it in the S3-compatible store, and the record in Postgres', async () => {
    const meta = done.status?.artifacts?.aibom as {
      key: string;
      digest: string;
      c2pa_manifest: { key: string };
    };
    const blobs = stackBlobs();
    const bytes = (await blobs.get(meta.key))!;
    expect(`sha256:${createHash('sha256').update(bytes).digest('hex')}`).toBe(meta.digest);
    const stat = await blobs.stat(meta.key);
    expect(stat?.metadata).toMatchObject({ kind: 'aibom', 'run-id': runId, status: 'succeeded' });
    expect(await blobs.get(meta.c2pa_manifest.key)).not.toBeNull();
    const beside = JSON.parse(
      (await blobs.get(meta.key.replace(/aibom\.json$/, 'aibom.meta.json')))!.toString('utf8'),
    ) as unknown;
    expect(beside).toEqual(done.status?.artifacts?.aibom);
    const { rows } = await db.query<{ n: string }>(`SELECT count(*) AS n FROM artifacts WHERE run_id = $1`, [
      runId,
    ]);
    expect(rows[0]!.n).toBe('1');
  });

  it('has an Attestation resource per vault record, owned by the Run, listed by kubectl', async () => {
    const { stdout } = await run(stack().tools.kubectl, [
      `--kubeconfig=${stack().kube.kubeconfigs.admin}`,
      'get',
      'attestations',
      '-n',
      ns,
      '-l',
      'vault.service.dev/run=ok',
      '-o',
      'json',
    ]);
    const items = (
      JSON.parse(stdout) as {
        items: { spec: { id: string; digest: string }; metadata: { ownerReferences: { uid: string }[] } }[];
      }
    ).items;
    const stored = await vault.attestations.query({ namespaces: [ns], runId }, { limit: 1000 });
    expect(items.map((i) => i.spec.id).sort()).toEqual(stored.items.map((a) => a.id).sort());
    // 3 capability + 3 step + 3 step output artifacts + 2 policy + 1 run + 1 aibom + 2 standard
    // views of the AIBOM + 1 AIBOM blob artifact
    expect(items).toHaveLength(16);
    for (const i of items) expect(i.metadata.ownerReferences[0]!.uid).toBe(runId);
    for (const a of stored.items) expect(envelopeDigest(a.envelope)).toBe(a.digest);
    const table = await run(stack().tools.kubectl, [
      `--kubeconfig=${stack().kube.kubeconfigs.admin}`,
      'get',
      'runs',
      '-n',
      ns,
      'ok',
    ]);
    expect(table.stdout).toMatch(/ok\s+Succeeded\s+True\s+AIBOMRecorded\s+16\s/);
  });

  it('serves the run detail with artifacts.aibom through the API and service-ctl get', async () => {
    const { stdout } = await cli(['get', '--run', runId]);
    const detail = JSON.parse(stdout) as {
      artifacts: { aibom: unknown };
      steps: { id: string; output?: unknown }[];
      phase: string;
    };
    expect(detail.phase).toBe('Succeeded');
    expect(detail.artifacts.aibom).toEqual(done.status?.artifacts?.aibom);
    // The final step (the last to finish; the sample pipeline runs them in order) references the BOM
    // inside its output.
    expect(detail.steps.at(-1)?.output).toMatchObject({
      value: expect.anything() as unknown,
      artifacts: { aibom: { $ref: '#/artifacts/aibom' } },
    });
    expect(detail.steps.at(-1)).not.toHaveProperty('artifacts');
  });

  it('regenerates the identical AIBOM with service-ctl aibom generate, and a valid CycloneDX 1.5 view', async () => {
    const meta = done.status?.artifacts?.aibom as { digest: string; key: string };
    const { stdout } = await cli(['aibom', 'generate', '--run', runId], { DATABASE_URL: dbUrl });
    const { canonicalJson } = await import('../../../src/attest/index.ts');
    const regenerated = Buffer.from(canonicalJson(JSON.parse(stdout)));
    expect(`sha256:${createHash('sha256').update(regenerated).digest('hex')}`).toBe(meta.digest);
    const cdx = await cli(['aibom', 'generate', '--run', runId, '--format', 'cyclonedx'], {
      DATABASE_URL: dbUrl,
    });
    expect(await validateCycloneDx(cdx.stdout)).toEqual([]);
    const unknown = await cli(['aibom', 'generate', '--run', '00000000-0000-4000-8000-000000000000'], {
      DATABASE_URL: dbUrl,
    }).catch((e: { code: number; stderr: string }) => e);
    expect(unknown).toMatchObject({ code: 1 });
    expect((unknown as { stderr: string }).stderr.trim().split('\n')).toHaveLength(1);
  });

  it('has a C2PA manifest c2pa-rs reports as Trusted, and Invalid after one changed byte', async () => {
    const meta = done.status?.artifacts?.aibom as { key: string; c2pa_manifest: { key: string } };
    const bytes = (await stackBlobs().get(meta.key))!;
    const store = (await stackBlobs().get(meta.c2pa_manifest.key))!;
    const read = async (asset: Buffer) =>
      (
        await Reader.fromManifestDataAndAsset(
          store,
          { buffer: asset, mimeType: 'application/json' },
          { trust: { trust_anchors: caPem }, verify: { verify_trust: true } },
        )
      ).json() as {
        validation_state: string;
        validation_results?: { activeManifest?: { failure: { code: string }[] } };
      };
    expect((await read(bytes)).validation_state).toBe('Trusted');
    const tampered = Buffer.from(bytes);
    tampered.writeUInt8(tampered.readUInt8(10) ^ 1, 10);
    const bad = await read(tampered);
    expect(bad.validation_state).toBe('Invalid');
    expect(bad.validation_results?.activeManifest?.failure.map((f) => f.code)).toContain(
      'assertion.dataHash.mismatch',
    );
  });

  it('downloads and verifies offline with service-ctl aibom fetch + verify --aibom', async () => {
    const dir = `${stack().root}/fetch-${runId}`;
    await cli(['aibom', 'fetch', '--run', runId, '--out', dir]);
    const anchor = `${stack().root}/e2e-ca.crt`;
    const { writeFile } = await import('node:fs/promises');
    await writeFile(anchor, caPem);
    const ok = await cli(['verify', '--aibom', dir, '--trust-anchor', anchor]);
    expect(ok.stdout).toContain('AIBOM verified');
    // What `keys fetch` saved serves as well (no --trust-anchor, no SERVICE_TRUST_ANCHOR).
    const trust = `${stack().root}/e2e-trust-${runId}`;
    await cli(['keys', 'fetch', '--out', trust]);
    const viaBundle = await cli(['verify', '--aibom', dir, '--trust-bundle', trust], {
      SERVICE_TRUST_ANCHOR: undefined,
    });
    expect(viaBundle.stdout).toContain('AIBOM verified');
    // A trust anchor file holding no certificate is refused before anything is checked.
    await writeFile(`${anchor}.txt`, 'not a certificate\n');
    const notPem = await cli(['verify', '--aibom', dir, '--trust-anchor', `${anchor}.txt`]).catch(
      (e: { code: number; stdout: string; stderr: string }) => e,
    );
    expect(notPem).toMatchObject({ code: 1, stdout: '' });
    expect((notPem as { stderr: string }).stderr).toContain('no PEM certificate');
    const { rows } = await db.query<{ action: string; manifest_digest: string }>(
      `SELECT action, manifest_digest FROM audit_log WHERE object LIKE $1`,
      [`%${runId}%`],
    );
    expect(rows.some((r) => r.action === 'artifact.download' && /^sha256:/.test(r.manifest_digest))).toBe(
      true,
    );
    // A different trust anchor: the same files no longer verify.
    await writeFile(anchor, (await generateDevPki())['ca.crt']);
    const bad = await cli(['verify', '--aibom', dir, '--trust-anchor', anchor]).catch(
      (e: { code: number; stdout: string }) => e,
    );
    expect(bad).toMatchObject({ code: 1 });
  });
});

describe('the finished Run after its AIBOM', () => {
  it('refuses a rewrite of spec.steps[0].tool.name and spec.policyPack.name; mirror, API and aibom generate keep the signed AIBOM', async () => {
    const done = await waitFor('AIBOMReady', async () => {
      const r = await getRun('ok');
      return aibomReady(r) ? r : undefined;
    });
    const runId = done.metadata.uid;
    const meta = done.status?.artifacts?.aibom as { digest: string };
    const spec = done.spec;
    expect(spec.steps[0]!.tool?.name).toBe('vector-search');
    for (const ops of [
      [{ op: 'replace', path: '/spec/steps/0/tool/name', value: 'wget' }],
      [{ op: 'replace', path: '/spec/policyPack/name', value: 'lenient' }],
    ]) {
      await expectRefused(patchRun(ns, 'ok', ops, { type: 'json' }), 'spec is immutable');
    }
    await expectRefused(
      patchRun(ns, 'ok', {
        spec: { policyPack: { name: 'lenient' }, steps: [{ id: 'retrieve', tool: { name: 'wget' } }] },
      }),
      'spec is immutable',
    );
    expect((await getRun('ok')).spec).toEqual(spec);
    // The mirror cannot be rewritten either, even by the runtime role the controller runs as.
    const changed = { ...done, spec: { ...spec, policyPack: { ...spec.policyPack!, name: 'lenient' } } };
    await expect(vault.runs.upsert(changed)).rejects.toMatchObject({ code: '23001' });
    expect((await vault.runs.get(runId))?.spec).toEqual(spec);
    // GET /v1/runs/{id} and aibom generate: still the run the AIBOM signed.
    const detail = JSON.parse((await cli(['get', '--run', runId])).stdout) as { spec: unknown };
    expect(detail.spec).toEqual(spec);
    const { stdout } = await cli(['aibom', 'generate', '--run', runId], { DATABASE_URL: dbUrl });
    const { canonicalJson } = await import('../../../src/attest/index.ts');
    const regenerated = Buffer.from(canonicalJson(JSON.parse(stdout)));
    expect(`sha256:${createHash('sha256').update(regenerated).digest('hex')}`).toBe(meta.digest);
  });

  it("the controller signs a checkpoint of the run's records on request; service-ctl verify --chain holds", async () => {
    const res = await fetch(`${apiUrl}/v1/chain/checkpoint?wait=30`, {
      method: 'POST',
      headers: { authorization: `Bearer ${stack().kube.tokens.admin}` },
    });
    expect(res.status).toBe(200);
    const checkpoint = (await res.json()) as { tree_size: number };
    const { rows } = await db.query<{ n: string }>('SELECT count(*) AS n FROM attestations');
    expect(checkpoint.tree_size).toBeGreaterThanOrEqual(10);
    expect(checkpoint.tree_size).toBeLessThanOrEqual(Number(rows[0]!.n));
    const { writeFile } = await import('node:fs/promises');
    const key = `${stack().root}/e2e-signer-${ns}.pem`;
    await writeFile(key, signer.publicKey.export({ type: 'spki', format: 'pem' }));
    const verified = await cli(['verify', '--chain', '--key', key]);
    expect(verified.stdout).toContain('chain verified');
  });
});

describe('a Run driven to Failed', () => {
  it('still gets an AIBOM, with status failed and the failing step attested', async () => {
    const created = await createSampleRun('broken');
    await driveRun(kubeConfig('admin'), ns, 'broken', { fail: 'summarise' });
    const done = await waitFor('AIBOMReady', async () => {
      const r = await getRun('broken');
      return aibomReady(r) ? r : undefined;
    });
    expect(done.status?.artifacts?.aibom).toMatchObject({ status: 'failed', run_id: created.metadata.uid });
    const steps = await vault.attestations.query({
      namespaces: [ns],
      runId: created.metadata.uid,
      kind: 'step',
    });
    expect(steps.items.map((s) => s.stepId)).toEqual(['retrieve', 'summarise']);
  });
});

describe('deleting a Run', () => {
  it('is held by the finalizer until recorded, then the Run and its Attestations go', async () => {
    await createSampleRun('gone');
    // Deletion is held once the controller has seen the Run and added its finalizer.
    await waitFor('finalizer', async () =>
      ((await getRun('gone')).metadata.finalizers ?? []).includes('vault.service.dev/aibom')
        ? true
        : undefined,
    );
    await driveRun(kubeConfig('admin'), ns, 'gone');
    await runs().deleteNamespacedCustomObject({
      group,
      version: 'v1',
      namespace: ns,
      plural: 'runs',
      name: 'gone',
    });
    await waitFor('deletion', async () => {
      try {
        await getRun('gone');
        return undefined;
      } catch {
        return true;
      }
    });
    const { rows } = await db.query<{ n: string }>(
      `SELECT count(*) AS n FROM artifacts a JOIN runs r ON r.id = a.run_id WHERE r.name = 'gone' AND r.namespace = $1`,
      [ns],
    );
    expect(rows[0]!.n).toBe('1');
    // Garbage collection by the real kube-controller-manager removes the owned Attestations.
    await waitFor('attestation GC', async () => {
      const list = (await runs().listNamespacedCustomObject({
        group,
        version: 'v1',
        namespace: ns,
        plural: 'attestations',
        labelSelector: 'vault.service.dev/run=gone',
      })) as { items: unknown[] };
      return list.items.length === 0 ? true : undefined;
    });
    await kubeConfig('admin').makeApiClient(CoreV1Api).readNamespace({ name: ns });
  });
});
