/**
 * GET /v1/keys and /v1/keys/{ref} against the real stack (issue 22 item 14): what they cost in
 * SubjectAccessReviews, counted where they leave for the kube-apiserver, is bounded like the query
 * and the audit log, at most 1 + MAX_QUERY_NAMESPACES, however many namespaces hold customer keys:
 * before, every such namespace was reviewed one by one on every request (every UI run page asks).
 * What each caller is served is unchanged: the service's keys always, a tenant's customer keys to
 * callers who may list attestations there.
 */
import { createHash, generateKeyPairSync, randomBytes } from 'node:crypto';
import type { FastifyInstance } from 'fastify';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { MAX_QUERY_NAMESPACES } from '../../../src/http/auth/namespaces.ts';
import { createVaultPool, migrate, openVault, type Vault } from '../../../src/vault/index.ts';
import { stackApp } from '../../helpers/app.ts';
import { bindUser, createNamespace } from '../../helpers/rbac.ts';
import { countedReviews, type CountedReviews } from '../../helpers/reviews.ts';
import { freshDatabase, stack, uniqueName } from '../../helpers/stack.ts';

type User = 'admin' | 'alice' | 'bob';
let app: FastifyInstance;
let vault: Vault;
let reviews: CountedReviews;
const nsA = uniqueName('keys-a');
const token = (u: User) => ({ authorization: `Bearer ${stack().kube.tokens[u]}` });
const randomNamespaces = (n: number) =>
  Array.from({ length: n }, () => `x-${randomBytes(5).toString('hex')}`);

interface Bundle {
  signers: { namespace: string; key_id: string }[];
}
interface Problem {
  code: string;
  errors?: { pointer: string }[];
}

/** A customer key (a bare public key) recorded for `namespace`, as the recorder records a tenant's signer. */
async function customerKey(namespace: string): Promise<string> {
  const { publicKey } = generateKeyPairSync('ec', { namedCurve: 'P-256' });
  const keyId = `sha256:${createHash('sha256')
    .update(publicKey.export({ type: 'spki', format: 'der' }))
    .digest('hex')}`;
  await vault.signers.record({
    certRef: keyId,
    keyId,
    namespace,
    role: 'signer',
    chainPem: publicKey.export({ type: 'spki', format: 'pem' }).toString(),
    caPem: '',
    notBefore: null,
    notAfter: null,
  });
  return keyId;
}

const keys = async (who: User, path = '/v1/keys') => {
  reviews.reset();
  const res = await app.inject({ url: path, headers: token(who) });
  return { res, reviews: reviews.sent.access };
};

/** A fresh app: a cold decision cache, so every request counts the reviews it needs. */
async function freshApp(): Promise<void> {
  await app?.close();
  reviews = countedReviews();
  app = await stackApp(vault, [], { authorizer: reviews.authorizer });
}

let aliceKey: string;

beforeAll(async () => {
  const url = await freshDatabase('keys_cost');
  await migrate(url);
  vault = await openVault(createVaultPool(url));
  await createNamespace(nsA);
  await bindUser('alice', 'aibom-vault-viewer', nsA);
  aliceKey = await customerKey(nsA);
});

afterAll(async () => {
  await app?.close();
  await vault?.close();
});

beforeEach(freshApp);

describe('reviews per key request', () => {
  it("serves a tenant's customer keys to who may list there only, naming it or not", async () => {
    const alice = await keys('alice');
    expect(alice.res.statusCode).toBe(200);
    expect(alice.res.json<Bundle>().signers.map((s) => s.key_id)).toContain(aliceKey);
    expect(alice.reviews).toBe(2); // cluster-wide, then the one namespace holding customer keys
    const named = await keys('alice', `/v1/keys?namespace=${nsA}`);
    expect(named.res.json<Bundle>().signers.map((s) => s.key_id)).toContain(aliceKey);
    const bob = await keys('bob', `/v1/keys?namespace=${nsA}`);
    expect(bob.res.statusCode).toBe(200);
    expect(bob.res.json<Bundle>().signers.map((s) => s.key_id)).not.toContain(aliceKey);
    const ref = await keys('alice', `/v1/keys/${aliceKey}?namespace=${nsA}`);
    expect(ref.res.statusCode).toBe(200);
    expect((await keys('bob', `/v1/keys/${aliceKey}`)).res.statusCode).toBe(404);
  });

  it(`naming namespaces: at most ${MAX_QUERY_NAMESPACES}, reviewed after the cluster-wide question; more are refused unreviewed`, async () => {
    const names = randomNamespaces(MAX_QUERY_NAMESPACES);
    const named = await keys('bob', `/v1/keys?namespace=${names.join(',')}`);
    expect(named.res.statusCode).toBe(200);
    expect(named.reviews).toBe(1 + MAX_QUERY_NAMESPACES);
    const more = await keys(
      'bob',
      `/v1/keys?namespace=${randomNamespaces(MAX_QUERY_NAMESPACES + 1).join(',')}`,
    );
    expect(more.res.statusCode).toBe(400);
    expect(more.res.json<Problem>().errors!.map((e) => e.pointer)).toContain('/querystring/namespace');
    expect(more.reviews).toBe(0);
  });

  // Last: it records customer keys in many more namespaces, which changes what an unnamed request reviews.
  it(`with ${MAX_QUERY_NAMESPACES + 2} namespaces holding customer keys, a caller without grants costs one review, not one per namespace`, async () => {
    for (const ns of randomNamespaces(MAX_QUERY_NAMESPACES + 1)) await customerKey(ns);
    for (const path of ['/v1/keys', `/v1/keys/${aliceKey}`]) {
      for (const who of ['bob', 'alice'] as const) {
        await freshApp(); // a cold decision cache for each count
        const { res, reviews: sent } = await keys(who, path);
        expect(res.statusCode, `${who} ${path}`).toBe(400);
        const problem = res.json<Problem>();
        expect(problem.code).toBe('VALIDATION_FAILED');
        expect(problem.errors!.map((e) => e.pointer)).toContain('/querystring/namespace');
        // The cluster-wide question only (it was 1 + 18 per request).
        expect(sent, `${who} ${path}`).toBe(1);
      }
    }
    // Named, the tenant reads its keys as before (the UI's run page names its run's namespace);
    // cluster-wide readers get every tenant's keys for one review.
    const named = await keys('alice', `/v1/keys?namespace=${nsA}`);
    expect(named.res.json<Bundle>().signers.map((s) => s.key_id)).toContain(aliceKey);
    expect(named.reviews).toBeLessThanOrEqual(2);
    const admin = await keys('admin');
    expect(admin.res.statusCode).toBe(200);
    expect(new Set(admin.res.json<Bundle>().signers.map((s) => s.namespace)).size).toBe(
      MAX_QUERY_NAMESPACES + 2,
    );
    expect(admin.reviews).toBe(1);
  });
});
