/**
 * Every /v1 answer carries tenant data (or says something about it): `Cache-Control: no-store` and
 * `X-Content-Type-Options: nosniff` on JSON answers, problem+json errors, the AIBOM bytes and its
 * C2PA manifest, as on the UI's pages; a route's own deliberate caching (the UI's content-addressed
 * assets) is kept. Against the real stack: an AIBOM recorded as the controller records it (MinIO,
 * PostgreSQL), downloaded through the signed-export guard.
 */
import { randomUUID } from 'node:crypto';
import type { FastifyInstance, LightMyRequestResponse } from 'fastify';
import { pino } from 'pino';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { generateDevPki } from '../../../hack/dev-pki.ts';
import { aibomRunOf } from '../../../src/aibom/index.ts';
import { isFinished, type Run, type StepStatus } from '../../../src/crd/run.ts';
import { recordAibom } from '../../../src/recorder/aibom.ts';
import { stepBatch, terminalBatch } from '../../../src/recorder/extract.ts';
import { appendOnce } from '../../../src/recorder/once.ts';
import { sealBatch } from '../../../src/recorder/seal.ts';
import { signerFromPem, type KeySigner } from '../../../src/signing/index.ts';
import { createVaultPool, migrate, openVault, type Vault } from '../../../src/vault/index.ts';
import { stackApp } from '../../helpers/app.ts';
import { stackBlobs } from '../../helpers/blobs.ts';
import { sampleRunSpec } from '../../helpers/controller-process.ts';
import { freshDatabase, stack, uniqueName } from '../../helpers/stack.ts';

let app: FastifyInstance;
let vault: Vault;
let signer: KeySigner;
let run: Run;
const ns = uniqueName('headers');
const admin = () => ({ authorization: `Bearer ${stack().kube.tokens.admin}` });

/** A Succeeded run, its step and terminal records, and its AIBOM, as the controller stores them. */
async function recordedRun(): Promise<Run> {
  const spec = await sampleRunSpec();
  const at = Date.parse('2026-03-01T10:00:00Z');
  const steps: StepStatus[] = spec.steps.map((s, i) => ({
    id: s.id,
    phase: 'Succeeded',
    startedAt: new Date(at + i * 1000).toISOString(),
    finishedAt: new Date(at + i * 1000 + 500).toISOString(),
    output: { result: s.id },
  }));
  const r: Run = {
    apiVersion: 'vault.service.dev/v1',
    kind: 'Run',
    metadata: { name: 'headers', namespace: ns, uid: randomUUID(), generation: 1 },
    spec,
    status: { phase: 'Succeeded', steps },
  };
  await vault.runs.upsert(r);
  for (const step of spec.steps) {
    const st = steps.find((s) => s.id === step.id);
    if (!isFinished(st)) continue;
    const b = stepBatch(r, step, st);
    await appendOnce(vault.claims, b.key, sealBatch(b.items, signer));
  }
  const t = terminalBatch(r, new Date());
  await appendOnce(vault.claims, t.key, sealBatch(t.items, signer));
  await recordAibom({ vault, blobs: stackBlobs(), signer, logger: pino({ level: 'silent' }) }, aibomRunOf(r));
  return r;
}

beforeAll(async () => {
  const url = await freshDatabase('headers');
  await migrate(url);
  vault = await openVault(createVaultPool(url));
  signer = signerFromPem(await generateDevPki());
  run = await recordedRun();
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
