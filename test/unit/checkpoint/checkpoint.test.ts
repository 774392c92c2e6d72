import { createHash, randomBytes, randomUUID } from 'node:crypto';
import canonicalize from 'canonicalize';
import { beforeAll, describe, expect, it } from 'vitest';
import { generateDevPki } from '../../../hack/dev-pki.ts';
import {
  leafEntry,
  leafFieldsOfApiRecord,
  recordLeafHash,
  type LeafFields,
} from '../../../src/checkpoint/leaf.ts';
import { signCheckpoint, verifyCheckpoint, type Checkpoint } from '../../../src/checkpoint/statement.ts';
import { makeCheckpoint } from '../../../src/checkpoint/tree.ts';
import { assertConsistent, checkLeaves, LeafFold } from '../../../src/checkpoint/verify.ts';
import { signerFromPem, type KeySigner } from '../../../src/signing/index.ts';
import { MemoryTree } from '../../../src/transparency/merkle.ts';
import { buildSignedStatement } from '../../../src/transparency/statement.ts';
import { envelope } from '../transparency/fixtures.ts';
import { memoryCheckpoints } from './memory-repository.ts';

let signer: KeySigner;
beforeAll(async () => {
  signer = signerFromPem(await generateDevPki());
});

const fields = (seq: number, over: Partial<LeafFields> = {}): LeafFields => ({
  seq,
  id: randomUUID(),
  digest: `sha256:${randomBytes(32).toString('hex')}`,
  namespace: 'team-a',
  kind: 'step',
  run_id: '0190a6c0-0000-7000-8000-000000000001',
  step_id: 'fetch',
  subjects: ['step:0190a6c0-0000-7000-8000-000000000001:fetch'],
  created_at: '2026-01-01T00:00:00.000Z',
  ...over,
});

describe('record leaves', () => {
  it('are SHA-256(0x00 || RFC 8785 JSON of the documented fields), as an independent canonicaliser computes', () => {
    const f = fields(7, { step_id: null, subjects: ['run:x', 'b', 'a'] });
    const expected = canonicalize({
      type: 'https://vault.service.dev/chain/leaf/v1',
      seq: 7,
      id: f.id,
      digest: f.digest,
      namespace: 'team-a',
      kind: 'step',
      run_id: f.run_id,
      step_id: null,
      subjects: ['run:x', 'b', 'a'],
      created_at: f.created_at,
    })!;
    expect(leafEntry(f).toString('utf8')).toBe(expected);
    const hash = createHash('sha256')
      .update(Buffer.from([0]))
      .update(expected)
      .digest();
    expect(recordLeafHash(f).equals(hash)).toBe(true);
  });

  it('read back from an API record; every label changes the leaf', () => {
    const f = fields(3);
    const api = { ...f, predicate: {}, envelope: {}, extra: 1 } as Record<string, unknown>;
    expect(leafFieldsOfApiRecord(api)).toEqual(f);
    expect(leafFieldsOfApiRecord({ ...api, seq: '3' })).toBeUndefined();
    expect(leafFieldsOfApiRecord({ ...api, subjects: [1] })).toBeUndefined();
    const base = recordLeafHash(f);
    for (const change of [
      { namespace: 'team-b' },
      { run_id: null },
      { step_id: 'other' },
      { kind: 'run' },
      { subjects: [] },
      { seq: 4 },
      { id: randomUUID() },
      { digest: `sha256:${'0'.repeat(64)}` },
      { created_at: '2026-01-01T00:00:00.001Z' },
    ]) {
      expect(recordLeafHash({ ...f, ...change }).equals(base), JSON.stringify(change)).toBe(false);
    }
  });
});

describe('signed checkpoints', () => {
  const checkpoint = (): Checkpoint => ({
    treeSize: 12,
    rootHash: randomBytes(32),
    lastId: randomUUID(),
    issuedAt: '2026-01-01T00:00:00.000Z',
  });

  it('verify with the signer key or its CA, and say what they sign', () => {
    const c = checkpoint();
    const bytes = signCheckpoint(c, signer, signer.caCertificates);
    expect(verifyCheckpoint(bytes, { publicKeys: [signer.publicKey] })).toEqual(c);
    expect(verifyCheckpoint(bytes, { trustAnchors: signer.caCertificates })).toEqual(c);
  });

  it('fail for another key or CA, a changed byte, or a statement that is not a checkpoint', async () => {
    const bytes = signCheckpoint(checkpoint(), signer, signer.caCertificates);
    const other = signerFromPem(await generateDevPki());
    const code = (b: Uint8Array, trust: Parameters<typeof verifyCheckpoint>[1]) => {
      try {
        verifyCheckpoint(b, trust);
        return 'ok';
      } catch (err) {
        return (err as { code: string }).code;
      }
    };
    expect(code(bytes, { publicKeys: [other.publicKey] })).toBe('CHECKPOINT_SIGNATURE_INVALID');
    expect(code(bytes, { trustAnchors: other.caCertificates })).toBe('CHECKPOINT_SIGNATURE_INVALID');
    const flipped = Buffer.from(bytes);
    const at = flipped.indexOf(Buffer.from('"tree_size":12'));
    flipped[at + 12] = '3'.charCodeAt(0);
    expect(code(flipped, { publicKeys: [signer.publicKey] })).toBe('CHECKPOINT_SIGNATURE_INVALID');
    expect(code(Buffer.from('junk'), { publicKeys: [signer.publicKey] })).toBe('CHECKPOINT_INVALID');
    const { envelope: env, digest } = envelope(signer);
    const attestation = buildSignedStatement({
      attestationId: randomUUID(),
      envelope: env,
      digest,
      signer,
      caCertificates: signer.caCertificates,
    }).bytes;
    expect(code(attestation, { publicKeys: [signer.publicKey] })).toBe('CHECKPOINT_INVALID');
  });
});

describe('the verifier fold', () => {
  const leaves = (n: number) => Array.from({ length: n }, () => randomBytes(32));
  // What GET /v1/chain/leaves pages amount to: an async stream of (seq, leaf hash).
  const served = (hashes: readonly Buffer[], seqs = hashes.map((_, i) => i + 1)) => ({
    async *[Symbol.asyncIterator]() {
      for (const [i, h] of hashes.entries()) yield await Promise.resolve({ seq: seqs[i]!, leafHash: h });
    },
  });

  it('folds every prefix to the RFC 9162 root (against MemoryTree)', () => {
    const hashes = leaves(70);
    const tree = new MemoryTree();
    const fold = new LeafFold();
    expect(fold.root().equals(tree.root())).toBe(true);
    for (const h of hashes) {
      tree.appendLeafHash(h);
      fold.append(h);
      expect(fold.root().equals(tree.root()), `size ${tree.size}`).toBe(true);
    }
  });

  it('reports a gap, fewer records, a wrong root, and a held record that moved', async () => {
    const hashes = leaves(20);
    const tree = new MemoryTree();
    hashes.forEach((h) => tree.appendLeafHash(h));
    const cp = (size: number): Checkpoint => ({
      treeSize: size,
      rootHash: tree.root(size),
      lastId: '',
      issuedAt: '',
    });
    expect((await checkLeaves(served(hashes), [cp(20), cp(9)])).findings).toEqual([]);
    const gap = [...hashes.slice(0, 4), ...hashes.slice(5)];
    const seqs = [1, 2, 3, 4, ...Array.from({ length: 15 }, (_, i) => i + 6)];
    expect((await checkLeaves(served(gap, seqs), [cp(20)])).findings.map((f) => f.code)).toEqual([
      'CHAIN_GAP',
    ]);
    expect((await checkLeaves(served(gap), [cp(20), cp(9)])).findings.map((f) => f.code)).toEqual([
      'ROOT_MISMATCH',
      'CHAIN_GAP',
    ]);
    const swapped = [...hashes];
    [swapped[2], swapped[3]] = [swapped[3]!, swapped[2]!];
    const held = new Map([[3, hashes[2]!]]);
    expect((await checkLeaves(served(swapped), [cp(20)], held)).findings.map((f) => f.code)).toEqual([
      'LEAF_MISMATCH',
      'ROOT_MISMATCH',
    ]);
  });

  it('reports held records beyond the newest checkpoint as NOT_COVERED, and counts only those checked', async () => {
    const hashes = leaves(20);
    const tree = new MemoryTree();
    hashes.slice(0, 15).forEach((h) => tree.appendLeafHash(h));
    const cp15: Checkpoint = { treeSize: 15, rootHash: tree.root(15), lastId: '', issuedAt: '' };
    // Held: seq 5 (covered, matches) and 17, 18 (served, but past the checkpoint; 18 even differs).
    const held = new Map([
      [5, hashes[4]!],
      [17, hashes[16]!],
      [18, randomBytes(32)],
    ]);
    const walked = await checkLeaves(served(hashes), [cp15], held);
    expect(walked.findings.map((f) => f.code)).toEqual(['NOT_COVERED']);
    expect(walked.findings[0]!.message).toMatch(/^2 record\(s\) you hold \(seq 17…18\) are beyond/);
    expect(walked.held).toBe(1);
    expect(walked.count).toBe(15);
  });

  it('accepts a consistency proof of an extension, refuses a changed history or a rollback', () => {
    const tree = new MemoryTree();
    leaves(30).forEach((h) => tree.appendLeafHash(h));
    const cp = (size: number, root = tree.root(size)): Checkpoint => ({
      treeSize: size,
      rootHash: root,
      lastId: '',
      issuedAt: '',
    });
    for (const [m, n] of [
      [1, 30],
      [9, 12],
      [16, 30],
      [13, 13],
    ] as const) {
      expect(() => assertConsistent(cp(m), cp(n), tree.consistencyProof(m, n)), `${m} → ${n}`).not.toThrow();
    }
    const otherHistory = new MemoryTree();
    leaves(30).forEach((h) => otherHistory.appendLeafHash(h));
    expect(() => assertConsistent(cp(9, otherHistory.root(9)), cp(12), tree.consistencyProof(9, 12))).toThrow(
      expect.objectContaining({ code: 'INCONSISTENT' }),
    );
    expect(() => assertConsistent(cp(12), cp(9), [])).toThrow(
      expect.objectContaining({ code: 'INCONSISTENT' }),
    );
  });
});

describe('the checkpointer extending the stored tree', () => {
  it('stores exactly the perfect subtrees of an RFC 9162 tree and signs its root, across any extension sizes', async () => {
    const repo = memoryCheckpoints();
    const reference = new MemoryTree();
    for (const grow of [1, 1, 1, 5, 8, 1, 15, 32, 3, 61]) {
      for (let i = 0; i < grow; i++) reference.appendLeafHash(recordLeafHash(repo.appendRecord()));
      const { checkpoint, created } = await makeCheckpoint(repo, {
        signer,
        caCertificates: signer.caCertificates,
      });
      expect(created).toBe(true);
      expect(checkpoint!.treeSize).toBe(reference.size);
      expect(checkpoint!.rootHash.equals(reference.root())).toBe(true);
      const signed = verifyCheckpoint(checkpoint!.statement, { publicKeys: [signer.publicKey] });
      expect(signed.rootHash.equals(reference.root())).toBe(true);
      for (const [key, hash] of repo.stored()) {
        const [level, index] = key.split('/').map(Number) as [number, number];
        expect(hash.equals(reference.node({ level, index })), key).toBe(true);
      }
    }
    // Nothing new: no checkpoint.
    expect((await makeCheckpoint(repo, { signer })).created).toBe(false);
  });
});

describe('the checkpointer against a checkpoint kept outside the database (docs/failover.md)', () => {
  const signing = () => ({ signer, caCertificates: signer.caCertificates });

  it('signs on while the vault still holds the kept checkpoint: behind, at or beyond its size', async () => {
    const repo = memoryCheckpoints();
    for (let i = 0; i < 9; i++) repo.appendRecord();
    const kept = (await makeCheckpoint(repo, signing())).checkpoint!;
    // Its row lost, the records kept (only the checkpoint's own transaction was lost): the tree
    // folds to the same root at its size, so the next checkpoint extends it.
    for (let i = 0; i < 4; i++) repo.appendRecord();
    const next = await makeCheckpoint(repo, signing(), undefined, kept);
    expect(next.created).toBe(true);
    expect(next.checkpoint!.treeSize).toBe(13);
    // The kept one at or behind the vault's newest checkpoint: checked against the stored subtrees.
    expect((await makeCheckpoint(repo, signing(), undefined, kept)).created).toBe(false);
    expect((await makeCheckpoint(repo, signing(), undefined, next.checkpoint!)).created).toBe(false);
  });

  it('refuses (HISTORY_LOST) when the vault holds fewer records than the kept checkpoint covers', async () => {
    const primary = memoryCheckpoints();
    for (let i = 0; i < 10; i++) primary.appendRecord();
    const kept = (await makeCheckpoint(primary, signing())).checkpoint!;
    // The promoted standby had 6 of the 10 records, and new ones arrive after the failover.
    const standby = memoryCheckpoints();
    for (let i = 0; i < 6; i++) standby.appendRecord();
    await expect(makeCheckpoint(standby, signing(), undefined, kept)).rejects.toMatchObject({
      code: 'HISTORY_LOST',
      message: expect.stringMatching(/10 records .* the vault holds 6/) as unknown,
    });
    // New records past the kept size give another tree of that size: still refused, nothing signed.
    for (let i = 0; i < 7; i++) standby.appendRecord();
    await expect(makeCheckpoint(standby, signing(), undefined, kept)).rejects.toMatchObject({
      code: 'HISTORY_LOST',
      message: expect.stringMatching(/first 10 records fold to another root/) as unknown,
    });
    expect(await standby.get()).toBeNull();
    // Without the kept checkpoint (an operator accepted the loss) the new history is signed.
    expect((await makeCheckpoint(standby, signing())).checkpoint!.treeSize).toBe(13);
  });

  it('refuses when the vault already signed another history past the kept size', async () => {
    const primary = memoryCheckpoints();
    for (let i = 0; i < 5; i++) primary.appendRecord();
    const kept = (await makeCheckpoint(primary, signing())).checkpoint!;
    const other = memoryCheckpoints();
    for (let i = 0; i < 8; i++) other.appendRecord();
    await makeCheckpoint(other, signing());
    other.appendRecord();
    await expect(makeCheckpoint(other, signing(), undefined, kept)).rejects.toMatchObject({
      code: 'HISTORY_LOST',
    });
  });
});
