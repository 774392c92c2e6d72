/**
 * Promises of the export and key routes a security review tried to break, against the real stack
 * (TokenReview and SubjectAccessReview by the API server, PostgreSQL, MinIO):
 * - `scitt: true` needs what `POST /v1/attestations/scitt` needs (`create` on attestations/scitt)
 *   in every namespace exported, refused before any job is enqueued;
 * - ids differing only in case are one record: the same selection gives the same bytes;
 * - no error quotes the request (404 of the export and of /v1/keys/{ref});
 * - the key routes refuse unknown query fields like every other route.
 */
import { randomUUID } from 'node:crypto';
import type { AddressInfo } from 'node:net';
import { RbacAuthorizationV1Api } from '@kubernetes/client-node';
import type { FastifyInstance } from 'fastify';
import { pino } from 'pino';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { generateDevPki } from '../../../hack/dev-pki.ts';
import { signerFromPem, type KeySigner } from '../../../src/signing/index.ts';
import { setupTransparency } from '../../../src/transparency/setup.ts';
import { createVaultPool, migrate, openVault, type Vault } from '../../../src/vault/index.ts';
import { stackApp } from '../../helpers/app.ts';
import { tarEntries } from '../../helpers/export.ts';
import { bindUser, createNamespace } from '../../helpers/rbac.ts';
import { runRecords } from '../../helpers/records.ts';
import { freshDatabase, kubeConfig, stack, uniqueName } from '../../helpers/stack.ts';

type User = 'admin' | 'alice' | 'bob';
const ns = uniqueName('review');
const exporterRole = uniqueName('export-without-scitt');
let vault: Vault;
let signer: KeySigner;
let app: FastifyInstance;
let url: string;
let ids: string[];

const auth = (user: User) => ({ authorization: `Bearer ${stack().kube.tokens[user]}` });

async function exportAs(user: User, body: object): Promise<Response> {
  return fetch(`${url}/v1/attestations/export`, {
    method: 'POST',
    headers: { ...auth(user), 'content-type': 'application/json' },
    body: JSON.stringify(body),
  });
}

beforeAll(async () => {
  const dbUrl = await freshDatabase('review');
  await migrate(dbUrl);
  vault = await openVault(createVaultPool(dbUrl));
  signer = signerFromPem(await generateDevPki());
  const transparency = setupTransparency({
    vault,
    signer,
    caCertificates: signer.caCertificates,
    logSigner: signer,
    issuer: 'urn:test:review',
    backend: 'local',
    logger: pino({ level: 'silent' }),
  });
  app = await stackApp(vault, signer.caCertificates, { transparency, signer });
  await app.listen({ host: '127.0.0.1', port: 0 });
  url = `http://127.0.0.1:${(app.server.address() as AddressInfo).port}`;
  await createNamespace(ns);
  // alice: read and export, but not publish (no attestations/scitt); bob: the auditor role (both).
  await kubeConfig('admin')
    .makeApiClient(RbacAuthorizationV1Api)
    .createClusterRole({
      body: {
        metadata: { name: exporterRole },
        rules: [
          { apiGroups: ['vault.service.dev'], resources: ['attestations'], verbs: ['get', 'list'] },
          { apiGroups: ['vault.service.dev'], resources: ['attestations/export'], verbs: ['create'] },
        ],
      },
    });
  await bindUser('alice', exporterRole, ns);
  await bindUser('bob', 'aibom-vault-auditor', ns);
  ids = (await vault.attestations.append(runRecords(signer, ns).records)).map((r) => r.id).sort();
}, 300_000);

afterAll(async () => {
  await app?.close();
  await vault?.close();
  await kubeConfig('admin')
    .makeApiClient(RbacAuthorizationV1Api)
    .deleteClusterRole({ name: exporterRole })
    .catch(() => undefined);
});

describe('POST /v1/attestations/export with scitt: true', () => {
  it('is refused (403, no namespace named) to a caller without create on attestations/scitt, before any job', async () => {
    for (const body of [
      { namespaces: [ns], scitt: true },
      { ids, scitt: true },
    ]) {
      const res = await exportAs('alice', body);
      expect(res.status).toBe(403);
      expect(res.headers.get('content-type')).toMatch(/^application\/problem\+json/);
      const problem = (await res.json()) as { code: string; detail: string };
      expect(problem.code).toBe('FORBIDDEN');
      expect(problem.detail).not.toContain(ns);
    }
    expect((await vault.transparencyJobs.getByAttestation(ids)).size).toBe(0);
    // The same export without scitt is hers to take.
    const plain = await exportAs('alice', { namespaces: [ns] });
    expect(plain.status).toBe(200);
    await plain.arrayBuffer();
    expect((await vault.transparencyJobs.getByAttestation(ids)).size).toBe(0);
  });

  it('enqueues the postings for a caller allowed to publish there', async () => {
    const res = await exportAs('bob', { namespaces: [ns], scitt: true });
    expect(res.status).toBe(200);
    const segment = (await tarEntries(Buffer.from(await res.arrayBuffer()))).find(
      (e) => e.path === 'index/000001.json',
    )!;
    const enqueued = (
      JSON.parse(segment.content.toString()) as { scitt_enqueued: { attestation_id: string }[] }
    ).scitt_enqueued;
    expect(enqueued.map((j) => j.attestation_id).sort()).toEqual(ids);
    expect((await vault.transparencyJobs.getByAttestation(ids)).size).toBe(ids.length);
  });
});

describe('explicit ids', () => {
  it('that differ only in case are one record: the same bytes as the id once', async () => {
    const id = ids[0]!;
    const once = Buffer.from(await (await exportAs('admin', { ids: [id] })).arrayBuffer());
    const res = await exportAs('admin', { ids: [id, id.toUpperCase()] });
    expect(res.status).toBe(200);
    const twice = Buffer.from(await res.arrayBuffer());
    const index = JSON.parse(
      (await tarEntries(twice)).find((e) => e.path === 'index.json')!.content.toString(),
    ) as { selection: { ids: string[] }; attestations: number };
    expect(index.selection.ids).toEqual([id]);
    expect(index.attestations).toBe(1);
    expect(twice.equals(once)).toBe(true);
  });

  it('unknown ones are answered 404 with a count, not the ids', async () => {
    const unknown = [randomUUID(), randomUUID()];
    const res = await exportAs('admin', { ids: [ids[0]!, ...unknown] });
    expect(res.status).toBe(404);
    const problem = (await res.json()) as { code: string; detail: string; errors: { pointer: string }[] };
    expect(problem.code).toBe('NOT_FOUND');
    expect(problem.detail).toBe('2 attestation id(s) not found among the records you may export');
    for (const id of unknown) expect(JSON.stringify(problem)).not.toContain(id);
    expect(problem.errors.map((e) => e.pointer).sort()).toEqual(['/body/ids/1', '/body/ids/2']);
  });
});

describe('key routes', () => {
  it('answer an unknown ref 404 without quoting it', async () => {
    const ref = `sha256:${'ab'.repeat(32)}`;
    const res = await fetch(`${url}/v1/keys/${ref}`, { headers: auth('alice') });
    expect(res.status).toBe(404);
    const text = await res.text();
    expect(text).not.toContain('ab'.repeat(32));
    expect((JSON.parse(text) as { code: string }).code).toBe('NOT_FOUND');
  });

  it('refuse unknown query fields like every other route (400 naming the field)', async () => {
    for (const path of ['/v1/keys', '/v1/keys/ca.pem', `/v1/keys/sha256:${'0'.repeat(64)}`]) {
      const res = await fetch(`${url}${path}?x=1`, { headers: auth('alice') });
      expect(res.status, path).toBe(400);
      const problem = (await res.json()) as { code: string; errors: { pointer: string }[] };
      expect(problem.code).toBe('VALIDATION_FAILED');
      expect(problem.errors.map((e) => e.pointer)).toEqual(['/querystring/x']);
    }
    expect((await fetch(`${url}/v1/keys/ca.pem`, { headers: auth('alice') })).status).toBe(200);
  });

  it('answer a 5000-character ref 414 (in the error table) without quoting it', async () => {
    const res = await fetch(`${url}/v1/keys/sha256:${'a'.repeat(5000)}`, { headers: auth('alice') });
    expect(res.status).toBe(414);
    expect(res.headers.get('content-type')).toMatch(/^application\/problem\+json/);
    const text = await res.text();
    expect((JSON.parse(text) as { code: string }).code).toBe('VALIDATION_FAILED');
    expect(text).not.toContain('a'.repeat(64));
  });
});
