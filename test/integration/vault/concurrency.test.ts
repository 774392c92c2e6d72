import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { connectVault, UuidV7Generator } from '../../../src/vault/index.ts';
import { attestation, digestOf, setupVault, type TestVault } from './helpers.ts';

const WRITERS = 8;
const BATCHES = 200;
const BATCH_SIZE = 5;

describe('vault append under concurrency', () => {
  let t: TestVault;
  beforeAll(async () => {
    t = await setupVault('concurrency');
  });
  afterAll(async () => {
    await t.close();
  });

  it(`keeps ids monotonic and the chain intact with ${WRITERS} writers × ${BATCHES} batches`, async () => {
    // Each writer acts as a separate replica: own pool, own id generator. Two of them have clocks
    // that disagree with everyone else's (an hour behind, and frozen), as replicas' clocks may.
    const clocks: (() => number)[] = [Date.now, Date.now, Date.now, Date.now, Date.now, Date.now];
    clocks.push(() => Date.now() - 3_600_000);
    const frozen = Date.now();
    clocks.push(() => frozen);
    const writers = await Promise.all(
      clocks.map(async (now) => ({
        vault: await connectVault(t.url, { max: 1 }),
        ids: new UuidV7Generator({ now }),
      })),
    );
    try {
      const results = await Promise.all(
        writers.map(async (w, i) => {
          const seqs: number[][] = [];
          for (let b = 0; b < BATCHES; b++) {
            const batch = Array.from({ length: BATCH_SIZE }, () => attestation({ namespace: `writer-${i}` }));
            const stored = await w.vault.attestations.append(batch, { ids: w.ids });
            seqs.push(stored.map((s) => s.seq));
          }
          return seqs;
        }),
      );
      // Every batch got consecutive seqs, and each writer's batches are in its call order.
      for (const seqs of results) {
        for (const batch of seqs) expect(batch).toEqual(batch.map((_, k) => batch[0]! + k));
        const firsts = seqs.map((b) => b[0]!);
        expect(firsts).toEqual([...firsts].sort((a, b) => a - b));
      }
    } finally {
      await Promise.all(writers.map((w) => w.vault.close()));
    }

    const total = WRITERS * BATCHES * BATCH_SIZE;
    const { rows } = await t.admin.query<{
      n: string;
      min: string;
      max: string;
      ordered: boolean;
      timed: boolean;
    }>(`
      SELECT count(*) AS n, min(seq) AS min, max(seq) AS max,
             bool_and(prev_id IS NULL OR id > prev_id) AS ordered,
             bool_and(prev_at IS NULL OR created_at >= prev_at) AS timed
      FROM (SELECT seq, id, created_at, lag(id) OVER w AS prev_id, lag(created_at) OVER w AS prev_at
            FROM attestations WINDOW w AS (ORDER BY seq)) x`);
    expect(rows[0]).toEqual({ n: String(total), min: '1', max: String(total), ordered: true, timed: true });
    const v7 = await t.admin.query<{ n: string }>(
      `SELECT count(*) AS n FROM attestations WHERE substr(id::text, 15, 1) = '7' AND substr(id::text, 20, 1) IN ('8', '9', 'a', 'b')`,
    );
    expect(v7.rows[0]!.n).toBe(String(total));

    const report = await t.vault.attestations.verifyChain({ digestOf, batchSize: 500 });
    expect(report).toEqual({ ok: true, checked: total, headSeq: total });
  });
});
