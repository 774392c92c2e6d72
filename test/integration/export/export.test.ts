/**
 * Export bundles end to end on the real stack: a controller with SERVICE_TRANSPARENCY_WRITER=1 and
 * the local log records a Succeeded and a Failed Run; the API exports them; `service-ctl verify`
 * checks every entry offline against the CA from the key-distribution endpoint; independent tools
 * check the formats inside (cosign for every Sigstore bundle, c2pa-rs for the AIBOM and bundle
 * manifests); one changed byte anywhere is named; API and CLI bytes are identical; a tenant with
 * only get/list verifies its records from the key-distribution endpoint alone.
 */
import { execFile } from 'node:child_process';
import { createHash, randomUUID } from 'node:crypto';
import { mkdir, readFile, readdir, writeFile } from 'node:fs/promises';
import type { AddressInfo } from 'node:net';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { Reader } from '@contentauth/c2pa-node';
import { CustomObjectsApi } from '@kubernetes/client-node';
import type { FastifyInstance } from 'fastify';
import { pino } from 'pino';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { generateDevPki } from '../../../hack/dev-pki.ts';
import { driveRun } from '../../../hack/sample-pipeline.ts';
import { repoRoot } from '../../../hack/stack/stack.ts';
import type { Run } from '../../../src/crd/run.ts';
import type { RunningController } from '../../../src/controller/manager.ts';
import { startTestController } from '../../helpers/controller.ts';
import { decodeKeySet } from '../../../src/cose/key.ts';
import { signerFromPem, type KeySigner } from '../../../src/signing/index.ts';
import { verifyReceipt } from '../../../src/transparency/receipt.ts';
import { setupTransparency, type Transparency } from '../../../src/transparency/setup.ts';
import { createVaultPool, migrate, openVault, type Vault } from '../../../src/vault/index.ts';
import { stackApp } from '../../helpers/app.ts';
import { stackBlobs } from '../../helpers/blobs.ts';
import { splitBundle, tarEntries } from '../../helpers/export.ts';
import { bindUser, createNamespace } from '../../helpers/rbac.ts';
import { runRecords } from '../../helpers/records.ts';
import { freshDatabase, kubeConfig, stack, uniqueName } from '../../helpers/stack.ts';
import { waitFor } from '../../helpers/wait.ts';

const exec = promisify(execFile);
const ns = uniqueName('export');
const group = 'vault.service.dev';
const quiet = pino({ level: 'silent' });

let vault: Vault;
let signer: KeySigner;
let transparency: Transparency;
let app: FastifyInstance;
let url: string;
let controller: RunningController;
let dir: string;
const runIds: Record<string, string> = {};

const token = (user: 'admin' | 'alice' | 'bob' = 'admin') => stack().kube.tokens[user];

/** service-ctl as a child process; resolves with stdout/stderr and the exit code (never throws). */
async function cli(args: string[], user: 'admin' | 'alice' | 'bob' = 'admin') {
  return exec(process.execPath, [`${repoRoot}/src/bin/service-ctl.ts`, ...args], {
    env: { ...process.env, SERVICE_API_URL: url, SERVICE_TOKEN: token(user) },
    maxBuffer: 64 * 1024 * 1024,
  }).then(
    (r) => ({ code: 0, out: r.stdout, err: r.stderr }),
    (e: { code: number; stdout: string; stderr: string }) => ({ code: e.code, out: e.stdout, err: e.stderr }),
  );
}

async function exportViaApi(body: object, user: 'admin' | 'alice' | 'bob' = 'admin'): Promise<Response> {
  return fetch(`${url}/v1/attestations/export`, {
    method: 'POST',
    headers: { authorization: `Bearer ${token(user)}`, 'content-type': 'application/json' },
    body: JSON.stringify(body),
  });
}

async function createRun(name: string): Promise<void> {
  await kubeConfig('admin')
    .makeApiClient(CustomObjectsApi)
    .createNamespacedCustomObject({
      group,
      version: 'v1',
      namespace: ns,
      plural: 'runs',
      body: {
        apiVersion: `${group}/v1`,
        kind: 'Run',
        metadata: { name, namespace: ns },
        spec: {
          policyPack: { name: 'baseline', version: '1' },
          steps: [
            {
              id: 'ask',
              model: { name: 'm', provider: 'p', version: '1', temperature: 0 },
              capabilities: [{ scope: 'model:invoke', grantedBy: 'team:lead', approvedBy: 'user:security' }],
            },
            { id: 'act', dependsOn: ['ask'], tool: { name: 't', command: ['t'] } },
          ],
        },
      },
    });
}

const getRun = async (name: string) =>
  (await kubeConfig('admin')
    .makeApiClient(CustomObjectsApi)
    .getNamespacedCustomObject({ group, version: 'v1', namespace: ns, plural: 'runs', name })) as Run;

beforeAll(async () => {
  const dbUrl = await freshDatabase('export');
  await migrate(dbUrl);
  vault = await openVault(createVaultPool(dbUrl));
  signer = signerFromPem(await generateDevPki());
  transparency = setupTransparency({
    vault,
    signer,
    caCertificates: signer.caCertificates,
    logSigner: signer,
    issuer: 'urn:test:export',
    backend: 'local',
    logger: quiet,
  });
  app = await stackApp(vault, signer.caCertificates, { transparency, signer });
  await app.listen({ host: '127.0.0.1', port: 0 });
  url = `http://127.0.0.1:${(app.server.address() as AddressInfo).port}`;
  dir = join(stack().root, ns);
  await mkdir(dir, { recursive: true });
  await createNamespace(ns);
  await bindUser('alice', 'aibom-vault-viewer', ns);
  controller = startTestController({
    vault,
    signer,
    leasePrefix: 'export',
    watchNamespace: ns,
    transparency,
  });
  await createRun('good');
  await createRun('bad');
  await driveRun(kubeConfig('admin'), ns, 'good');
  await driveRun(kubeConfig('admin'), ns, 'bad', { fail: 'act' });
  for (const name of ['good', 'bad']) {
    const run = await waitFor(`${name}: AIBOM ready and every record published`, async () => {
      const r = await getRun(name);
      const ready = r.status?.conditions?.some((c) => c.type === 'AIBOMReady' && c.status === 'True');
      return ready && r.status?.transparency?.state === 'published' ? r : undefined;
    });
    runIds[name] = run.metadata.uid!;
  }
}, 300_000);

afterAll(async () => {
  const step = async (what: string, f: () => Promise<unknown> | undefined) => {
    const t0 = Date.now();
    await f();
    console.log(`afterAll: ${what} took ${Date.now() - t0} ms`);
  };
  await step('controller.stop', () => controller?.stop());
  await step('app.close', () => app?.close());
  await step('vault.close', () => vault?.close());
}, 120_000);

describe('POST /v1/attestations/export with SERVICE_TRANSPARENCY_WRITER=1 and the local log', () => {
  let bundle: Buffer;
  const file = () => join(dir, 'bundle.tar');

  it('is byte-identical through the API and through service-ctl, and verifies offline', async () => {
    const res = await exportViaApi({ namespaces: [ns] });
    expect(res.status).toBe(200);
    expect(res.headers.get('content-type')).toBe('application/x-tar');
    bundle = Buffer.from(await res.arrayBuffer());
    const viaCli = await cli(['attestation', 'export', '--namespace', ns, '--output', file()]);
    expect(viaCli, viaCli.err).toMatchObject({ code: 0 });
    expect((await readFile(file())).equals(bundle)).toBe(true);

    const keys = await cli(['keys', 'fetch', '--out', join(dir, 'trust')]);
    expect(keys, keys.err).toMatchObject({ code: 0 });
    const ok = await cli(['verify', file(), '--trust-anchor', join(dir, 'trust', 'ca.pem')]);
    expect(ok.out).toContain('bundle verified');
    expect(ok.code).toBe(0);
    // Workflow step (d) inside the bundle: who approved which step under which scope, per Run (the
    // capability record and its step record each carry the chain).
    for (const id of Object.values(runIds)) {
      expect(ok.out).toMatch(
        new RegExp(
          `CHAIN step:${id}:ask under model:invoke: model:invoke granted by team:lead, approved by user:security`,
        ),
      );
    }
    // Both runs, with their AIBOMs and every record's receipt.
    const entries = (await tarEntries(bundle)).map((e) => e.path);
    for (const id of Object.values(runIds)) expect(entries).toContain(`runs/${id}/aibom.c2pa`);
    const envelopes = entries.filter((p) => p.endsWith('/envelope.json'));
    expect(envelopes.length).toBeGreaterThanOrEqual(10);
    expect(entries.filter((p) => p.endsWith('/receipt.cose'))).toHaveLength(envelopes.length);

    // gzip on request: the same tar, compressed.
    const gz = await exportViaApi({ namespaces: [ns], gzip: true });
    expect(gz.headers.get('content-type')).toBe('application/gzip');
    const { gunzipSync } = await import('node:zlib');
    expect(gunzipSync(Buffer.from(await gz.arrayBuffer())).equals(bundle)).toBe(true);
  });

  it('holds Sigstore bundles that cosign verifies, each with the key from the key-distribution endpoint', async () => {
    const entries = await tarEntries(bundle);
    const keyDir = join(dir, 'trust', 'keys');
    const blob = join(dir, 'blob');
    await writeFile(blob, 'any');
    let checked = 0;
    for (const e of entries.filter((x) => x.path.endsWith('/sigstore.json'))) {
      const record = JSON.parse(
        entries.find((x) => x.path === e.path.replace('sigstore.json', 'envelope.json'))!.content.toString(),
      ) as { predicate_type: string; signature: { key_id: string } };
      const path = join(dir, 'sigstore.json');
      await writeFile(path, e.content);
      const run = await exec(
        stack().tools.cosign,
        [
          'verify-blob-attestation',
          '--bundle',
          path,
          '--key',
          join(keyDir, `${record.signature.key_id.slice(7)}.pem`),
          '--type',
          record.predicate_type,
          '--insecure-ignore-tlog=true',
          '--check-claims=false',
          blob,
        ],
        { env: { ...process.env, TUF_ROOT: join(dir, 'tuf') } },
      ).then(
        (r) => r.stdout + r.stderr,
        (err: { stdout: string; stderr: string }) => `FAILED ${err.stdout}${err.stderr}`,
      );
      expect(run, e.path).toContain('Verified OK');
      checked++;
    }
    expect(checked).toBeGreaterThanOrEqual(10);
  }, 300_000);

  it('holds C2PA manifests (each AIBOM and the bundle itself) that c2pa-rs reports Trusted', async () => {
    const ca = await readFile(join(dir, 'trust', 'ca.pem'), 'utf8');
    const read = async (manifest: Buffer, asset: Buffer, mimeType: string) =>
      (
        (
          await Reader.fromManifestDataAndAsset(
            manifest,
            { buffer: asset, mimeType },
            { trust: { trust_anchors: ca }, verify: { verify_trust: true } },
          )
        ).json() as { validation_state?: string }
      ).validation_state;
    const entries = await tarEntries(bundle);
    for (const id of Object.values(runIds)) {
      const bom = entries.find((e) => e.path === `runs/${id}/aibom.json`)!.content;
      const manifest = entries.find((e) => e.path === `runs/${id}/aibom.c2pa`)!.content;
      expect(await read(manifest, bom, 'application/json'), id).toBe('Trusted');
    }
    const { prefix, manifest } = await splitBundle(bundle);
    expect(await read(manifest, prefix, 'application/x-tar')).toBe('Trusted');
  });

  it('holds receipts that pass the RFC 9162 check with the log keys from the key-distribution endpoint', async () => {
    const logKeys = decodeKeySet(await readFile(join(dir, 'trust', 'log-keys.cbor')));
    const entries = await tarEntries(bundle);
    const receipts = entries.filter((e) => e.path.endsWith('/receipt.cose'));
    expect(receipts.length).toBeGreaterThanOrEqual(10);
    for (const r of receipts) {
      const statement = entries.find(
        (e) => e.path === r.path.replace('receipt.cose', 'statement.cose'),
      )!.content;
      const result = verifyReceipt({ receipt: r.content, statement, logKey: logKeys });
      expect(result.ok, r.path).toBe(true);
    }
  });

  it('fails on one changed byte in any entry, naming it', async () => {
    const entries = await tarEntries(bundle);
    const pick = (re: RegExp) => entries.find((e) => re.test(e.path))!;
    const targets = [
      pick(/envelope\.json$/),
      pick(/sigstore\.json$/),
      pick(/statement\.cose$/),
      pick(/receipt\.cose$/),
      pick(/aibom\.json$/),
      pick(/aibom\.c2pa$/),
      pick(/aibom\.meta\.json$/),
      pick(/^certs\//),
      pick(/^scitt\/log-keys\.cbor$/),
      pick(/^index\/000001\.json$/),
      pick(/\.intoto\.jsonl$/),
      pick(/^index\.json$/),
      pick(/^bundle\.c2pa$/),
    ];
    for (const t of targets) {
      const bad = Buffer.from(bundle);
      const at = t.offset + 512 + Math.floor(t.content.length / 2);
      bad[at] = bad[at]! ^ 0x04;
      const path = join(dir, 'bad.tar');
      await writeFile(path, bad);
      const res = await cli(['verify', path, '--trust-anchor', join(dir, 'trust', 'ca.pem')]);
      expect(res.code, t.path).toBe(1);
      expect(
        res.out
          .split('\n')
          .filter((l) => l.startsWith('FAIL'))
          .some((l) => l.includes(` ${t.path} `)),
        `${t.path}:\n${res.out}`,
      ).toBe(true);
    }
  }, 300_000);

  it('exports the evidence of one artifact with the same bytes through the route and service-ctl audit export', async () => {
    const id = runIds.good!;
    const res = await fetch(`${url}/v1/runs/${id}/artifacts/aibom/evidence`, {
      headers: { authorization: `Bearer ${token()}` },
    });
    expect(res.status).toBe(200);
    const route = Buffer.from(await res.arrayBuffer());
    const out = join(dir, 'evidence.tar');
    const viaCli = await cli(['audit', 'export', '--run', id, '--artifact', 'aibom', '--output', out]);
    expect(viaCli, viaCli.err).toMatchObject({ code: 0 });
    expect((await readFile(out)).equals(route)).toBe(true);
    const paths = (await tarEntries(route)).map((e) => e.path);
    expect(paths).toEqual(
      expect.arrayContaining([
        `runs/${id}/aibom.json`,
        `runs/${id}/aibom.c2pa`,
        `runs/${id}/aibom.meta.json`,
        `runs/${id}/aibom.cdx-1.7.json`,
        `runs/${id}/aibom.spdx-3.0.1.json`,
      ]),
    );
    // The capability chain (one capability record), the AIBOM attestation and its two standard
    // views' records, each with its receipt.
    expect(paths.filter((p) => p.endsWith('/envelope.json'))).toHaveLength(4);
    expect(paths.filter((p) => p.endsWith('/receipt.cose'))).toHaveLength(4);
    const ok = await cli(['verify', out, '--trust-anchor', join(dir, 'trust', 'ca.pem')]);
    expect(ok, ok.out).toMatchObject({ code: 0 });
    expect(ok.out).toContain(`CHAIN step:${id}:ask under model:invoke`);
    // `get --run` says how to get and check the rest.
    const get = await cli(['get', '--run', id]);
    expect(get.err).toContain(`service-ctl audit export --run ${id}`);
  });

  it('records every export in the audit log, readable by auditors only', async () => {
    await bindUser('bob', 'aibom-vault-auditor', ns);
    // Rows are written ahead of the bytes they cover: every export above is in the log already.
    const res = await fetch(`${url}/v1/audit?namespace=${ns}&limit=1000`, {
      headers: { authorization: `Bearer ${token('bob')}` },
    });
    const text = await res.text();
    expect(res.status, text).toBe(200);
    const page = JSON.parse(text) as { items: Record<string, unknown>[] };
    const bundles = page.items.filter((i) => i.action === 'attestations.export.bundle');
    expect(bundles.length).toBeGreaterThanOrEqual(3);
    expect(bundles[0]!.manifest_digest).toMatch(/^sha256:[0-9a-f]{64}$/);
    const segments = page.items.filter((i) => i.action === 'attestations.export');
    expect((segments[0]!.attestation_ids as string[]).length).toBeGreaterThanOrEqual(10);
    expect(page.items.some((i) => i.action === 'artifact.evidence.bundle')).toBe(true);
    // The same rows through service-ctl, as NDJSON.
    const log = await cli(
      ['audit', 'log', '--namespace', ns, '--action', 'attestations.export.bundle'],
      'bob',
    );
    expect(log, log.err).toMatchObject({ code: 0 });
    const rows = log.out
      .trim()
      .split('\n')
      .map((l) => JSON.parse(l) as { action: string; manifest_digest: string });
    expect(rows.length).toBe(bundles.length);
    expect(
      rows.every((r) => r.action === 'attestations.export.bundle' && r.manifest_digest.startsWith('sha256:')),
    ).toBe(true);
    // A viewer may read records but not the audit log.
    const viewer = await fetch(`${url}/v1/audit?namespace=${ns}`, {
      headers: { authorization: `Bearer ${token('alice')}` },
    });
    expect(viewer.status).toBe(403);
  });

  it('lets a tenant with only get/list verify its records using only the key-distribution endpoint', async () => {
    const trust = join(dir, 'tenant-trust');
    const fetched = await cli(['keys', 'fetch', '--out', trust], 'alice');
    expect(fetched, fetched.err).toMatchObject({ code: 0 });
    const records = await fetch(`${url}/v1/attestations/query`, {
      method: 'POST',
      headers: {
        authorization: `Bearer ${token('alice')}`,
        'content-type': 'application/json',
        accept: 'application/x-ndjson',
      },
      body: JSON.stringify({ namespaces: [ns] }),
    });
    expect(records.status).toBe(200);
    const ndjson = join(dir, 'tenant.ndjson');
    await writeFile(ndjson, await records.text());
    const [chain] = await readdir(join(trust, 'certs'));
    const ok = await cli(
      [
        'verify',
        ndjson,
        '--cert-chain',
        join(trust, 'certs', chain!),
        '--trust-anchor',
        join(trust, 'ca.pem'),
        '--log-keys',
        join(trust, 'log-keys.cbor'),
      ],
      'alice',
    );
    expect(ok, ok.out).toMatchObject({ code: 0 });
    expect(ok.out).toMatch(/\d+ verified, 0 failed/);
    // The records' cert_chain_ref resolves for the tenant, too.
    const first = JSON.parse((await readFile(ndjson, 'utf8')).split('\n')[0]!) as {
      signature: { cert_chain_ref: string; key_id: string };
    };
    const pem = await cli(['keys', 'get', first.signature.cert_chain_ref], 'alice');
    expect(pem.out).toContain('BEGIN CERTIFICATE');
    // So does its key id (the `kid` capability tokens will carry), to the same chain.
    const byKey = await cli(['keys', 'get', first.signature.key_id], 'alice');
    expect(byKey.out).toBe(pem.out);
    const unknown = await cli(['keys', 'get', `sha256:${'0'.repeat(64)}`], 'alice');
    expect(unknown).toMatchObject({ code: 1 });
    expect(unknown.err).toContain('NOT_FOUND');
    // Exporting needs create on attestations/export, which a viewer does not have.
    const denied = await exportViaApi({ namespaces: [ns] }, 'alice');
    expect(denied.status).toBe(403);
    await denied.arrayBuffer();
  });
});

describe('OpenAPI', () => {
  it('describes the export, evidence, key and audit routes with their schemas', async () => {
    const doc = (await (await fetch(`${url}/v1/openapi.json`)).json()) as {
      paths: Record<string, Record<string, { requestBody?: unknown; responses?: Record<string, unknown> }>>;
      components: { schemas: Record<string, unknown> };
    };
    expect(Object.keys(doc.paths)).toEqual(
      expect.arrayContaining([
        '/v1/attestations/export',
        '/v1/runs/{id}/artifacts/{kind}/evidence',
        '/v1/keys',
        '/v1/keys/ca.pem',
        '/v1/keys/{ref}',
        '/v1/audit',
      ]),
    );
    expect(Object.keys(doc.components.schemas)).toEqual(
      expect.arrayContaining(['ExportRequest', 'TrustBundle', 'KeyEntry', 'AuditPage']),
    );
    expect(Object.keys(doc.paths['/v1/attestations/export']!.post!.responses!)).toEqual(
      expect.arrayContaining(['200', '409', '413', '422']),
    );
  });
});

describe('bad input and limits', () => {
  it('answers unknown ids, empty selections, over-limit selections and unreadable namespaces clearly', async () => {
    const unknown = await exportViaApi({ ids: ['0190a5c8-0000-7000-8000-000000000001'] });
    expect(unknown.status).toBe(404);
    expect(((await unknown.json()) as { code: string }).code).toBe('NOT_FOUND');

    const empty = await exportViaApi({ namespaces: [ns], step_id: 'no-such-step' });
    expect(empty.status).toBe(422);
    expect(((await empty.json()) as { code: string }).code).toBe('EMPTY_SELECTION');

    const small = await stackApp(vault, signer.caCertificates, { transparency, signer, exportLimit: 2 });
    try {
      const over = await small.inject({
        method: 'POST',
        url: '/v1/attestations/export',
        headers: { authorization: `Bearer ${token()}` },
        payload: { namespaces: [ns] },
      });
      expect(over.statusCode).toBe(413);
      expect(over.json<{ code: string }>().code).toBe('EXPORT_TOO_LARGE');
    } finally {
      await small.close();
    }

    // bob (an auditor in ns only) names another namespace too: it is withheld, counted, not named.
    const other = uniqueName('export-other');
    await createNamespace(other);
    const mixed = await exportViaApi({ namespaces: [ns, other] }, 'bob');
    expect(mixed.status).toBe(200);
    expect(mixed.headers.get('x-export-withheld-namespaces')).toBe('1');
    const text = Buffer.from(await mixed.arrayBuffer());
    expect(text.includes(Buffer.from(other))).toBe(false);
    // Only the other namespace: nothing to export.
    const none = await exportViaApi({ namespaces: [other] }, 'bob');
    expect([403, 422]).toContain(none.status);
    await none.arrayBuffer();
  });

  it('blocks an export that would include an AIBOM without a valid signed manifest (409, Retry-After)', async () => {
    const guardNs = uniqueName('export-guard');
    const runId = randomUUID();
    const key = `runs/${guardNs}/${runId}/aibom.json`;
    // The bytes are the ones the vault records (else ARTIFACT_NOT_AS_RECORDED comes first): only
    // the signed manifest is missing.
    const bytes = Buffer.from('{}');
    await stackBlobs().put(key, bytes, 'application/json');
    await vault.claims.append(
      `aibom:${runId}`,
      [runRecords(signer, guardNs, { runId }).records[0]!].map((r) => ({ ...r, kind: 'aibom' as const })),
      {
        artifact: (inserted) => ({
          runId,
          kind: 'aibom',
          namespace: guardNs,
          objectKey: key,
          digest: `sha256:${createHash('sha256').update(bytes).digest('hex')}`,
          // No c2pa_manifest: the signer has not produced one.
          metadata: { key, aibom_attestation_id: inserted[0]!.id },
        }),
      },
    );
    const res = await exportViaApi({ namespaces: [guardNs] });
    expect(res.status).toBe(409);
    expect(res.headers.get('retry-after')).toMatch(/^\d+$/);
    expect(((await res.json()) as { code: string }).code).toBe('UNSIGNED_EXPORT_BLOCKED');
    // Without the AIBOM in the selection, the same namespace exports.
    await vault.attestations.append(runRecords(signer, guardNs).records);
    const capabilityOnly = await exportViaApi({ namespaces: [guardNs], kind: 'capability' });
    expect(capabilityOnly.status).toBe(200);
    await capabilityOnly.arrayBuffer();
  });

  it('enqueues SCITT postings for selected records that have none, with the job ids in the bundle', async () => {
    const scittNs = uniqueName('export-scitt');
    const stored = await vault.attestations.append(runRecords(signer, scittNs).records);
    const res = await exportViaApi({ namespaces: [scittNs], scitt: true });
    expect(res.status).toBe(200);
    const entries = await tarEntries(Buffer.from(await res.arrayBuffer()));
    const segment = JSON.parse(entries.find((e) => e.path === 'index/000001.json')!.content.toString()) as {
      scitt_enqueued: { attestation_id: string; job_id: string }[];
    };
    expect(segment.scitt_enqueued.map((j) => j.attestation_id).sort()).toEqual(
      stored.map((r) => r.id).sort(),
    );
    const jobs = await vault.transparencyJobs.getByAttestation(stored.map((r) => r.id));
    for (const j of segment.scitt_enqueued) {
      expect(jobs.get(j.attestation_id)?.id).toBe(j.job_id);
      const view = JSON.parse(
        entries.find((e) => e.path === `attestations/${j.attestation_id}/envelope.json`)!.content.toString(),
      ) as {
        transparency: { job_id: string };
      };
      expect(view.transparency.job_id).toBe(j.job_id);
    }
    // Exported again: nothing new to enqueue.
    const again = await tarEntries(
      Buffer.from(await (await exportViaApi({ namespaces: [scittNs], scitt: true })).arrayBuffer()),
    );
    expect(JSON.parse(again.find((e) => e.path === 'index/000001.json')!.content.toString())).toMatchObject({
      scitt_enqueued: [],
    });
  });

  it('leaves nothing half-written when the client goes away mid-stream', async () => {
    // Enough records that the bundle cannot all fit in the socket buffers before the client leaves.
    for (let i = 0; i < 20; i++) {
      await vault.attestations.append(
        Array.from({ length: 50 }, () => runRecords(signer, ns).records).flat(),
      );
    }
    const before = (await vault.audit.list({ namespaces: [ns], limit: 10_000 })).length;
    const controllerAbort = new AbortController();
    const res = await fetch(`${url}/v1/attestations/export`, {
      method: 'POST',
      headers: { authorization: `Bearer ${token()}`, 'content-type': 'application/json' },
      body: JSON.stringify({ namespaces: [ns] }),
      signal: controllerAbort.signal,
    });
    const reader = res.body!.getReader();
    await reader.read();
    controllerAbort.abort();
    await reader.cancel().catch(() => undefined);
    const rows = await waitFor('the export settles', async () => {
      const all = await vault.audit.list({ namespaces: [ns], limit: 10_000 });
      const mine = all.slice(before);
      return mine.some((r) => r.action.endsWith('.aborted') || r.action.endsWith('.bundle'))
        ? mine
        : undefined;
    });
    // Recorded as aborted: segments that left are in the log (written ahead), no bundle row.
    const actions = rows.map((r) => r.action);
    expect(actions).toContain('attestations.export.aborted');
    expect(actions).not.toContain('attestations.export.bundle');
    // The service keeps serving exports afterwards (read to the end: an unread body would keep the
    // stream, and the server's close, waiting on this client).
    const after = await exportViaApi({ namespaces: [ns] });
    expect(after.status).toBe(200);
    expect((await after.arrayBuffer()).byteLength).toBeGreaterThan(1024 * 1024);
  });
});
