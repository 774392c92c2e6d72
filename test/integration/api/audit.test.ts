/**
 * GET /v1/audit against the real stack: what it costs in SubjectAccessReviews (counted where they
 * leave for the kube-apiserver) is bounded like the query's, at most 1 + MAX_QUERY_NAMESPACES,
 * whoever asks and however many namespaces hold records; its filters refuse control characters and
 * an empty time window with 400; its errors quote nothing of the request.
 */
import { randomBytes } from 'node:crypto';
import type { FastifyInstance } from 'fastify';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { generateDevPki } from '../../../hack/dev-pki.ts';
import { MAX_QUERY_NAMESPACES } from '../../../src/http/auth/namespaces.ts';
import { signerFromPem, type KeySigner } from '../../../src/signing/index.ts';
import { createVaultPool, migrate, openVault, type Vault } from '../../../src/vault/index.ts';
import { stackApp } from '../../helpers/app.ts';
import { bindUser, createNamespace } from '../../helpers/rbac.ts';
import { runRecords } from '../../helpers/records.ts';
import { countedReviews, type CountedReviews } from '../../helpers/reviews.ts';
import { freshDatabase, stack, uniqueName } from '../../helpers/stack.ts';

type User = 'admin' | 'alice' | 'bob';
let app: FastifyInstance;
let vault: Vault;
let signer: KeySigner;
let reviews: CountedReviews;
const nsA = uniqueName('audit-a');
const nsB = uniqueName('audit-b');
const token = (u: User) => ({ authorization: `Bearer ${stack().kube.tokens[u]}` });
const randomNamespaces = (n: number) =>
  Array.from({ length: n }, () => `x-${randomBytes(5).toString('hex')}`);

interface Problem {
  code: string;
  detail: string;
  errors?: { pointer: string; message: string }[];
}

const audit = async (who: User, query = '') => {
  reviews.reset();
  const res = await app.inject({ url: `/v1/audit${query}`, headers: token(who) });
  return { res, reviews: reviews.sent.access };
};

/** A namespace holding records and one audit row. */
async function holding(ns: string): Promise<void> {
  await vault.attestations.append(runRecords(signer, ns).records);
  await vault.audit.record({ actor: 'test', action: 'artifact.download', namespace: ns, object: ns });
}

beforeAll(async () => {
  const url = await freshDatabase('audit');
  await migrate(url);
  vault = await openVault(createVaultPool(url));
  signer = signerFromPem(await generateDevPki());
  await Promise.all([createNamespace(nsA), createNamespace(nsB)]);
  await bindUser('alice', 'aibom-vault-auditor', nsA);
  await holding(nsA);
  await holding(nsB);
  await vault.audit.record({ actor: 'test', action: 'attestations.export.bundle', namespace: null });
  await freshApp();
});

/** An app with a cold decision cache, so that a test counts every review its requests need. */
async function freshApp(): Promise<void> {
  await app?.close();
  reviews = countedReviews();
  app = await stackApp(vault, [], { authorizer: reviews.authorizer });
}

afterAll(async () => {
  await app?.close();
  await vault?.close();
});

beforeEach(() => reviews.reset());

describe('input', () => {
  it('refuses control characters in action and namespace with 400 and the pointer, before any review', async () => {
    for (const [param, pointer] of [
      ['action', '/querystring/action'],
      ['namespace', '/querystring/namespace'],
    ] as const) {
      for (const c of ['%00', '%01', '%0A', '%7F', '%C2%85']) {
        const { res, reviews: sent } = await audit('admin', `?${param}=a${c}b`);
        expect(res.statusCode, `${param} ${c}`).toBe(400);
        const problem = res.json<Problem>();
        expect(problem.code).toBe('VALIDATION_FAILED');
        expect(problem.errors!.map((e) => e.pointer)).toContain(pointer);
        expect(sent).toBe(0);
      }
    }
    // The same values without the control character are answered.
    expect((await audit('admin', '?action=a%20b')).res.statusCode).toBe(200);
  });

  it('refuses a time window whose `from` is not before `to`: 400 INVALID_TIME_WINDOW', async () => {
    const t = '2026-03-01T10:00:00Z';
    for (const to of [t, '2026-03-01T09:00:00Z']) {
      const { res, reviews: sent } = await audit('admin', `?from=${t}&to=${to}`);
      expect(res.statusCode).toBe(400);
      expect(res.json<Problem>()).toMatchObject({
        code: 'INVALID_TIME_WINDOW',
        errors: [{ pointer: '/querystring/from' }],
      });
      expect(sent).toBe(0);
    }
    expect((await audit('admin', `?from=${t}&to=2026-03-01T11:00:00Z`)).res.statusCode).toBe(200);
  });

  it('a 403 quotes nothing of the request', async () => {
    const marker = `zq7echo-${randomBytes(3).toString('hex')}`;
    for (const query of [`?namespace=${marker}`, `?namespace=${nsA},${marker}`]) {
      const { res } = await audit('alice', query);
      expect(res.statusCode, query).toBe(403);
      expect(res.json<Problem>().code).toBe('FORBIDDEN');
      expect(res.body).not.toContain(marker);
    }
  });
});

describe('reviews per request', () => {
  beforeEach(freshApp);

  it('a caller allowed cluster-wide: one review, every row (those without a namespace too)', async () => {
    const { res, reviews: sent } = await audit('admin');
    expect(res.statusCode).toBe(200);
    const items = res.json<{ items: { namespace: string | null }[] }>().items;
    expect(new Set(items.map((i) => i.namespace))).toEqual(new Set([nsA, nsB, null]));
    expect(sent).toBe(1);
  });

  it('an auditor of one namespace reads its rows, naming it or not; a caller with no grants is refused', async () => {
    const unnamed = await audit('alice');
    expect(unnamed.res.statusCode).toBe(200);
    expect(unnamed.res.json<{ items: { namespace: string }[] }>().items.map((i) => i.namespace)).toEqual([
      nsA,
    ]);
    expect(unnamed.reviews).toBe(1 + 2); // cluster-wide, then the two namespaces holding records
    const named = await audit('alice', `?namespace=${nsA}`);
    expect(named.res.statusCode).toBe(200);
    expect(named.reviews).toBe(0); // both questions cached from the request before
    const bob = await audit('bob');
    expect(bob.res.statusCode).toBe(403);
    expect(bob.reviews).toBe(3);
  });

  it(`naming namespaces: at most ${MAX_QUERY_NAMESPACES}, reviewed after the cluster-wide question; more are refused unreviewed`, async () => {
    const names = randomNamespaces(MAX_QUERY_NAMESPACES);
    const first = await audit('bob', `?namespace=${names.join(',')}`);
    expect(first.res.statusCode).toBe(403);
    expect(first.reviews).toBe(1 + MAX_QUERY_NAMESPACES);
    const more = await audit('bob', `?namespace=${randomNamespaces(MAX_QUERY_NAMESPACES + 1).join(',')}`);
    expect(more.res.statusCode).toBe(400);
    expect(more.res.json<Problem>().errors!.map((e) => e.pointer)).toContain('/querystring/namespace');
    expect(more.reviews).toBe(0);
  });

  // Last: it adds records in many more namespaces, which changes what an unnamed request reviews.
  it(`with more than ${MAX_QUERY_NAMESPACES} namespaces holding records, a caller without a cluster-wide grant costs one review and is asked to name them`, async () => {
    for (const ns of randomNamespaces(24)) await holding(ns);
    for (const who of ['bob', 'alice'] as const) {
      const { res, reviews: sent } = await audit(who);
      expect(res.statusCode, who).toBe(400);
      const problem = res.json<Problem>();
      expect(problem.code).toBe('VALIDATION_FAILED');
      expect(problem.errors!.map((e) => e.pointer)).toContain('/querystring/namespace');
      // The cluster-wide question only (it was one per namespace holding records: 1 + 26).
      expect(sent, who).toBe(1);
    }
    // Named, the auditor reads its namespace as before; cluster-wide readers are not affected.
    expect((await audit('alice', `?namespace=${nsA}`)).res.statusCode).toBe(200);
    const admin = await audit('admin');
    expect(admin.res.statusCode).toBe(200);
    expect(admin.reviews).toBe(1);
  });
});
