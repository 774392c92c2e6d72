import fc from 'fast-check';
import type { FastifyInstance } from 'fastify';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { readStream, verifyRecord } from '../../../src/attest/index.ts';
import { generateDevPki } from '../../../hack/dev-pki.ts';
import { signerFromPem, type KeySigner } from '../../../src/signing/index.ts';
import {
  createVaultPool,
  migrate,
  openVault,
  type StoredAttestation,
  type Vault,
} from '../../../src/vault/index.ts';
import { stackApp } from '../../helpers/app.ts';
import { bindUser, createNamespace } from '../../helpers/rbac.ts';
import { runRecords } from '../../helpers/records.ts';
import { freshDatabase, stack, uniqueName } from '../../helpers/stack.ts';

let app: FastifyInstance;
let vault: Vault;
let signer: KeySigner;
const nsA = uniqueName('api-a');
const nsB = uniqueName('api-b');
let runA: { runId: string; stored: StoredAttestation[] };
let runB: { runId: string; stored: StoredAttestation[] };
const token = (u: 'admin' | 'alice' | 'bob') => ({ authorization: `Bearer ${stack().kube.tokens[u]}` });

beforeAll(async () => {
  const url = await freshDatabase('api');
  await migrate(url);
  vault = await openVault(createVaultPool(url));
  signer = signerFromPem(await generateDevPki());
  await Promise.all([createNamespace(nsA), createNamespace(nsB)]);
  // alice may read namespace A only; bob has no grants at all.
  await bindUser('alice', 'aibom-vault-viewer', nsA);
  const a = runRecords(signer, nsA);
  const b = runRecords(signer, nsB, { pack: { name: 'strict', version: '2.0.0' } });
  runA = { runId: a.runId, stored: await vault.attestations.append(a.records) };
  runB = { runId: b.runId, stored: await vault.attestations.append(b.records) };
  app = await stackApp(vault, []);
});

afterAll(async () => {
  await app?.close();
  await vault?.close();
});

const query = (body: unknown, headers: Record<string, string> = token('admin')) =>
  app.inject({ method: 'POST', url: '/v1/attestations/query', headers, payload: body as object });

describe('GET /v1/attestations/{id}', () => {
  it('returns the envelope with the spec fields, and it verifies offline', async () => {
    const rec = runA.stored[1]!;
    const res = await app.inject({ url: `/v1/attestations/${rec.id}`, headers: token('admin') });
    expect(res.statusCode).toBe(200);
    const body = res.json<Record<string, unknown>>();
    for (const f of [
      'predicate_type',
      'predicate',
      'c2pa_manifest_ref',
      'transparency',
      'subject',
      'signature',
      'digest',
      'envelope',
    ]) {
      expect(body, f).toHaveProperty(f);
    }
    expect(body.id).toBe(rec.id);
    expect(body.predicate_type).toBe('https://vault.service.dev/attestations/step/v1');
    expect((body.predicate as { stepId: string }).stepId).toBe('summarise');
    expect(body.signature).toMatchObject({ algorithm: 'ECDSA_P256_SHA256', key_id: signer.keyId });
    const verdict = verifyRecord(body, { publicKeys: [signer.publicKey] });
    expect(verdict.problems).toEqual([]);
    expect(verdict.ok).toBe(true);
  });

  it('exposes the capability chain of a capability attestation (recorded without a root or grant row)', async () => {
    const res = await app.inject({ url: `/v1/attestations/${runA.stored[0]!.id}`, headers: token('admin') });
    expect(res.json<{ capability_chain: unknown }>().capability_chain).toEqual([
      {
        capability: runA.stored[0]!.subjects[0],
        step: `step:${runA.runId}:summarise`,
        root: null,
        links: [{ scope: 'model:invoke', granted_by: 'team:lead', approved_by: 'user:security' }],
        scope: 'model:invoke',
        granted_by: 'team:lead',
        approved_by: 'user:security',
      },
    ]);
  });

  it('401 without a token or with a bad one, as problem+json', async () => {
    const none = await app.inject({ url: `/v1/attestations/${runA.stored[0]!.id}` });
    expect(none.statusCode).toBe(401);
    expect(none.headers['content-type']).toContain('application/problem+json');
    expect(none.headers['www-authenticate']).toContain('Bearer');
    expect(none.json()).toMatchObject({ status: 401, code: 'UNAUTHENTICATED' });
    const bad = await app.inject({
      url: `/v1/attestations/${runA.stored[0]!.id}`,
      headers: { authorization: 'Bearer not-a-real-token' },
    });
    expect(bad.statusCode).toBe(401);
  });

  it('lets alice read her namespace, and answers 404 (not 403) outside it', async () => {
    expect(
      (await app.inject({ url: `/v1/attestations/${runA.stored[0]!.id}`, headers: token('alice') }))
        .statusCode,
    ).toBe(200);
    const other = await app.inject({
      url: `/v1/attestations/${runB.stored[0]!.id}`,
      headers: token('alice'),
    });
    expect(other.statusCode).toBe(404);
    expect(other.json()).toMatchObject({ code: 'NOT_FOUND' });
    expect(
      (await app.inject({ url: `/v1/attestations/${runA.stored[0]!.id}`, headers: token('bob') })).statusCode,
    ).toBe(404);
  });

  it('answers concurrent GETs (read in shared batches) each with its own record, status and caller', async () => {
    const unknown = '0190a5c8-1234-7abc-8def-0123456789ab';
    const cases = [
      ...runA.stored.map((r) => ({ id: r.id, who: 'alice' as const, status: 200 })),
      ...runB.stored.map((r) => ({ id: r.id, who: 'alice' as const, status: 404 })),
      ...runB.stored.map((r) => ({ id: r.id.toUpperCase(), who: 'admin' as const, status: 200 })),
      { id: unknown, who: 'admin' as const, status: 404 },
      { id: runA.stored[0]!.id, who: 'bob' as const, status: 404 },
    ];
    // Issued in one tick: the loader puts them in the same batches.
    const responses = await Promise.all(
      [...cases, ...cases].map((c) => app.inject({ url: `/v1/attestations/${c.id}`, headers: token(c.who) })),
    );
    for (const [i, res] of responses.entries()) {
      const c = cases[i % cases.length]!;
      expect(res.statusCode, `${c.who} ${c.id}`).toBe(c.status);
      if (c.status === 200) {
        const body = res.json<{ id: string; digest: string }>();
        expect(body.id).toBe(c.id.toLowerCase());
        const stored = [...runA.stored, ...runB.stored].find((r) => r.id === body.id)!;
        expect(body.digest).toBe(stored.digest);
        expect(verifyRecord(body, { publicKeys: [signer.publicKey] }).ok).toBe(true);
      }
    }
  });

  it('400 for malformed or non-v7 ids, 404 for an unknown v7 id', async () => {
    for (const id of ['nope', '0190a5c8-1234-4abc-8def-0123456789ab', `${runA.stored[0]!.id}x`]) {
      const res = await app.inject({ url: `/v1/attestations/${id}`, headers: token('admin') });
      expect(res.statusCode, id).toBe(400);
      expect(res.json<{ errors: { pointer: string }[] }>().errors[0]!.pointer).toBe('/params/id');
    }
    const unknown = await app.inject({
      url: '/v1/attestations/0190a5c8-1234-7abc-8def-0123456789ab',
      headers: token('admin'),
    });
    expect(unknown.statusCode).toBe(404);
  });
});

describe('POST /v1/attestations/query', () => {
  const ids = (res: { json: <T>() => T }) => res.json<{ items: { id: string }[] }>().items.map((i) => i.id);

  it('filters by run, subject, step, policy pack (+version), capability token, kind and time window', async () => {
    const [cap, step, policy] = runA.stored;
    expect(ids(await query({ run_id: runA.runId }))).toEqual(runA.stored.map((r) => r.id));
    expect(ids(await query({ subject: `step:${runA.runId}:summarise` }))).toEqual([step!.id]);
    expect(ids(await query({ run_id: runA.runId, step_id: 'summarise' }))).toEqual([cap!.id, step!.id]);
    expect(ids(await query({ policy_pack: { name: 'strict' } }))).toEqual(runB.stored.map((r) => r.id));
    expect(ids(await query({ policy_pack: { name: 'strict', version: '9.9.9' } }))).toEqual([]);
    expect(ids(await query({ capability_token: `capability:${runA.runId}:summarise:0` }))).toEqual([
      cap!.id,
      step!.id,
    ]);
    expect(ids(await query({ kind: 'policy', run_id: runA.runId }))).toEqual([policy!.id]);
    const all = [...runA.stored, ...runB.stored];
    const t = all[3]!.createdAt;
    const windowed = ids(
      await query({ from: t.toISOString(), to: new Date(t.getTime() + 60_000).toISOString() }),
    );
    expect(windowed).toEqual(all.filter((r) => r.createdAt >= t).map((r) => r.id));
    expect(ids(await query({ to: new Date(all[0]!.createdAt.getTime() - 1000).toISOString() }))).toEqual([]);
  });

  it('pages with an opaque cursor', async () => {
    const first = await query({ limit: 4 });
    expect(first.statusCode).toBe(200);
    const p1 = first.json<{ items: { id: string }[]; next_cursor: string }>();
    expect(p1.items).toHaveLength(4);
    expect(p1.next_cursor).toEqual(expect.any(String));
    const p2 = (await query({ limit: 4, cursor: p1.next_cursor })).json<{
      items: { id: string }[];
      next_cursor: null;
    }>();
    expect(p2.items).toHaveLength(2);
    expect(p2.next_cursor).toBeNull();
    expect([...p1.items, ...p2.items].map((i) => i.id)).toEqual(
      [...runA.stored, ...runB.stored].map((r) => r.id),
    );
  });

  it('returns only namespaces the caller may list, and says how many were left out', async () => {
    const res = await query({}, token('alice'));
    expect(res.statusCode).toBe(200);
    const body = res.json<{ items: { namespace: string }[]; excluded_namespace_count: number }>();
    expect(new Set(body.items.map((i) => i.namespace))).toEqual(new Set([nsA]));
    expect(body.excluded_namespace_count).toBe(1);
    const bob = (await query({ namespaces: [nsA] }, token('bob'))).json<{
      items: unknown[];
      excluded_namespace_count: number;
    }>();
    expect(bob.items).toEqual([]);
    expect(bob.excluded_namespace_count).toBe(1);
  });

  it('streams NDJSON, one envelope per line, then the trailer', async () => {
    const res = await app.inject({
      method: 'POST',
      url: '/v1/attestations/query',
      headers: { ...token('admin'), accept: 'application/x-ndjson' },
      payload: {},
    });
    expect(res.statusCode).toBe(200);
    expect(res.headers['content-type']).toContain('application/x-ndjson');
    const lines = readStream(res.body) as { id: string }[];
    expect(lines.map((l) => l.id)).toEqual([...runA.stored, ...runB.stored].map((r) => r.id));
  });

  it.each([
    [{ bogus: 1 }, '/body/bogus'],
    [{ limit: 5000 }, '/body/limit'],
    [{ limit: '10' }, '/body/limit'],
    [{ from: 'yesterday' }, '/body/from'],
    [{ from: '2026-02-01T00:00:00Z', to: '2026-01-01T00:00:00Z' }, '/body/from'],
    [{ cursor: 'forged' }, '/body/cursor'],
    [{ run_id: 'not-a-uuid' }, '/body/run_id'],
    [{ policy_pack: { version: '1' } }, '/body/policy_pack/name'],
  ])('400 with a pointer for %j', async (body, pointer) => {
    const res = await query(body);
    expect(res.statusCode).toBe(400);
    expect(res.headers['content-type']).toContain('application/problem+json');
    expect(res.json<{ errors: { pointer: string }[] }>().errors.map((e) => e.pointer)).toContain(pointer);
  });

  it('rejects a cursor made for another filter', async () => {
    const p1 = (await query({ limit: 1 })).json<{ next_cursor: string }>();
    const res = await query({ limit: 1, cursor: p1.next_cursor, kind: 'step' });
    expect(res.statusCode).toBe(400);
    expect(res.json()).toMatchObject({ code: 'CURSOR_INVALID' });
  });

  it('415 for a body that is not JSON', async () => {
    const res = await app.inject({
      method: 'POST',
      url: '/v1/attestations/query',
      headers: { ...token('admin'), 'content-type': 'text/plain' },
      payload: 'run_id=1',
    });
    expect(res.statusCode).toBe(415);
    expect(res.json()).toMatchObject({ code: 'UNSUPPORTED_MEDIA_TYPE' });
  });

  it('never answers 500 or leaks a stack trace for random JSON', async () => {
    await fc.assert(
      fc.asyncProperty(fc.jsonValue(), async (value) => {
        const res = await app.inject({
          method: 'POST',
          url: '/v1/attestations/query',
          headers: { ...token('admin'), 'content-type': 'application/json' },
          payload: JSON.stringify(value),
        });
        expect(res.statusCode).toBeLessThan(500);
        expect(res.body).not.toMatch(/\bat .+\.(ts|js):\d+/);
      }),
      { numRuns: 200 },
    );
  });
});

describe('open routes', () => {
  it('serves OpenAPI without a token and documents the routes', async () => {
    const res = await app.inject({ url: '/v1/openapi.json' });
    expect(res.statusCode).toBe(200);
    const doc = res.json<{ openapi: string; paths: Record<string, unknown> }>();
    expect(doc.openapi).toBe('3.1.0');
    expect(Object.keys(doc.paths)).toEqual(
      expect.arrayContaining(['/v1/attestations/{id}', '/v1/attestations/query']),
    );
  });
});
