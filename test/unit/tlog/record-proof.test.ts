import { generateKeyPairSync } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import { recordLeafHash, type LeafFields } from '../../../src/checkpoint/leaf.ts';
import { MemoryTree } from '../../../src/transparency/merkle.ts';
import { signCheckpoint, withSignatures } from '../../../src/tlog/checkpoint.ts';
import { cosigner } from '../../../src/tlog/cosignature.ts';
import { ed25519NoteSigner, ed25519NoteVerifier, parseNote } from '../../../src/tlog/note.ts';
import { policyOf } from '../../../src/tlog/policy.ts';
import { formatTlogProof } from '../../../src/tlog/proof.ts';
import { verifyRecordTlogProof } from '../../../src/tlog/record-proof.ts';

const code = (fn: () => unknown): string | undefined => {
  try {
    fn();
  } catch (err) {
    return (err as { code?: string }).code;
  }
  return undefined;
};

describe("a record's tlog-proof in the vault log", () => {
  const records: LeafFields[] = Array.from({ length: 6 }, (_, i) => ({
    seq: i + 1,
    id: `0190a5c8-0000-7000-8000-${String(i + 1).padStart(12, '0')}`,
    digest: `sha256:${String(i).repeat(64).slice(0, 64)}`,
    namespace: i % 2 === 0 ? 'team-a' : 'team-b',
    kind: 'step',
    run_id: '0190a5c8-0000-7000-8000-000000000000',
    step_id: 'fetch',
    subjects: [`step:r:${i}`],
    created_at: '2026-01-01T00:00:00.000Z',
  }));
  const tree = new MemoryTree();
  for (const r of records) tree.appendLeafHash(recordLeafHash(r));
  const log = ed25519NoteSigner('v.test/v1/tlog/vault', generateKeyPairSync('ed25519').privateKey);
  const w = cosigner('w.test', generateKeyPairSync('ed25519').privateKey);
  const note = signCheckpoint({ origin: log.name, treeSize: 6, rootHash: tree.root() }, log);
  const cp = withSignatures(parseNote(note), [w.cosign(parseNote(note).text, 5n)]);
  const proofOf = (seq: number) =>
    formatTlogProof({ index: seq - 1, proof: tree.inclusionProof(seq - 1), checkpoint: cp });
  const opts = {
    logVerifiers: [ed25519NoteVerifier(log.vkey)],
    origin: log.name,
    policy: policyOf({ witnessVkeys: [w.vkey] }),
  };
  const api = (r: LeafFields) => ({ ...r, predicate_type: 'x', predicate: {} });

  it('verifies each record from the fields the API serves', () => {
    for (const r of records)
      expect(verifyRecordTlogProof(api(r), proofOf(r.seq), opts).cosigners).toEqual(['w1']);
  });

  it('fails a relabelled record, a proof of another position, and a record without its leaf fields', () => {
    expect(
      code(() => verifyRecordTlogProof({ ...api(records[2]!), namespace: 'team-b' }, proofOf(3), opts)),
    ).toBe('INCLUSION_INVALID');
    expect(code(() => verifyRecordTlogProof(api(records[2]!), proofOf(4), opts))).toBe('INCLUSION_INVALID');
    const { seq: _seq, ...noSeq } = api(records[2]!);
    expect(code(() => verifyRecordTlogProof(noSeq, proofOf(3), opts))).toBe('MALFORMED_PROOF');
  });
});
