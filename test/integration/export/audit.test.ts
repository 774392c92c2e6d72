/**
 * What the audit log says about what left the service (spec export rule 3, issue 22 items 8 and
 * 13), on the real stack: two tenants' runs with AIBOMs recorded as the controller records them
 * (PostgreSQL, MinIO), exported together through the API, downloaded one by one, and exported as
 * evidence. Every artifact that leaves has a row with its manifest digest(s) and the attestation
 * ids; a namespace's rows name only that namespace's records, manifests and counts; export ids are
 * unique and say nothing.
 */
import { createHash } from 'node:crypto';
import type { AddressInfo } from 'node:net';
import type { FastifyInstance } from 'fastify';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { generateDevPki } from '../../../hack/dev-pki.ts';
import type { Run, RunSpec } from '../../../src/crd/run.ts';
import { signerFromPem, type KeySigner } from '../../../src/signing/index.ts';
import type { AuditRecord } from '../../../src/vault/index.ts';
import { stackApp } from '../../helpers/app.ts';
import { tarEntries } from '../../helpers/export.ts';
import { recordedRun } from '../../helpers/recorded-run.ts';
import { stack, uniqueName } from '../../helpers/stack.ts';
import { attestation, setupVault, type TestVault } from '../vault/helpers.ts';

const nsA = uniqueName('audit-rows-a');
const nsB = uniqueName('audit-rows-b');
const nsBig = uniqueName('audit-rows-big');
const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/;
const spec: RunSpec = {
  policyPack: { name: 'baseline', version: '1' },
  steps: [
    {
      id: 'ask',
      model: { name: 'm', provider: 'p', version: '1', temperature: 0 },
      capabilities: [{ scope: 'model:invoke', grantedBy: 'team:lead', approvedBy: 'user:security' }],
    },
    { id: 'act', dependsOn: ['ask'], tool: { name: 't', command: ['t'] } },
  ],
};

let t: TestVault;
let signer: KeySigner;
let app: FastifyInstance;
let url: string;
const runs: Record<string, Run> = {};
/** Per namespace: its AIBOM's manifest digest and the ids the manifest links. */
const manifests: Record<string, { digest: string; ids: string[]; key: string }> = {};

const admin = () => ({ authorization: `Bearer ${stack().kube.tokens.admin}` });

async function exportBundle(body: object): Promise<Buffer> {
  const res = await fetch(`${url}/v1/attestations/export`, {
    method: 'POST',
    headers: { ...admin(), 'content-type': 'application/json' },
    body: JSON.stringify(body),
  });
  const bytes = Buffer.from(await res.arrayBuffer());
  expect(res.status, bytes.toString('utf8', 0, 300)).toBe(200);
  return bytes;
}

/** Every audit row written since `after` (the vault's own list, as GET /v1/audit reads it). */
async function rowsAfter(after: number): Promise<AuditRecord[]> {
  return t.vault.audit.list({ namespaces: null, after, limit: 1000 });
}

const lastRowId = async (): Promise<number> => {
  const all = await t.vault.audit.list({ namespaces: null, limit: 1000 });
  return all.at(-1)?.id ?? 0;
};

/** The exported records of each namespace, and the bundle manifest digest, from the tar itself. */
async function contents(bundle: Buffer): Promise<{ ids: Record<string, string[]>; bundleManifest: string }> {
  const entries = await tarEntries(bundle);
  const ids: Record<string, string[]> = {};
  for (const e of entries) {
    if (!e.path.endsWith('/envelope.json')) continue;
    const view = JSON.parse(e.content.toString('utf8')) as { id: string; namespace: string };
    (ids[view.namespace] ??= []).push(view.id);
  }
  const manifest = entries.find((e) => e.path === 'bundle.c2pa')!.content;
  return { ids, bundleManifest: `sha256:${createHash('sha256').update(manifest).digest('hex')}` };
}

beforeAll(async () => {
  t = await setupVault('export_audit');
  signer = signerFromPem(await generateDevPki());
  for (const ns of [nsA, nsB]) {
    const run = await recordedRun(t.vault, signer, ns, 'audited', spec);
    runs[ns] = run;
    const artifact = (await t.vault.artifacts.get(run.metadata.uid, 'aibom'))!;
    const meta = artifact.metadata as { c2pa_manifest: { digest: string }; attestation_ids: string[] };
    manifests[ns] = { digest: meta.c2pa_manifest.digest, ids: meta.attestation_ids, key: artifact.objectKey };
  }
  // More records than one segment holds (1000), with no AIBOM: the bundle rows follow the segments.
  for (let b = 0; b < 2; b++) {
    await t.vault.attestations.append(Array.from({ length: 700 }, () => attestation({ namespace: nsBig })));
  }
  app = await stackApp(t.vault, signer.caCertificates, { signer });
  await app.listen({ host: '127.0.0.1', port: 0 });
  url = `http://127.0.0.1:${(app.server.address() as AddressInfo).port}`;
}, 300_000);

afterAll(async () => {
  await app?.close();
  await t?.close();
});

describe('audit rows of an export spanning two tenants', () => {
  let rows: AuditRecord[];
  let exported: Awaited<ReturnType<typeof contents>>;

  beforeAll(async () => {
    const after = await lastRowId();
    exported = await contents(await exportBundle({ namespaces: [nsA, nsB] }));
    rows = await rowsAfter(after);
    expect(Object.keys(exported.ids).sort()).toEqual([nsA, nsB].sort());
  });

  it("names, in each namespace's rows, only that namespace's records, manifests and counts", () => {
    for (const ns of [nsA, nsB]) {
      const other = ns === nsA ? nsB : nsA;
      const mine = rows.filter((r) => r.namespace === ns);
      expect(mine.length).toBeGreaterThan(0);
      for (const r of mine) {
        const text = JSON.stringify(r);
        // No id, manifest digest or object of the other tenant, anywhere in the row.
        for (const id of exported.ids[other]!) expect(text, r.action).not.toContain(id);
        expect(text, r.action).not.toContain(manifests[other]!.digest);
        expect(text, r.action).not.toContain(runs[other]!.metadata.uid);
        for (const id of r.attestationIds ?? []) expect(exported.ids[ns], r.action).toContain(id);
      }
      const segment = mine.filter((r) => r.action === 'attestations.export');
      expect(segment.flatMap((r) => r.attestationIds).sort()).toEqual([...exported.ids[ns]!].sort());
      expect(segment.flatMap((r) => (r.details as { manifest_digests: string[] }).manifest_digests)).toEqual([
        manifests[ns]!.digest,
      ]);
      // The bundle rows count this namespace's records only, and carry no whole-bundle figures.
      const bundle = mine.filter((r) => r.action === 'attestations.export.bundle');
      expect(bundle.length).toBeGreaterThan(0);
      for (const r of bundle) {
        const d = r.details as Record<string, unknown>;
        expect(d.attestations).toBe(r.attestationIds!.length);
        expect(d).not.toHaveProperty('index_digest');
        expect(d).not.toHaveProperty('bytes');
      }
      expect(bundle.reduce((n, r) => n + (r.details as { attestations: number }).attestations, 0)).toBe(
        exported.ids[ns]!.length,
      );
    }
  });

  it('gives every artifact that left one row with its manifest digest and the attestation ids', () => {
    // The bundle: every exported id is on a row with the bundle manifest's digest.
    const bundle = rows.filter((r) => r.action === 'attestations.export.bundle');
    for (const r of bundle) expect(r.manifestDigest).toBe(exported.bundleManifest);
    expect(bundle.flatMap((r) => r.attestationIds).sort()).toEqual(
      [...exported.ids[nsA]!, ...exported.ids[nsB]!].sort(),
    );
    // Each AIBOM in it: its own row, as a download writes it.
    for (const ns of [nsA, nsB]) {
      const artifact = rows.filter((r) => r.action === 'attestations.export.artifact' && r.namespace === ns);
      expect(artifact).toHaveLength(1);
      expect(artifact[0]).toMatchObject({
        object: manifests[ns]!.key,
        manifestDigest: manifests[ns]!.digest,
        attestationIds: manifests[ns]!.ids,
      });
    }
  });

  it('identifies the export by an id that is unique and tells nothing (not a request counter)', async () => {
    const ids = new Set(rows.map((r) => (r.details as { export_id: string }).export_id));
    expect(ids.size).toBe(1);
    const [first] = [...ids];
    expect(first).toMatch(UUID);
    const after = await lastRowId();
    await exportBundle({ namespaces: [nsA] });
    const again = new Set(
      (await rowsAfter(after)).map((r) => (r.details as { export_id: string }).export_id),
    );
    expect(again.size).toBe(1);
    expect([...again][0]).toMatch(UUID);
    expect(again.has(first!)).toBe(false);
  });
});

describe('audit rows of other ways out', () => {
  it('an export of more records than one segment: one bundle row per segment row, with the same ids', async () => {
    const after = await lastRowId();
    const exported = await contents(await exportBundle({ namespaces: [nsBig] }));
    const rows = await rowsAfter(after);
    const segments = rows.filter((r) => r.action === 'attestations.export');
    const bundle = rows.filter((r) => r.action === 'attestations.export.bundle');
    expect(segments.length).toBe(2);
    expect(bundle.map((r) => r.attestationIds)).toEqual(segments.map((r) => r.attestationIds));
    expect(bundle.every((r) => r.manifestDigest === exported.bundleManifest)).toBe(true);
    expect(bundle.flatMap((r) => r.attestationIds).sort()).toEqual([...exported.ids[nsBig]!].sort());
  });

  it('downloading the AIBOM and its manifest each writes a row with the manifest digest and the ids', async () => {
    const run = runs[nsA]!.metadata.uid;
    for (const [path, action] of [
      [`/v1/runs/${run}/artifacts/aibom`, 'artifact.download'],
      [`/v1/runs/${run}/artifacts/aibom/manifest`, 'artifact.manifest'],
    ] as const) {
      const after = await lastRowId();
      const res = await fetch(`${url}${path}`, { headers: admin() });
      expect(res.status, path).toBe(200);
      await res.arrayBuffer();
      const rows = await rowsAfter(after);
      expect(rows, path).toHaveLength(1);
      expect(rows[0]).toMatchObject({
        action,
        namespace: nsA,
        object: manifests[nsA]!.key,
        manifestDigest: manifests[nsA]!.digest,
        attestationIds: manifests[nsA]!.ids,
      });
    }
  });

  it('the evidence export: the same rows, under artifact.evidence', async () => {
    const run = runs[nsB]!.metadata.uid;
    const after = await lastRowId();
    const res = await fetch(`${url}/v1/runs/${run}/artifacts/aibom/evidence`, { headers: admin() });
    expect(res.status).toBe(200);
    const exported = await contents(Buffer.from(await res.arrayBuffer()));
    const rows = await rowsAfter(after);
    expect(rows.every((r) => r.namespace === nsB)).toBe(true);
    expect(rows.filter((r) => r.action === 'artifact.evidence.artifact')).toMatchObject([
      { manifestDigest: manifests[nsB]!.digest, attestationIds: manifests[nsB]!.ids },
    ]);
    const bundle = rows.filter((r) => r.action === 'artifact.evidence.bundle');
    expect(bundle.flatMap((r) => r.attestationIds).sort()).toEqual([...exported.ids[nsB]!].sort());
    expect(bundle.every((r) => r.manifestDigest === exported.bundleManifest)).toBe(true);
  });
});
