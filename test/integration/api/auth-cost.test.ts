/**
 * Issue 11 item 4: what a query costs in SubjectAccessReviews, counted where they leave for the
 * real kube-apiserver. The cluster-wide question comes first (one review for a caller allowed
 * everywhere), a query names at most MAX_QUERY_NAMESPACES namespaces, decisions are cached, and one
 * caller's reviews are limited in concurrency: a caller without grants cannot make the sidecar
 * send more than 1 + MAX_QUERY_NAMESPACES reviews per request, nor more than
 * maxInflightPerIdentity at once. Latencies are printed for the record, never asserted.
 */
import { randomBytes } from 'node:crypto';
import type { FastifyInstance } from 'fastify';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { generateDevPki } from '../../../hack/dev-pki.ts';
import { AUTH_DEFAULTS } from '../../../src/http/auth/authorizer.ts';
import { MAX_QUERY_NAMESPACES } from '../../../src/http/auth/namespaces.ts';
import { signerFromPem } from '../../../src/signing/index.ts';
import { createVaultPool, migrate, openVault, type Vault } from '../../../src/vault/index.ts';
import { stackApp } from '../../helpers/app.ts';
import { bindUser, createNamespace } from '../../helpers/rbac.ts';
import { runRecords } from '../../helpers/records.ts';
import { countedReviews, type CountedReviews } from '../../helpers/reviews.ts';
import { freshDatabase, stack, uniqueName } from '../../helpers/stack.ts';

let app: FastifyInstance;
let vault: Vault;
let reviews: CountedReviews;
const nsA = uniqueName('cost-a');
const token = (u: 'admin' | 'alice' | 'bob') => ({ authorization: `Bearer ${stack().kube.tokens[u]}` });
const randomNamespaces = (n: number) =>
  Array.from({ length: n }, () => `x-${randomBytes(5).toString('hex')}`);

const query = async (who: 'admin' | 'alice' | 'bob', body: object) => {
  const t0 = performance.now();
  const res = await app.inject({
    method: 'POST',
    url: '/v1/attestations/query',
    headers: token(who),
    payload: body,
  });
  return { res, ms: performance.now() - t0 };
};

beforeAll(async () => {
  const url = await freshDatabase('cost');
  await migrate(url);
  vault = await openVault(createVaultPool(url));
  const signer = signerFromPem(await generateDevPki());
  await createNamespace(nsA);
  await bindUser('alice', 'aibom-vault-viewer', nsA);
  await vault.attestations.append(runRecords(signer, nsA).records);
  reviews = countedReviews();
  app = await stackApp(vault, [], { authorizer: reviews.authorizer });
  // Tokens reviewed once here (a request refused by validation, after authentication and before
  // any SubjectAccessReview); the tests count SubjectAccessReviews from a cold decision cache.
  for (const who of ['admin', 'alice', 'bob'] as const) {
    expect((await query(who, { limit: 0 })).res.statusCode).toBe(400);
  }
});

afterAll(async () => {
  await app?.close();
  await vault?.close();
});

beforeEach(() => reviews.reset());

describe('reviews per query', () => {
  it(`a caller with no grants: ${MAX_QUERY_NAMESPACES} namespaces cost 1 + ${MAX_QUERY_NAMESPACES} reviews, once; more are refused unreviewed`, async () => {
    const names = randomNamespaces(MAX_QUERY_NAMESPACES);
    const first = await query('bob', { namespaces: names });
    expect(first.res.statusCode).toBe(200);
    expect(first.res.json()).toEqual({
      items: [],
      next_cursor: null,
      excluded_namespace_count: MAX_QUERY_NAMESPACES,
    });
    expect(reviews.sent.access).toBe(1 + MAX_QUERY_NAMESPACES);
    // Denials are cached too: the same question again costs nothing.
    const again = await query('bob', { namespaces: names });
    expect(again.res.statusCode).toBe(200);
    expect(reviews.sent.access).toBe(1 + MAX_QUERY_NAMESPACES);

    reviews.reset();
    const hundred = await query('bob', { namespaces: randomNamespaces(100) });
    expect(hundred.res.statusCode).toBe(400);
    expect(hundred.res.json()).toMatchObject({ code: 'VALIDATION_FAILED' });
    expect(hundred.res.json<{ errors: { pointer: string }[] }>().errors.map((e) => e.pointer)).toContain(
      '/body/namespaces',
    );
    expect(reviews.sent.access).toBe(0);
    console.log(
      `hostile query by a user without grants: ${MAX_QUERY_NAMESPACES} random namespaces ${first.ms.toFixed(0)} ms ` +
        `(${1 + MAX_QUERY_NAMESPACES} reviews), repeated ${again.ms.toFixed(0)} ms (0), 100 namespaces ${hundred.ms.toFixed(0)} ms (0, 400)`,
    );
  });

  it('a caller allowed cluster-wide costs one review, named namespaces or none', async () => {
    const named = await query('admin', { namespaces: randomNamespaces(MAX_QUERY_NAMESPACES) });
    expect(named.res.statusCode).toBe(200);
    expect(reviews.sent.access).toBe(1);
    reviews.reset();
    // The namespace question is cached from before; records come back, so the caller's audience is
    // asked once (`get attestations/chain`: may it see positions? docs/chain.md "Tenants").
    expect((await query('admin', {})).res.statusCode).toBe(200);
    expect(reviews.sent.access).toBe(1);
    reviews.reset();
    expect((await query('admin', {})).res.statusCode).toBe(200);
    expect(reviews.sent.access).toBe(0);
  });

  it('a namespaced caller reads its namespace among others; the others are counted, not named', async () => {
    const others = randomNamespaces(MAX_QUERY_NAMESPACES - 1);
    const { res } = await query('alice', { namespaces: [...others, nsA] });
    expect(res.statusCode).toBe(200);
    const body = res.json<{ items: { namespace: string }[]; excluded_namespace_count: number }>();
    expect(body.items.length).toBeGreaterThan(0);
    expect(new Set(body.items.map((i) => i.namespace))).toEqual(new Set([nsA]));
    expect(body.excluded_namespace_count).toBe(others.length);
    expect(res.headers['x-excluded-namespace-count']).toBe(String(others.length));
    expect(JSON.stringify(body)).not.toContain(others[0]);
    // The namespaces, then the audience of the records it gets (one question, cached).
    expect(reviews.sent.access).toBe(1 + MAX_QUERY_NAMESPACES + 1);
  });

  it(`naming none, a namespaced caller is asked to name them once more than ${MAX_QUERY_NAMESPACES} namespaces hold records`, async () => {
    const signer = signerFromPem(await generateDevPki());
    const url = await freshDatabase('costmany');
    await migrate(url);
    const many = await openVault(createVaultPool(url));
    const counted = countedReviews();
    const other = await stackApp(many, [], { authorizer: counted.authorizer });
    try {
      for (const ns of randomNamespaces(MAX_QUERY_NAMESPACES + 1)) {
        await many.attestations.append(runRecords(signer, ns).records);
      }
      const ask = (who: 'admin' | 'alice', body: object) =>
        other.inject({ method: 'POST', url: '/v1/attestations/query', headers: token(who), payload: body });
      const refused = await ask('alice', {});
      expect(refused.statusCode).toBe(400);
      expect(refused.json<{ errors: { pointer: string }[] }>().errors[0]!.pointer).toBe('/body/namespaces');
      expect(counted.byUser.get('alice')).toBe(1); // the cluster-wide question only
      const all = await ask('admin', { limit: 1000 });
      expect(all.statusCode).toBe(200);
      expect(all.json<{ items: unknown[] }>().items).toHaveLength(3 * (MAX_QUERY_NAMESPACES + 1));
      expect(counted.byUser.get('admin')).toBe(2); // cluster-wide, then the audience of the records
    } finally {
      await other.close();
      await many.close();
    }
  });
});

describe('concurrency', () => {
  it('a flood from one caller: reviews bounded per request and in flight; other callers are answered', async () => {
    const hostile = 40;
    let next = 0;
    const statuses = new Map<number, number>();
    const victim: { status: number; ms: number }[] = [];
    let flooding = true;
    const t0 = performance.now();
    const victimLoop = (async () => {
      while (flooding) {
        const { res, ms } = await query('admin', { limit: 1 });
        victim.push({ status: res.statusCode, ms });
      }
    })();
    await Promise.all(
      Array.from({ length: 10 }, async () => {
        while (next < hostile) {
          next += 1;
          const { res } = await query('bob', { namespaces: randomNamespaces(MAX_QUERY_NAMESPACES) });
          statuses.set(res.statusCode, (statuses.get(res.statusCode) ?? 0) + 1);
        }
      }),
    );
    const total = performance.now() - t0;
    flooding = false;
    await victimLoop;
    expect(statuses).toEqual(new Map([[200, hostile]]));
    expect(reviews.byUser.get('bob')).toBeLessThanOrEqual(hostile * (1 + MAX_QUERY_NAMESPACES));
    expect(reviews.maxInflight.byUser.get('bob')).toBeLessThanOrEqual(AUTH_DEFAULTS.maxInflightPerIdentity);
    expect(reviews.maxInflight.all).toBeLessThanOrEqual(AUTH_DEFAULTS.maxInflight);
    expect(victim.length).toBeGreaterThan(0);
    expect(victim.every((v) => v.status === 200)).toBe(true);
    const sorted = victim.map((v) => v.ms).sort((a, b) => a - b);
    console.log(
      `${hostile} hostile queries at concurrency 10: ${(total / 1000).toFixed(1)} s, ${reviews.byUser.get('bob')} reviews, ` +
        `at most ${reviews.maxInflight.byUser.get('bob')} in flight; another caller meanwhile: ${victim.length} answers, ` +
        `median ${sorted[Math.floor(sorted.length / 2)]!.toFixed(0)} ms, max ${sorted.at(-1)!.toFixed(0)} ms`,
    );
  });

  it('unauthenticated callers: no token costs nothing, each bad token one TokenReview, a bounded number at once', async () => {
    const none = await app.inject({ method: 'POST', url: '/v1/attestations/query', payload: {} });
    expect(none.statusCode).toBe(401);
    expect(reviews.sent).toEqual({ token: 0, access: 0 });
    const bad = await Promise.all(
      Array.from({ length: 50 }, () =>
        app.inject({
          method: 'POST',
          url: '/v1/attestations/query',
          headers: { authorization: `Bearer ${randomBytes(24).toString('base64url')}` },
          payload: { namespaces: randomNamespaces(MAX_QUERY_NAMESPACES) },
        }),
      ),
    );
    expect(bad.every((r) => r.statusCode === 401)).toBe(true);
    expect(reviews.sent).toEqual({ token: 50, access: 0 });
    expect(reviews.maxInflight.token).toBeLessThanOrEqual(AUTH_DEFAULTS.maxTokenReviewsInflight);
  });
});
