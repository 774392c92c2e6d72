/**
 * Manifest repair (issue 10, item 4): "download requests lacking a manifest are blocked until the
 * signer produces one" must end. On the real stack (kube-apiserver, PostgreSQL, MinIO), with the
 * controller in-process and the API listening: an AIBOM whose C2PA manifest object is deleted, or
 * byte-flipped, answers 409 UNSIGNED_EXPORT_BLOCKED with a Retry-After from the queued repair; the
 * controller (which holds the runtime signer) signs a new manifest over the same bytes; the download
 * then succeeds and `service-ctl verify --aibom` passes on what it fetches. The Run shows the repair
 * (AIBOMReady=False ManifestRepairing, then True), the earlier manifest is kept, and the audit log has
 * both. Bytes that no longer match the record are never signed: that repair fails, and says so.
 */
import { execFile } from 'node:child_process';
import { mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import type { FastifyInstance } from 'fastify';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { generateDevPki } from '../../../hack/dev-pki.ts';
import { driveRun } from '../../../hack/sample-pipeline.ts';
import { repoRoot } from '../../../hack/stack/stack.ts';
import type { Condition, Run } from '../../../src/crd/run.ts';
import type { RunningController } from '../../../src/controller/manager.ts';
import { startTestController } from '../../helpers/controller.ts';
import { RUN_TYPE } from '../../../src/controller/run/kube-api.ts';
import { kubeClient, resourcePath } from '../../../src/kube/index.ts';
import type { AibomMetadata } from '../../../src/recorder/index.ts';
import { signerFromPem, type KeySigner } from '../../../src/signing/index.ts';
import { createVaultPool, migrate, openVault, type Vault } from '../../../src/vault/index.ts';
import { stackApp } from '../../helpers/app.ts';
import { S3Client } from '../../../src/blob/store.ts';
import { stackBlobs } from '../../helpers/blobs.ts';
import {
  conditionOf,
  createRun,
  eventsOf,
  getRun,
  poll,
  sampleRunSpec,
  sha256Digest,
} from '../../helpers/controller-process.ts';
import { createNamespace } from '../../helpers/rbac.ts';
import { freshDatabase, kubeConfig, kubeAccess, stack, uniqueName } from '../../helpers/stack.ts';

const exec = promisify(execFile);
const ns = uniqueName('repair');
let vault: Vault;
let db: pg.Pool;
let signer: KeySigner;
let caFile: string;
let tmp: string;
let controller: RunningController;
let app: FastifyInstance;
let apiUrl: string;
const token = () => stack().kube.tokens.admin;

function s3(): S3Client {
  const e = stack().env;
  return new S3Client({ endpoint: e.S3_ENDPOINT!, accessKey: e.S3_ACCESS_KEY!, secretKey: e.S3_SECRET_KEY! });
}
const bucket = () => stack().env.S3_BUCKET!;

const api = (path: string) =>
  fetch(`${apiUrl}${path}`, {
    headers: { authorization: `Bearer ${token()}` },
    signal: AbortSignal.timeout(60_000),
  });

async function cli(args: string[]) {
  return exec(process.execPath, [`${repoRoot}/src/bin/service-ctl.ts`, ...args], {
    env: { ...process.env, SERVICE_API_URL: apiUrl, SERVICE_TOKEN: token() },
  });
}

beforeAll(async () => {
  const url = await freshDatabase('repair');
  await migrate(url);
  vault = await openVault(createVaultPool(url));
  db = new pg.Pool({ connectionString: url, max: 2 });
  const pki = await generateDevPki();
  signer = signerFromPem(pki);
  tmp = await mkdtemp(join(tmpdir(), 'repair-'));
  caFile = join(tmp, 'ca.crt');
  await writeFile(caFile, pki['ca.crt']);
  await createNamespace(ns);
  controller = startTestController({
    vault,
    signer,
    leasePrefix: 'repair',
    watchNamespace: ns,
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
  if (tmp) await rm(tmp, { recursive: true, force: true });
});

const ready = (c: Condition | undefined) => c?.status === 'True' && c.reason === 'AIBOMRecorded';

/** A sample Run driven to its AIBOM. */
async function recorded(name: string): Promise<Run> {
  await createRun(ns, name, await sampleRunSpec());
  await driveRun(kubeConfig('admin'), ns, name, { stepDelayMs: 20 });
  return poll(async () => {
    const r = await getRun(ns, name);
    return ready(conditionOf(r, 'AIBOMReady')) ? r : undefined;
  }, `${name}: AIBOMReady`);
}

/**
 * Every AIBOMReady condition the Run goes through from now on (a watch on the Run: each status
 * write is an event), until `stop()`.
 */
function watchAibomReady(name: string): { seen: Condition[]; stop: () => void } {
  const seen: Condition[] = [];
  const abort = new AbortController();
  void kubeClient(kubeAccess('admin'))
    .stream(
      {
        path: resourcePath(RUN_TYPE, { namespace: ns }),
        query: { watch: true, fieldSelector: `metadata.name=${name}` },
        signal: abort.signal,
      },
      (event) => {
        const c = conditionOf((event as { object: Run }).object, 'AIBOMReady');
        if (c && (seen.length === 0 || JSON.stringify(seen.at(-1)) !== JSON.stringify(c))) seen.push(c);
      },
    )
    .catch(() => undefined);
  return { seen, stop: () => abort.abort() };
}

async function expectBlocked(res: Response): Promise<{ retryAfter: number | null; detail: string }> {
  expect(res.status).toBe(409);
  const body = (await res.json()) as { code: string; detail: string };
  expect(body.code).toBe('UNSIGNED_EXPORT_BLOCKED');
  const ra = res.headers.get('retry-after');
  return { retryAfter: ra === null ? null : Number(ra), detail: body.detail };
}

async function auditOf(object: string): Promise<{ action: string; manifest_digest: string | null }[]> {
  const { rows } = await db.query<{ action: string; manifest_digest: string | null }>(
    'SELECT action, manifest_digest FROM audit_log WHERE object = $1 ORDER BY id',
    [object],
  );
  return rows;
}

/** What a download and `service-ctl aibom fetch` + `verify --aibom` give once repaired. */
async function expectRepairedAndVerified(run: Run, oldDigest: string): Promise<string> {
  const path = `/v1/runs/${run.metadata.uid}/artifacts/aibom`;
  const res = await poll(async () => {
    const r = await api(path);
    return r.status === 200 ? r : undefined;
  }, 'the download to succeed once the manifest is repaired');
  const meta = run.status!.artifacts!.aibom as AibomMetadata;
  expect(sha256Digest(Buffer.from(await res.arrayBuffer()))).toBe(meta.digest);
  const newDigest = res.headers.get('x-c2pa-manifest-digest')!;
  expect(newDigest).toMatch(/^sha256:[0-9a-f]{64}$/);
  expect(newDigest).not.toBe(oldDigest);
  const dir = join(tmp, run.metadata.name);
  await cli(['aibom', 'fetch', '--run', run.metadata.uid, '--out', dir]);
  const verified = await cli(['verify', '--aibom', dir, '--trust-anchor', caFile]);
  expect(verified.stdout).toMatch(/c2pa/);
  const fetched = JSON.parse(await readFile(join(dir, 'aibom.meta.json'), 'utf8')) as AibomMetadata;
  expect(fetched.c2pa_manifest.digest).toBe(newDigest);
  return newDigest;
}

describe('a deleted C2PA manifest', () => {
  it('409 with Retry-After from the queued repair, then the controller re-signs the same bytes; the download and verify --aibom pass', async () => {
    const run = await recorded('deleted');
    const meta = run.status!.artifacts!.aibom as AibomMetadata;
    const oldManifest = meta.c2pa_manifest;
    await s3().deleteObject(bucket(), oldManifest.key);

    const watch = watchAibomReady('deleted');
    // Concurrent downloads open one request.
    const answers = await Promise.all(
      Array.from({ length: 4 }, () => api(`/v1/runs/${run.metadata.uid}/artifacts/aibom`)),
    );
    const blocked = await Promise.all(answers.map(expectBlocked));
    for (const b of blocked) {
      expect(b.retryAfter).toBeGreaterThanOrEqual(1);
      expect(b.detail).toMatch(/no C2PA manifest is stored .*re-signing requested: repair [0-9a-f-]{36}/);
    }
    const repairs = await db.query<{ id: string; reason: string; replaces_digest: string }>(
      'SELECT id, reason, replaces_digest FROM manifest_repairs WHERE run_id = $1',
      [run.metadata.uid],
    );
    expect(repairs.rows).toHaveLength(1);
    expect(repairs.rows[0]).toMatchObject({ reason: 'missing', replaces_digest: oldManifest.digest });
    expect(blocked[0]!.detail).toContain(repairs.rows[0]!.id);

    const newDigest = await expectRepairedAndVerified(run, oldManifest.digest);

    // The Run showed the repair, then the AIBOM ready again with the new manifest.
    const after = await poll(async () => {
      const r = await getRun(ns, 'deleted');
      const shown = (r.status?.artifacts?.aibom as AibomMetadata).c2pa_manifest.digest;
      return ready(conditionOf(r, 'AIBOMReady')) && shown === newDigest ? r : undefined;
    }, 'the Run to show the repaired manifest');
    expect(conditionOf(after, 'AIBOMReady')!.message).toMatch(
      /re-signed over the same bytes .* found missing/,
    );
    watch.stop();
    expect(watch.seen.map((c) => `${c.status}/${c.reason}`)).toContain('False/ManifestRepairing');
    expect(watch.seen.at(-1)).toMatchObject({ status: 'True', reason: 'AIBOMRecorded' });
    const events = await eventsOf(ns, run.metadata.uid);
    expect(events.find((e) => e.reason === 'ManifestRepaired')?.message).toContain(newDigest);

    // Both manifests in the audit log (the one found missing, the one that replaced it), then the download.
    const audit = await auditOf(meta.key);
    expect(audit.map((a) => a.action)).toEqual(
      expect.arrayContaining(['manifest.repair.requested', 'manifest.repair.completed', 'artifact.download']),
    );
    expect(audit.find((a) => a.action === 'manifest.repair.requested')!.manifest_digest).toBe(
      oldManifest.digest,
    );
    expect(audit.find((a) => a.action === 'manifest.repair.completed')!.manifest_digest).toBe(newDigest);
    expect(audit.filter((a) => a.action === 'artifact.download').at(-1)!.manifest_digest).toBe(newDigest);

    // The earlier record is kept (immutable), the bucket's metadata names the new manifest and lists
    // the one it replaced.
    const row = await db.query<{ metadata: AibomMetadata }>(
      `SELECT metadata FROM artifacts WHERE run_id = $1 AND kind = 'aibom'`,
      [run.metadata.uid],
    );
    expect(row.rows[0]!.metadata.c2pa_manifest.digest).toBe(oldManifest.digest);
    const beside = JSON.parse(
      (await stackBlobs().get(meta.key.replace(/aibom\.json$/, 'aibom.meta.json')))!.toString('utf8'),
    ) as AibomMetadata & { c2pa_manifest_history: { digest: string; reason: string }[] };
    expect(beside.c2pa_manifest.digest).toBe(newDigest);
    expect(beside.c2pa_manifest_history).toEqual([
      expect.objectContaining({ digest: oldManifest.digest, reason: 'missing' }),
    ]);
    // Later downloads use the new manifest and open nothing.
    expect((await api(`/v1/runs/${run.metadata.uid}/artifacts/aibom`)).status).toBe(200);
    expect(
      (await db.query('SELECT 1 FROM manifest_repairs WHERE run_id = $1', [run.metadata.uid])).rowCount,
    ).toBe(1);
  });
});

describe('a byte-flipped C2PA manifest', () => {
  it('is invalid: 409, then re-signed; the corrupted object is kept beside the new one', async () => {
    const run = await recorded('flipped');
    const meta = run.status!.artifacts!.aibom as AibomMetadata;
    const blobs = stackBlobs();
    const original = (await blobs.get(meta.c2pa_manifest.key))!;
    const flipped = Buffer.from(original);
    const at = flipped.length - 10;
    flipped.writeUInt8(flipped.readUInt8(at) ^ 0x01, at);
    await blobs.put(meta.c2pa_manifest.key, flipped, 'application/c2pa');

    const b = await expectBlocked(await api(`/v1/runs/${run.metadata.uid}/artifacts/aibom/manifest`));
    expect(b.retryAfter).toBeGreaterThanOrEqual(1);
    const newDigest = await expectRepairedAndVerified(run, meta.c2pa_manifest.digest);
    const repair = await db.query<{ reason: string; manifest_key: string }>(
      'SELECT reason, manifest_key FROM manifest_repairs WHERE run_id = $1',
      [run.metadata.uid],
    );
    expect(repair.rows).toEqual([expect.objectContaining({ reason: 'invalid' })]);
    expect(repair.rows[0]!.manifest_key).not.toBe(meta.c2pa_manifest.key);
    expect((await blobs.get(meta.c2pa_manifest.key))!.equals(flipped)).toBe(true);
    expect(sha256Digest((await blobs.get(repair.rows[0]!.manifest_key))!)).toBe(newDigest);
  });
});

describe('AIBOM bytes that no longer match the record', () => {
  it('are never served nor re-signed: refused (ARTIFACT_NOT_AS_RECORDED) until the recorded bytes, rebuilt from the vault, are back', async () => {
    const run = await recorded('altered');
    const meta = run.status!.artifacts!.aibom as AibomMetadata;
    const blobs = stackBlobs();
    const bytes = (await blobs.get(meta.key))!;
    const altered = Buffer.from(bytes.toString('utf8').replace('"succeeded"', '"succeedeD"'));
    await blobs.put(meta.key, altered, 'application/json');
    const manifestBefore = meta.c2pa_manifest.digest;

    const first = await api(`/v1/runs/${run.metadata.uid}/artifacts/aibom`);
    expect(first.status).toBe(409);
    const body = (await first.json()) as { code: string; detail: string };
    expect(body.code).toBe('ARTIFACT_NOT_AS_RECORDED');
    expect(body.detail).toMatch(/hash to sha256:.* not to the sha256:.* the vault recorded/);
    expect(Number(first.headers.get('retry-after'))).toBeGreaterThanOrEqual(1);
    const restored = await poll(async () => {
      const res = await api(`/v1/runs/${run.metadata.uid}/artifacts/aibom`);
      return res.status === 200 ? Buffer.from(await res.arrayBuffer()) : undefined;
    }, 'the download once the recorded bytes are back');
    expect(sha256Digest(restored)).toBe(meta.digest);
    expect(sha256Digest((await blobs.get(meta.key))!)).toBe(meta.digest);
    // The altered bytes were never signed: the manifest in force covers the recorded bytes.
    // The bytes are put back before the new manifest and the status are written: wait for the status.
    const now = await poll(async () => {
      const r = await getRun(ns, 'altered');
      const m = r.status?.artifacts?.aibom as AibomMetadata | undefined;
      return ready(conditionOf(r, 'AIBOMReady')) && m?.c2pa_manifest.digest !== manifestBefore
        ? r
        : undefined;
    }, 'AIBOMReady=True with a manifest signed again after the repair');
    const current = now.status!.artifacts!.aibom as AibomMetadata;
    expect(current.digest).toBe(meta.digest);
    expect(current.c2pa_manifest.digest).not.toBe(manifestBefore);
    const rows = await db.query<{ state: string }>('SELECT state FROM manifest_repairs WHERE run_id = $1', [
      run.metadata.uid,
    ]);
    expect(rows.rows).toEqual([{ state: 'done' }]);
  });
});
