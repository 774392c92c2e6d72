import type pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { KeySigner } from '../../../src/signing/index.ts';
import { createLocalLog, type LocalLog } from '../../../src/transparency/local-log.ts';
import {
  leafHash,
  MemoryTree,
  verifyConsistency,
  verifyInclusion,
} from '../../../src/transparency/merkle.ts';
import { attachReceipt, decodeReceipt, entryOf, verifyReceipt } from '../../../src/transparency/receipt.ts';
import { createVaultPool, openVault } from '../../../src/vault/index.ts';
import { logSigner, statementSigner } from '../../unit/transparency/fixtures.ts';
import { setupDb, sqlstate, statement, type TestDb } from './helpers.ts';

const ISSUER = 'https://scitt.test.invalid';

/** Counts the rows the log reads, to show proofs never scan the log. */
function countingPool(pool: pg.Pool): { pool: pg.Pool; rows: () => number; reset: () => void } {
  let rows = 0;
  const wrapped = new Proxy(pool, {
    get(target, prop, receiver) {
      if (prop === 'query') {
        return async (...args: unknown[]) => {
          const result = await (target.query as (...a: unknown[]) => Promise<pg.QueryResult>)(...args);
          rows += result.rows.length;
          return result;
        };
      }
      const value = Reflect.get(target, prop, receiver) as unknown;
      return typeof value === 'function' ? (value as (...a: unknown[]) => unknown).bind(target) : value;
    },
  });
  return { pool: wrapped, rows: () => rows, reset: () => void (rows = 0) };
}

describe('local SCITT log (PostgreSQL)', () => {
  let db: TestDb;
  let signer: KeySigner;
  let logKey: KeySigner;
  let log: LocalLog;

  beforeAll(async () => {
    db = await setupDb('log');
    signer = await statementSigner();
    logKey = logSigner();
    log = createLocalLog({ storage: db.vault.scittLog, signer: logKey, issuer: ISSUER });
  });
  afterAll(async () => {
    await db.close();
  });

  it('appends 200 statements; every root, receipt and proof matches an in-memory RFC 9162 tree', async () => {
    const statements = Array.from({ length: 200 }, () => statement(signer));
    const tree = new MemoryTree();
    for (const [i, s] of statements.entries()) {
      const result = await log.append(s);
      tree.appendLeafHash(leafHash(entryOf(s)));
      expect(result).toMatchObject({ index: i, created: true });
      expect(result.entryId).toBe(leafHash(entryOf(s)).toString('hex'));
      const verified = verifyReceipt({ receipt: result.receipt, statement: s, logKey: log.keys });
      expect(verified).toMatchObject({ ok: true, treeSize: i + 1, leafIndex: i, issuer: ISSUER });
      if (verified.ok) expect(verified.root.equals(tree.root(i + 1))).toBe(true);
    }
    expect((await log.treeHead()).root.equals(tree.root())).toBe(true);

    for (let n = 1; n <= 200; n++) {
      expect((await log.rootAt(n)).equals(tree.root(n))).toBe(true);
      // Every leaf for a few sizes, one leaf per size otherwise.
      const leaves = [1, 2, 3, 64, 65, 127, 128, 199, 200].includes(n)
        ? Array.from({ length: n }, (_, i) => i)
        : [n - 1, Math.floor(n / 2)];
      for (const i of leaves) {
        const proof = await log.inclusionProof(i, n);
        expect(proof.path.map((h) => h.toString('hex'))).toEqual(
          tree.inclusionProof(i, n).map((h) => h.toString('hex')),
        );
        expect(verifyInclusion(leafHash(entryOf(statements[i]!)), i, n, proof.path, proof.root)).toBe(true);
      }
    }

    for (const [m, n] of [
      [0, 200],
      [1, 200],
      [63, 64],
      [64, 65],
      [100, 200],
      [127, 129],
      [200, 200],
      [7, 13],
    ] as const) {
      const c = await log.consistencyProof(m, n);
      expect(c.proof.map((h) => h.toString('hex'))).toEqual(
        tree.consistencyProof(m, n).map((h) => h.toString('hex')),
      );
      expect(verifyConsistency(m, n, c.oldRoot, c.newRoot, c.proof)).toBe(true);
    }

    // A fresh receipt for an old entry in the larger tree still verifies, the stored one is unchanged.
    const first = await log.getEntryByIndex(0);
    const fresh = await log.receipt(first!.entryId, { treeSize: 200 });
    expect(verifyReceipt({ receipt: fresh, statement: statements[0]!, logKey: log.keys })).toMatchObject({
      ok: true,
      treeSize: 200,
      leafIndex: 0,
    });
    expect((await log.receipt(first!.entryId)).equals(first!.receipt)).toBe(true);
  });

  it('reads O(log n) stored hashes per proof, never the log', async () => {
    const counting = countingPool(db.pool);
    const reader = createLocalLog({
      storage: (await openVault(counting.pool)).scittLog,
      signer: logKey,
      issuer: ISSUER,
    });
    counting.reset();
    const { size } = await reader.treeHead();
    expect(size).toBeGreaterThanOrEqual(200);
    const bound = 2 * Math.ceil(Math.log2(size)) + 2; // + the head row
    for (const i of [0, 1, 99, size - 1]) {
      counting.reset();
      await reader.inclusionProof(i, size);
      expect(counting.rows()).toBeLessThanOrEqual(bound);
    }
    counting.reset();
    await reader.consistencyProof(37, size);
    expect(counting.rows()).toBeLessThanOrEqual(bound + 2);
  });

  it('is idempotent: the same statement is one entry, whatever receipts are attached to it', async () => {
    const s = statement(signer);
    const a = await log.append(s);
    const b = await log.append(s);
    const c = await log.append(attachReceipt(s, a.receipt));
    expect(a.created).toBe(true);
    expect(b).toMatchObject({ created: false, index: a.index, entryId: a.entryId });
    expect(c).toMatchObject({ created: false, index: a.index, entryId: a.entryId });
    expect(b.receipt.equals(a.receipt)).toBe(true);
    const { rows } = await db.admin.query(
      'SELECT count(*)::int AS n FROM scitt_log_entries WHERE entry_id = $1',
      [a.entryId],
    );
    expect(rows[0]).toEqual({ n: 1 });
  });

  it('serializes concurrent appenders (including racing duplicates) into one gapless, consistent log', async () => {
    const before = (await log.treeHead()).size;
    const WRITERS = 6;
    const PER = 20;
    const shared = Array.from({ length: 5 }, () => statement(signer)); // every writer submits these too
    const pools = Array.from({ length: WRITERS }, () => createVaultPool(db.url, { max: 2 }));
    try {
      const results = await Promise.all(
        pools.map(async (pool) => {
          const writer = createLocalLog({
            storage: (await openVault(pool)).scittLog,
            signer: logKey,
            issuer: ISSUER,
          });
          const mine = [...Array.from({ length: PER }, () => statement(signer)), ...shared];
          const out = [];
          for (const s of mine) out.push({ s, r: await writer.append(s) });
          return out;
        }),
      );
      const all = results.flat();
      const byEntry = new Map<string, number>();
      for (const { r } of all) {
        const seen = byEntry.get(r.entryId);
        if (seen !== undefined) expect(r.index).toBe(seen);
        byEntry.set(r.entryId, r.index);
      }
      expect(byEntry.size).toBe(WRITERS * PER + shared.length);
      expect([...byEntry.values()].sort((x, y) => x - y)).toEqual(
        Array.from({ length: byEntry.size }, (_, i) => before + i),
      );
      for (const { s, r } of all) {
        expect(verifyReceipt({ receipt: r.receipt, statement: s, logKey: log.keys }).ok).toBe(true);
      }
    } finally {
      await Promise.all(pools.map((p) => p.end()));
    }
    // The stored tree is the RFC 9162 tree of the stored leaves, in index order.
    const { rows } = await db.admin.query<{ leaf_hash: Buffer }>(
      'SELECT leaf_hash FROM scitt_log_entries ORDER BY idx',
    );
    const tree = new MemoryTree();
    for (const r of rows) tree.appendLeafHash(r.leaf_hash);
    const head = await log.treeHead();
    expect(head.size).toBe(rows.length);
    expect(head.root.equals(tree.root())).toBe(true);
    const c = await log.consistencyProof(before, head.size);
    expect(verifyConsistency(before, head.size, tree.root(before), head.root, c.proof)).toBe(true);
  });

  it('is append-only in the database, for the owner and the runtime role', async () => {
    for (const sql of [
      'UPDATE scitt_log_entries SET receipt = receipt',
      'DELETE FROM scitt_log_entries',
      'TRUNCATE scitt_log_entries',
      'UPDATE scitt_log_nodes SET hash = hash',
      'DELETE FROM scitt_log_nodes',
      'DELETE FROM scitt_log_head',
      'UPDATE scitt_log_head SET tree_size = tree_size - 1',
    ]) {
      expect(await sqlstate(db.admin.query(sql)), sql).toBe('23001');
    }
    expect(await sqlstate(db.pool.query('DELETE FROM scitt_log_entries'))).toBe('42501');
    expect(await sqlstate(db.pool.query('UPDATE scitt_log_entries SET receipt = receipt'))).toBe('42501');
    // The runtime role moves the head only through scitt_log_advance (migration 0008).
    expect(await sqlstate(db.pool.query('UPDATE scitt_log_head SET tree_size = tree_size + 1'))).toBe(
      '42501',
    );
    expect(await sqlstate(db.admin.query('UPDATE scitt_log_head SET root_hash = sha256(root_hash)'))).toBe(
      '23001',
    );
  });

  it('group-commits concurrent appends: one transaction and one receipt signature per batch', async () => {
    const before = (await log.treeHead()).size;
    const statements = Array.from({ length: 300 }, () => statement(signer));
    // Issued in one tick, as the worker does for a claimed batch: they cannot all go one by one.
    const results = await Promise.all(statements.map((s) => log.append(s)));
    expect(results.map((r) => r.index)).toEqual(statements.map((_, i) => before + i));
    expect(results.every((r) => r.created)).toBe(true);
    const signatures = new Set<string>();
    const sizes = new Set<number>();
    for (const [i, r] of results.entries()) {
      const v = verifyReceipt({ receipt: r.receipt, statement: statements[i]!, logKey: log.keys });
      expect(v).toMatchObject({ ok: true, leafIndex: before + i, issuer: ISSUER });
      if (!v.ok) continue;
      // A batch's receipts prove inclusion in the tree the batch committed.
      expect(v.treeSize).toBeGreaterThan(before + i);
      expect((await log.rootAt(v.treeSize)).equals(v.root)).toBe(true);
      sizes.add(v.treeSize);
      signatures.add(decodeReceipt(r.receipt).sign1.signature.toString('hex'));
      // What the log serves later is what the caller got.
      expect((await log.receipt(r.entryId)).equals(r.receipt)).toBe(true);
    }
    // One signature per committed tree head, and fewer heads than entries.
    expect(signatures.size).toBe(sizes.size);
    expect(sizes.size).toBeLessThan(statements.length / 10);
    expect((await log.treeHead()).size).toBe(before + statements.length);
  });

  it('appendMany: one atomic batch; duplicates inside it and already-stored entries are not re-added', async () => {
    const stored = statement(signer);
    const first = await log.append(stored);
    const a = statement(signer);
    const b = statement(signer);
    const before = (await log.treeHead()).size;
    const results = await log.appendMany([a, stored, b, a, attachReceipt(b, first.receipt)]);
    expect(results.map((r) => [r.index, r.created])).toEqual([
      [before, true],
      [first.index, false],
      [before + 1, true],
      [before, false],
      [before + 1, false],
    ]);
    expect(results[3]!.receipt.equals(results[0]!.receipt)).toBe(true);
    expect((await log.treeHead()).size).toBe(before + 2);
    // A malformed statement fails the whole call before anything is written.
    const c = statement(signer);
    await expect(log.appendMany([c, Buffer.from('junk')])).rejects.toMatchObject({
      code: 'MALFORMED_STATEMENT',
    });
    expect(await log.getEntry(leafHash(entryOf(c)).toString('hex'))).toBeNull();
    expect((await log.treeHead()).size).toBe(before + 2);
  });

  it('rejects sizes outside the log and statements without CWT claims', async () => {
    const { size } = await log.treeHead();
    await expect(log.rootAt(size + 1)).rejects.toMatchObject({ code: 'INVALID_TREE_SIZE' });
    await expect(log.consistencyProof(5, 4)).rejects.toMatchObject({ code: 'INVALID_TREE_SIZE' });
    await expect(log.inclusionProof(size, size)).rejects.toMatchObject({ code: 'ENTRY_NOT_FOUND' });
    await expect(log.receipt('0'.repeat(64))).rejects.toMatchObject({ code: 'ENTRY_NOT_FOUND' });
    await expect(log.append(Buffer.from('junk'))).rejects.toMatchObject({ code: 'MALFORMED_STATEMENT' });
    expect(await log.getEntry('not-an-id')).toBeNull();
  });
});
