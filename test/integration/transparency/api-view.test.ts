import type { FastifyInstance } from 'fastify';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { KeySigner } from '../../../src/signing/index.ts';
import { transparencyView } from '../../../src/transparency/jobs.ts';
import { createLocalLog } from '../../../src/transparency/local-log.ts';
import { createPublisher } from '../../../src/transparency/publisher.ts';
import { stackApp } from '../../helpers/app.ts';
import { stack } from '../../helpers/stack.ts';
import { logSigner, statementSigner } from '../../unit/transparency/fixtures.ts';
import { record, setupDb, type TestDb } from './helpers.ts';

/**
 * The `transparency` field of envelopes as the API serves them, on every read path: the JSON page
 * (jobs joined in the page query), NDJSON (jobs per batch) and GET by id (batched loader): null
 * without a job, the job id and state while queued, the receipt once published.
 */
describe('transparency field on the read API', () => {
  let db: TestDb;
  let signer: KeySigner;
  let app: FastifyInstance;
  let ids: string[];
  const ns = 'team-view';
  const headers = () => ({ authorization: `Bearer ${stack().kube.tokens.admin}` });

  beforeAll(async () => {
    db = await setupDb('api_view');
    signer = await statementSigner();
    ids = (await db.vault.attestations.append(Array.from({ length: 4 }, () => record(signer, ns)))).map(
      (s) => s.id,
    );
    // ids[0]: no job; ids[1]: queued; ids[2] and ids[3]: published through the local log.
    await db.vault.transparencyJobs.enqueue(ids.slice(1));
    const log = createLocalLog({
      storage: db.vault.scittLog,
      signer: logSigner(),
      issuer: 'https://scitt.view.invalid',
    });
    const publisher = createPublisher({
      jobs: db.vault.transparencyJobs,
      signer,
      caCertificates: signer.caCertificates,
      backend: { kind: 'local', log },
      loadAttestation: (id) => db.vault.attestations.get(id),
    });
    for (const id of ids.slice(2)) expect((await publisher.publishNow(id)).state).toBe('published');
    app = await stackApp(db.vault, []);
  });
  afterAll(async () => {
    await app?.close();
    await db?.close();
  });

  /** What every read path must show for record i. */
  const expected = async (i: number): Promise<unknown> => {
    if (i === 0) return null;
    const job = await db.vault.transparencyJobs.get({ attestationId: ids[i]! });
    // The admin may read the chain (cluster-wide), so it sees the log position (docs/chain.md "Tenants").
    return transparencyView(job!, { position: true });
  };

  it('is the same on the JSON page, in NDJSON and on GET', async () => {
    const page = await app.inject({
      method: 'POST',
      url: '/v1/attestations/query',
      headers: headers(),
      payload: { namespaces: [ns] },
    });
    expect(page.statusCode).toBe(200);
    expect(page.headers['content-type']).toMatch(/^application\/json/);
    const items = page.json<{ items: { id: string; transparency: unknown }[] }>().items;
    expect(items.map((x) => x.id)).toEqual(ids);

    const ndjson = await app.inject({
      method: 'POST',
      url: '/v1/attestations/query',
      headers: { ...headers(), accept: 'application/x-ndjson' },
      payload: { namespaces: [ns] },
    });
    const lines = ndjson.body
      .trim()
      .split('\n')
      .map((l) => JSON.parse(l) as { id: string; transparency: unknown });

    const gets = await Promise.all(
      ids.map((id) => app.inject({ url: `/v1/attestations/${id}`, headers: headers() })),
    );
    for (const [i, id] of ids.entries()) {
      const want = await expected(i);
      expect(items[i]!.transparency, `page ${id}`).toEqual(want);
      expect(lines[i]!.transparency, `ndjson ${id}`).toEqual(want);
      expect(gets[i]!.json<{ transparency: unknown }>().transparency, `get ${id}`).toEqual(want);
    }
    expect(items[1]!.transparency).toMatchObject({ status: 'queued' });
    expect(items[2]!.transparency).toMatchObject({ status: 'published', mode: 'dry_run' });
    expect((items[3]!.transparency as { receipt: string }).receipt.length).toBeGreaterThan(100);
  });
});
