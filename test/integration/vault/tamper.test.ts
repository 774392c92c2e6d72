import type pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { StoredAttestation } from '../../../src/vault/index.ts';
import { attestation, digestOf, setupVault, type TestVault } from './helpers.ts';

/** Runs `fn` as the superuser with the append-only triggers off for this session only. */
async function asReplica<T>(t: TestVault, fn: (c: pg.PoolClient) => Promise<T>): Promise<T> {
  const c = await t.admin.connect();
  try {
    await c.query('SET session_replication_role = replica');
    return await fn(c);
  } finally {
    await c.query('RESET session_replication_role');
    c.release();
  }
}

/** Tampering is detected at `seq`; undoing the change restores a valid chain. */
describe('vault tamper detection', () => {
  let t: TestVault;
  let rows: StoredAttestation[];
  beforeAll(async () => {
    t = await setupVault('tamper');
    rows = [];
    for (let i = 0; i < 5; i++)
      rows.push(...(await t.vault.attestations.append(Array.from({ length: 7 }, () => attestation()))));
    expect((await t.vault.attestations.verifyChain({ digestOf })).ok).toBe(true);
  });
  afterAll(async () => {
    await t.close();
  });

  const verify = (batchSize = 4) => t.vault.attestations.verifyChain({ digestOf, batchSize });

  it('one changed byte of an envelope: DIGEST_MISMATCH at that row', async () => {
    const victim = rows[12]!;
    const payload = victim.envelope.payload;
    const flipped = (payload[0] === 'e' ? 'f' : 'e') + payload.slice(1);
    // ALTER TABLE ... DISABLE TRIGGER, as a superuser or owner could.
    await t.admin.query('ALTER TABLE attestations DISABLE TRIGGER attestations_append_only');
    try {
      await t.admin.query(
        `UPDATE attestations SET envelope = jsonb_set(envelope, '{payload}', to_jsonb($1::text)) WHERE id = $2`,
        [flipped, victim.id],
      );
      expect(await verify()).toEqual({
        ok: false,
        checked: 13,
        headSeq: 35,
        firstBroken: { seq: victim.seq, id: victim.id, reason: 'DIGEST_MISMATCH' },
      });
      await t.admin.query(
        `UPDATE attestations SET envelope = jsonb_set(envelope, '{payload}', to_jsonb($1::text)) WHERE id = $2`,
        [payload, victim.id],
      );
    } finally {
      await t.admin.query('ALTER TABLE attestations ENABLE TRIGGER attestations_append_only');
    }
    expect((await verify()).ok).toBe(true);
  });

  it('a rewritten envelope with a matching new digest: PREV_MISMATCH at the next row', async () => {
    const victim = rows[20]!;
    const forged = attestation();
    await asReplica(t, (c) =>
      c.query('UPDATE attestations SET envelope = $1, digest = $2 WHERE id = $3', [
        forged.envelope,
        forged.digest,
        victim.id,
      ]),
    );
    const report = await verify();
    expect(report.firstBroken).toEqual({ seq: victim.seq + 1, id: rows[21]!.id, reason: 'PREV_MISMATCH' });
    await asReplica(t, (c) =>
      c.query('UPDATE attestations SET envelope = $1, digest = $2 WHERE id = $3', [
        victim.envelope,
        victim.digest,
        victim.id,
      ]),
    );
    expect((await verify()).ok).toBe(true);
  });

  it('a deleted row: SEQ_GAP at the next row', async () => {
    const victim = rows[7]!;
    const saved = await t.admin.query<Record<string, unknown>>('SELECT * FROM attestations WHERE id = $1', [
      victim.id,
    ]);
    await asReplica(t, (c) => c.query('DELETE FROM attestations WHERE id = $1', [victim.id]));
    expect((await verify()).firstBroken).toEqual({ seq: victim.seq + 1, id: rows[8]!.id, reason: 'SEQ_GAP' });
    await asReplica(t, (c) =>
      c.query('INSERT INTO attestations SELECT * FROM json_populate_record(NULL::attestations, $1)', [
        saved.rows[0],
      ]),
    );
    expect((await verify()).ok).toBe(true);
  });

  it('a deleted row with seq renumbered to hide the gap: PREV_MISMATCH at the next row', async () => {
    const victim = rows[30]!;
    const saved = await t.admin.query<Record<string, unknown>>('SELECT * FROM attestations WHERE id = $1', [
      victim.id,
    ]);
    await asReplica(t, async (c) => {
      await c.query('DELETE FROM attestations WHERE id = $1', [victim.id]);
      await c.query('UPDATE attestations SET seq = seq - 1 WHERE seq > $1', [victim.seq]);
    });
    expect((await verify()).firstBroken).toEqual({
      seq: victim.seq,
      id: rows[31]!.id,
      reason: 'PREV_MISMATCH',
    });
    await asReplica(t, async (c) => {
      for (let s = 34; s >= victim.seq; s--)
        await c.query('UPDATE attestations SET seq = $1 WHERE seq = $2', [s + 1, s]);
      await c.query('INSERT INTO attestations SELECT * FROM json_populate_record(NULL::attestations, $1)', [
        saved.rows[0],
      ]);
    });
    expect((await verify()).ok).toBe(true);
  });

  it('the newest row deleted: HEAD_MISMATCH', async () => {
    const victim = rows[34]!;
    const saved = await t.admin.query<Record<string, unknown>>('SELECT * FROM attestations WHERE id = $1', [
      victim.id,
    ]);
    await asReplica(t, (c) => c.query('DELETE FROM attestations WHERE id = $1', [victim.id]));
    expect((await verify()).firstBroken).toEqual({ seq: 35, id: victim.id, reason: 'HEAD_MISMATCH' });
    await asReplica(t, (c) =>
      c.query('INSERT INTO attestations SELECT * FROM json_populate_record(NULL::attestations, $1)', [
        saved.rows[0],
      ]),
    );
    expect((await verify()).ok).toBe(true);
  });

  it('an id rewritten out of order: ID_ORDER', async () => {
    const victim = rows[3]!;
    const earlier = rows[1]!.id.replace(/.$/, (c) => (c === '0' ? '1' : '0'));
    await asReplica(t, (c) => c.query('UPDATE attestations SET id = $1 WHERE id = $2', [earlier, victim.id]));
    expect((await verify()).firstBroken).toEqual({ seq: victim.seq, id: earlier, reason: 'ID_ORDER' });
    await asReplica(t, (c) => c.query('UPDATE attestations SET id = $1 WHERE id = $2', [victim.id, earlier]));
    expect((await verify()).ok).toBe(true);
  });
});
