/**
 * Every /v1 answer carries tenant data (or says something about it): `Cache-Control: no-store` and
 * `X-Content-Type-Options: nosniff` on JSON answers, problem+json errors, the AIBOM bytes and its
 * C2PA manifest, as on the UI's pages; a route's own deliberate caching (the UI's content-addressed
 * assets) is kept. Against the real stack: an AIBOM recorded as the controller records it (MinIO,
 * PostgreSQL), downloaded through the signed-export guard.
 */
import { randomUUID } from 'node:crypto';
import type { FastifyInstance, LightMyRequestResponse } from 'fastify';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { generateDevPki } from '../../../hack/dev-pki.ts';
import { signerFromPem, type KeySigner } from '../../../src/signing/index.ts';
import { createVaultPool, migrate, openVault, type Vault } from '../../../src/vault/index.ts';
import type { Run } from '../../../src/crd/run.ts';
import { stackApp } from '../../helpers/app.ts';
import { sampleRunSpec } from '../../helpers/controller-process.ts';
import { recordedRun } from '../../helpers/recorded-run.ts';
import { freshDatabase, stack, uniqueName } from '../../helpers/stack.ts';

let app: FastifyInstance;
let vault: Vault;
let signer: KeySigner;
let run: Run;
const ns = uniqueName('headers');
const admin = () => ({ authorization: `Bearer ${stack().kube.tokens.admin}` });

beforeAll(async () => {
  const url = await freshDatabase('headers');
  await migrate(url);
  vault = await openVault(createVaultPool(url));
  signer = signerFromPem(await generateDevPki());
  run = await recordedRun(vault, signer, ns, 'headers', await sampleRunSpec());
  app = await stackApp(vault, signer.caCertificates);
});

afterAll(async () => {
  await app?.close();
  await vault?.close();
});

const expectPrivate = (res: LightMyRequestResponse, what: string) => {
  expect(res.headers['cache-control'], what).toBe('no-store');
  expect(res.headers['x-content-type-options'], what).toBe('nosniff');
};

describe('/v1 answers are neither cached nor sniffed', () => {
  it('JSON answers, the AIBOM bytes and the C2PA manifest', async () => {
    const id = run.metadata.uid;
    for (const url of [
      '/v1/runs',
      `/v1/runs/${id}`,
      `/v1/namespaces/${ns}/runs/headers`,
      '/v1/keys',
      '/v1/audit',
      `/v1/runs/${id}/artifacts/aibom`,
      `/v1/runs/${id}/artifacts/aibom/manifest`,
    ]) {
      const res = await app.inject({ url, headers: admin() });
      expect(res.statusCode, url).toBe(200);
      expectPrivate(res, url);
    }
    const query = await app.inject({
      method: 'POST',
      url: '/v1/attestations/query',
      headers: admin(),
      payload: { namespaces: [ns] },
    });
    expect(query.statusCode).toBe(200);
    expect(query.json<{ items: unknown[] }>().items.length).toBeGreaterThan(0);
    expectPrivate(query, 'query');
  });

  it('errors: refused, not found, invalid, unauthenticated, no such route', async () => {
    for (const [url, headers, status] of [
      [`/v1/runs/${randomUUID()}`, admin(), 404],
      ['/v1/runs?limit=0', admin(), 400],
      ['/v1/runs', {}, 401],
      ['/v1/nothing-here', admin(), 404],
    ] as const) {
      const res = await app.inject({ url, headers });
      expect(res.statusCode, url).toBe(status);
      expect(res.headers['content-type'], url).toContain('application/problem+json');
      expectPrivate(res, url);
    }
  });

  it('a route that chose its caching keeps it: the UI assets stay immutable', async () => {
    const page = await app.inject({ url: '/ui/sign-in' });
    const asset = /(?:src|href)="(\/ui\/assets\/[^"]+)"/.exec(page.body)![1]!;
    const res = await app.inject({ url: asset });
    expect(res.statusCode).toBe(200);
    expect(res.headers['cache-control']).toContain('immutable');
    expect(res.headers['x-content-type-options']).toBe('nosniff');
  });
});

describe('a method a path does not take: 405 with Allow, not "no such route"', () => {
  it('DELETE, PUT and PATCH on the append-only records and the runs, PUT on the export', async () => {
    const id = run.metadata.uid;
    const record = (await vault.attestations.ofRun(ns, id))[0]!.id;
    for (const [method, url, allow] of [
      ['DELETE', `/v1/attestations/${record}`, 'GET, HEAD'],
      ['PUT', `/v1/attestations/${record}`, 'GET, HEAD'],
      ['PATCH', `/v1/runs/${id}`, 'GET, HEAD'],
      ['DELETE', `/v1/runs/${id}/`, 'GET, HEAD'],
      // The GET of `/v1/attestations/:id` takes this path too (and answers 400: no UUID).
      ['PUT', '/v1/attestations/export?x=1', 'GET, HEAD, POST'],
    ] as const) {
      const res = await app.inject({ method, url, headers: admin() });
      expect(res.statusCode, `${method} ${url}`).toBe(405);
      expect(res.headers.allow, `${method} ${url}`).toBe(allow);
      expect(res.headers['content-type']).toContain('application/problem+json');
      expect(res.json()).toMatchObject({ status: 405, code: 'METHOD_NOT_ALLOWED' });
      expectPrivate(res, url);
    }
    // Still 404 where no method is served, and 401 before anything for a caller without a token.
    expect(
      (await app.inject({ method: 'DELETE', url: '/v1/nothing-here', headers: admin() })).statusCode,
    ).toBe(404);
    expect((await app.inject({ method: 'DELETE', url: `/v1/runs/${id}` })).statusCode).toBe(401);
    // The UI's catch-all GET answers "no such page": it does not make every /ui path a GET path.
    expect((await app.inject({ method: 'POST', url: '/ui/no-such-page', headers: admin() })).statusCode).toBe(
      404,
    );
    // What is served is untouched.
    expect((await app.inject({ url: `/v1/attestations/${record}`, headers: admin() })).statusCode).toBe(200);
  });
});
