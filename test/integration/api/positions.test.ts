/**
 * Issue 28 item 4: a tenant learns nothing about the other tenants' records from its own. The vault
 * is one chain over every tenant's records: `seq` counts them all, `prev_digest` is the digest of
 * whatever record came before (another tenant's), `transparency.log_index` is the place in a log
 * everyone shares. On the real stack (kube-apiserver's SubjectAccessReview, PostgreSQL, MinIO, the
 * local transparency log): bob and alice write interleaved records; alice, a namespace viewer,
 * reads hers through every route a tenant reads records by (GET by id, the query as JSON and as
 * NDJSON, an export bundle) and sees none of those fields, while her bundle still verifies offline;
 * a reader who may also read the chain (cluster-wide `get` on attestations/chain, docs/chain.md
 * "Tenants"; the cluster admin here) sees them, and they are what they leak: alice's `prev_digest`
 * is bob's record's digest.
 */
import { execFile } from 'node:child_process';
import { mkdir, writeFile } from 'node:fs/promises';
import type { AddressInfo } from 'node:net';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { CoreV1Api, RbacAuthorizationV1Api } from '@kubernetes/client-node';
import type { FastifyInstance } from 'fastify';
import { pino } from 'pino';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { generateDevPki } from '../../../hack/dev-pki.ts';
import { repoRoot } from '../../../hack/stack/stack.ts';
import { signerFromPem, type KeySigner } from '../../../src/signing/index.ts';
import { setupTransparency, type Transparency } from '../../../src/transparency/setup.ts';
import {
  createVaultPool,
  migrate,
  openVault,
  type StoredAttestation,
  type Vault,
} from '../../../src/vault/index.ts';
import { stackApp } from '../../helpers/app.ts';
import { tarEntries } from '../../helpers/export.ts';
import { bindUser, createNamespace } from '../../helpers/rbac.ts';
import { runRecords } from '../../helpers/records.ts';
import { freshDatabase, kubeConfig, stack, uniqueName } from '../../helpers/stack.ts';

const exec = promisify(execFile);
const mine = uniqueName('positions-a');
const theirs = uniqueName('positions-b');
let vault: Vault;
let signer: KeySigner;
let transparency: Transparency;
let app: FastifyInstance;
let url: string;
let dir: string;
let verifierToken: string;
/** Alice's records and bob's, appended alternately: each of alice's follows one of bob's. */
const alices: StoredAttestation[] = [];
const bobs: StoredAttestation[] = [];

const token = (user: 'alice' | 'bob' | 'admin') => stack().kube.tokens[user];
const POSITIONS = ['seq', 'prev_digest'] as const;

/** A ServiceAccount bound cluster-wide to aibom-vault-chain-verifier, and its token. */
async function chainVerifierToken(): Promise<string> {
  const kc = kubeConfig('admin');
  const name = 'chain-verifier';
  await kc
    .makeApiClient(CoreV1Api)
    .createNamespacedServiceAccount({ namespace: mine, body: { metadata: { name } } });
  await kc.makeApiClient(RbacAuthorizationV1Api).createClusterRoleBinding({
    body: {
      metadata: { name: `${mine}-chain-verifier` },
      roleRef: {
        apiGroup: 'rbac.authorization.k8s.io',
        kind: 'ClusterRole',
        name: 'aibom-vault-chain-verifier',
      },
      subjects: [{ kind: 'ServiceAccount', name, namespace: mine }],
    },
  });
  const tr = await kc
    .makeApiClient(CoreV1Api)
    .createNamespacedServiceAccountToken({ name, namespace: mine, body: { spec: { audiences: [] } } });
  return tr.status!.token!;
}

const get = (path: string, bearer: string, init: RequestInit = {}) =>
  fetch(`${url}${path}`, {
    ...init,
    headers: { authorization: `Bearer ${bearer}`, ...(init.headers ?? {}) },
  });
const query = (bearer: string, body: object, accept = 'application/json') =>
  get('/v1/attestations/query', bearer, {
    method: 'POST',
    headers: { 'content-type': 'application/json', accept },
    body: JSON.stringify(body),
  });

beforeAll(async () => {
  const dbUrl = await freshDatabase('positions');
  await migrate(dbUrl);
  vault = await openVault(createVaultPool(dbUrl));
  signer = signerFromPem(await generateDevPki());
  transparency = setupTransparency({
    vault,
    signer,
    caCertificates: signer.caCertificates,
    logSigner: signer,
    issuer: 'urn:test:positions',
    backend: 'local',
    logger: pino({ level: 'silent' }),
  });
  await createNamespace(mine);
  await createNamespace(theirs);
  // An auditor of her namespace: she may also export it (and still reads as a tenant).
  await bindUser('alice', 'aibom-vault-auditor', mine);
  await bindUser('bob', 'aibom-vault-viewer', theirs);
  verifierToken = await chainVerifierToken();
  for (let i = 0; i < 2; i++) {
    for (const [ns, into] of [
      [theirs, bobs],
      [mine, alices],
    ] as const) {
      // One record per append: bob's, then alice's, so alice's prev_digest is bob's digest.
      for (const r of runRecords(signer, ns).records.slice(0, 2))
        into.push(...(await vault.attestations.append([r])));
    }
  }
  // Every record in the shared transparency log, so each has a log position.
  const jobs = await vault.transparencyJobs.enqueue([...alices, ...bobs].map((r) => r.id));
  for (const j of jobs) await transparency.publisher.publishNow(j.attestationId);
  app = await stackApp(vault, signer.caCertificates, { transparency, signer });
  await app.listen({ host: '127.0.0.1', port: 0 });
  url = `http://127.0.0.1:${(app.server.address() as AddressInfo).port}`;
  dir = join(stack().root, mine);
  await mkdir(dir, { recursive: true });
}, 120_000);

afterAll(async () => {
  await app?.close();
  await vault?.close();
});

type Record_ = Record<string, unknown> & { transparency: Record<string, unknown> | null };

function expectNoPositions(r: Record_, where: string): void {
  for (const f of POSITIONS) expect(r, `${where}: ${f}`).not.toHaveProperty(f);
  expect(r.transparency, `${where}: transparency`).not.toBeNull();
  expect(r.transparency, `${where}: transparency.log_index`).not.toHaveProperty('log_index');
  // What is hers stays: the receipt and its entry id prove inclusion without a position.
  expect(r.transparency!.status).toBe('published');
  expect(typeof r.transparency!.entry_id).toBe('string');
  expect(typeof r.transparency!.receipt).toBe('string');
}

describe("a tenant's records carry no vault-wide position (issue 28 item 4)", () => {
  it("a reader with the chain permission sees seq, prev_digest and log_index: the other tenant's digest before it", async () => {
    // The chain role alone reads no record (it sees positions and leaf hashes only); the cluster
    // admin may read alice's records and the chain, so it sees the positions.
    const target = alices[0]!;
    expect((await get(`/v1/attestations/${target.id}`, verifierToken)).status).toBe(404);
    const res = await get(`/v1/attestations/${target.id}`, token('admin'));
    expect(res.status).toBe(200);
    const r = (await res.json()) as Record_;
    expect(r.seq).toBe(target.seq);
    // Exactly what a tenant must not learn: bob's record, just before alice's.
    expect(r.prev_digest).toBe(bobs[1]!.digest);
    expect(typeof r.transparency!.log_index).toBe('number');
  });

  it('GET /v1/attestations/{id}: alice sees her record without them', async () => {
    for (const a of alices) {
      const res = await get(`/v1/attestations/${a.id}`, token('alice'));
      expect(res.status).toBe(200);
      const r = (await res.json()) as Record_;
      expect(r.id).toBe(a.id);
      expect(r.digest).toBe(a.digest);
      expectNoPositions(r, `GET ${a.id}`);
    }
  });

  it('POST /v1/attestations/query, JSON pages and NDJSON: without them', async () => {
    const page = (await (await query(token('alice'), { namespaces: [mine], limit: 2 })).json()) as {
      items: Record_[];
      next_cursor: string | null;
    };
    expect(page.items).toHaveLength(2);
    for (const r of page.items) expectNoPositions(r, 'query page');
    const ndjson = await (await query(token('alice'), { namespaces: [mine] }, 'application/x-ndjson')).text();
    const lines = ndjson
      .split('\n')
      .filter((l) => l.startsWith('{"'))
      .map((l) => JSON.parse(l) as Record_)
      .filter((l) => typeof l.id === 'string' && typeof l.digest === 'string');
    expect(lines.map((l) => l.id).sort()).toEqual(alices.map((a) => a.id).sort());
    for (const r of lines) expectNoPositions(r, 'NDJSON');
    // A chain reader's NDJSON of the same records does carry them (the fields exist to hide).
    const full = await (await query(token('admin'), { namespaces: [mine] }, 'application/x-ndjson')).text();
    expect(full).toContain(`"prev_digest":"${bobs[1]!.digest}"`);
  });

  it("alice's export bundle: without them, and it still verifies offline", async () => {
    const res = await get('/v1/attestations/export', token('alice'), {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ namespaces: [mine] }),
    });
    expect(res.status, await res.clone().text()).toBe(200);
    const bundle = Buffer.from(await res.arrayBuffer());
    const records = (await tarEntries(bundle))
      .filter((e) => e.path.endsWith('/envelope.json'))
      .map((e) => JSON.parse(e.content.toString()) as Record_);
    expect(records.map((r) => r.id).sort()).toEqual(alices.map((a) => a.id).sort());
    for (const r of records) expectNoPositions(r, `bundle ${String(r.id)}`);
    // No other tenant's digest anywhere in the bundle.
    for (const b of bobs) expect(bundle.includes(Buffer.from(b.digest))).toBe(false);

    const file = join(dir, 'alice.tar');
    await writeFile(file, bundle);
    const cli = (args: string[]) =>
      exec(process.execPath, [`${repoRoot}/src/bin/service-ctl.ts`, ...args], {
        env: { ...process.env, SERVICE_API_URL: url, SERVICE_TOKEN: token('alice') },
        maxBuffer: 64 * 1024 * 1024,
      }).then(
        (r) => ({ code: 0, out: r.stdout, err: r.stderr }),
        (e: { code: number; stdout: string; stderr: string }) => ({
          code: e.code,
          out: e.stdout,
          err: e.stderr,
        }),
      );
    const keys = await cli(['keys', 'fetch', '--out', join(dir, 'trust')]);
    expect(keys, keys.err).toMatchObject({ code: 0 });
    const ok = await cli(['verify', file, '--trust-anchor', join(dir, 'trust', 'ca.pem')]);
    expect(ok, `${ok.out}\n${ok.err}`).toMatchObject({ code: 0 });
    expect(ok.out).toContain('bundle verified');
  });

  it('GET /v1/chain/checkpoint (and its last_id) stays behind the chain permission', async () => {
    const res = await get('/v1/chain/checkpoint', token('alice'));
    expect(res.status).toBe(403);
    expect(await res.json()).toMatchObject({ code: 'FORBIDDEN' });
  });
});
