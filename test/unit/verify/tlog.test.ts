import { generateKeyPairSync } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import { recordLeafHash, type LeafFields } from '../../../src/checkpoint/leaf.ts';
import { tlogKeysEntry, tlogProofEntry } from '../../../src/verify/entries/tlog.ts';
import {
  BundleState,
  ENTRY_HANDLERS,
  type EntryHandler,
  type VerifyBundleOptions,
} from '../../../src/verify/index.ts';
import { TlogBundleCheck } from '../../../src/verify/tlog.ts';
import { MemoryTree } from '../../../src/transparency/merkle.ts';
import { signCheckpoint, withSignatures } from '../../../src/tlog/checkpoint.ts';
import { cosigner } from '../../../src/tlog/cosignature.ts';
import { ed25519NoteSigner, parseNote } from '../../../src/tlog/note.ts';
import { parsePolicy, policyOf } from '../../../src/tlog/policy.ts';
import { formatTlogProof } from '../../../src/tlog/proof.ts';

/** The bundle verifier's tlog-proof checks alone, on hostile input. */
const ORIGIN = 'v.test/v1/tlog/vault';
const records: LeafFields[] = Array.from({ length: 5 }, (_, i) => ({
  seq: i + 1,
  id: `0190a5c8-0000-7000-8000-${String(i + 1).padStart(12, '0')}`,
  digest: `sha256:${'ab'.repeat(32)}`,
  namespace: 'team-a',
  kind: 'policy',
  run_id: null,
  step_id: null,
  subjects: [],
  created_at: '2026-01-01T00:00:00.000Z',
}));
const tree = new MemoryTree();
for (const r of records) tree.appendLeafHash(recordLeafHash(r));
const log = ed25519NoteSigner(ORIGIN, generateKeyPairSync('ed25519').privateKey);
const w1 = cosigner('w1.test', generateKeyPairSync('ed25519').privateKey);
const w2 = cosigner('w2.test', generateKeyPairSync('ed25519').privateKey);
const note = signCheckpoint({ origin: ORIGIN, treeSize: 5, rootHash: tree.root() }, log);
const text = parseNote(note).text;
const proofOf = (seq: number, checkpoint: string) =>
  Buffer.from(formatTlogProof({ index: seq - 1, proof: tree.inclusionProof(seq - 1), checkpoint }));
const cosignedBy1 = withSignatures(parseNote(note), [w1.cosign(text, 1n)]);
const path = (seq: number) => `attestations/${records[seq - 1]!.id}/vault.tlog-proof`;
const codes = (ps: { code: string }[]) => ps.map((p) => p.code);

describe('tlog-proofs in a bundle', () => {
  it('with a 1-of-2 policy: a cosigned proof passes and is counted; the summary names the checkpoint', () => {
    const check = new TlogBundleCheck({
      policy: policyOf({ logVkeys: [log.vkey], witnessVkeys: [w1.vkey, w2.vkey], quorum: 1 }),
    });
    expect(check.proof(path(2), { ...records[1]! }, proofOf(2, cosignedBy1))).toEqual([]);
    expect(check.closed(records[1]!.id, true)).toEqual([]);
    expect(check.summary()).toEqual({ proofs: 1, checkpoints: [`${ORIGIN} size 5 (cosigned by w1)`] });
  });

  it('refuses: no cosignature of the quorum, a relabelled record, a changed proof, another log key, no proof at all', () => {
    const check = new TlogBundleCheck({
      policy: policyOf({ logVkeys: [log.vkey], witnessVkeys: [w2.vkey] }),
    });
    expect(codes(check.proof(path(1), { ...records[0]! }, proofOf(1, cosignedBy1)))).toEqual([
      'WITNESS_QUORUM_NOT_MET',
    ]);
    const lenient = new TlogBundleCheck({ logVkeys: [log.vkey] });
    expect(codes(lenient.proof(path(1), { ...records[0]!, namespace: 'team-b' }, proofOf(1, note)))).toEqual([
      'TLOG_INCLUSION_INVALID',
    ]);
    const changed = Buffer.from(
      proofOf(1, note)
        .toString()
        .replace(/\nindex 0\n[A-Za-z0-9+/]/, '\nindex 0\nA'),
    );
    expect(codes(lenient.proof(path(1), { ...records[0]! }, changed))[0]).toMatch(
      /TLOG_(INCLUSION|PROOF)_INVALID/,
    );
    const other = ed25519NoteSigner(ORIGIN, generateKeyPairSync('ed25519').privateKey);
    expect(
      codes(
        new TlogBundleCheck({ logVkeys: [other.vkey] }).proof(path(1), { ...records[0]! }, proofOf(1, note)),
      ),
    ).toEqual(['TLOG_CHECKPOINT_INVALID']);
    expect(codes(check.closed(records[3]!.id, false))).toEqual(['TLOG_PROOF_MISSING']);
    expect(lenient.closed(records[3]!.id, false)).toEqual([]);
    expect(new TlogBundleCheck({ policy: parsePolicy('quorum none') }).closed(records[3]!.id, false)).toEqual(
      [],
    );
  });

  it("the bundle's own note keys are used only when the caller gives none; malformed ones are reported", () => {
    const check = new TlogBundleCheck();
    expect(codes(check.proof(path(3), { ...records[2]! }, proofOf(3, note)))).toEqual(['TLOG_KEY_UNKNOWN']);
    expect(codes(check.keys('tlog/vault.vkeys', Buffer.from(`${log.vkey}\nnot a key\n`)))).toEqual([
      'MALFORMED',
    ]);
    expect(check.proof(path(3), { ...records[2]! }, proofOf(3, note))).toEqual([]);
    expect(check.summary().checkpoints).toEqual([`${ORIGIN} size 5 (no policy witness checked)`]);
    // A caller's key wins over the bundle's: a bundle shipping a key of its own making is not believed.
    const forger = ed25519NoteSigner(ORIGIN, generateKeyPairSync('ed25519').privateKey);
    const strict = new TlogBundleCheck({ logVkeys: [log.vkey] });
    strict.keys('tlog/vault.vkeys', Buffer.from(`${forger.vkey}\n`));
    const forged = signCheckpoint({ origin: ORIGIN, treeSize: 5, rootHash: tree.root() }, forger);
    expect(codes(strict.proof(path(3), { ...records[2]! }, proofOf(3, forged)))).toEqual([
      'TLOG_CHECKPOINT_INVALID',
    ]);
  });
});

describe('the tlog entry handlers (entries/tlog.ts) on a BundleState', () => {
  /** A state with every handler started, the record `seq` open (as its envelope.json opens it). */
  function opened(options: VerifyBundleOptions, seq: number): BundleState {
    const state = new BundleState(options);
    for (const h of ENTRY_HANDLERS) h.start?.(state);
    const r = records[seq - 1]!;
    state.openRecord({
      id: r.id,
      path: `attestations/${r.id}/envelope.json`,
      record: { ...r },
      envelope: undefined,
      material: undefined,
      timestamps: [],
      statement: undefined,
      trust: undefined,
      published: undefined,
      seen: new Set(['envelope.json']),
      aibom: undefined,
    });
    return state;
  }
  const feed = (state: BundleState, handler: EntryHandler, p: string, content: Buffer) =>
    handler.onEntry(state, {
      path: p,
      size: content.length,
      sha256: '',
      content,
      match: handler.pattern.exec(p)!,
    });
  const found = (state: BundleState) => state.problems.map((p) => `${p.entry} ${p.code}`);
  const anchors = { trustAnchors: [] };

  it('a cosigned proof under a 1-of-2 policy is counted in the result; the record closes clean', () => {
    const policy = policyOf({ logVkeys: [log.vkey], witnessVkeys: [w1.vkey, w2.vkey], quorum: 1 });
    const state = opened({ ...anchors, tlog: { policy } }, 2);
    feed(state, tlogProofEntry, path(2), proofOf(2, cosignedBy1));
    state.closeRecord();
    expect(found(state)).toEqual([]);
    expect(state.result(false).tlog).toEqual({
      proofs: 1,
      checkpoints: [`${ORIGIN} size 5 (cosigned by w1)`],
    });
  });

  it('under a policy: a checkpoint the quorum did not cosign fails its entry, a record without a proof fails when it closes', () => {
    const policy = policyOf({ logVkeys: [log.vkey], witnessVkeys: [w2.vkey] });
    const state = opened({ ...anchors, tlog: { policy } }, 1);
    feed(state, tlogProofEntry, path(1), proofOf(1, cosignedBy1));
    state.closeRecord();
    const bare = opened({ ...anchors, tlog: { policy } }, 4);
    bare.closeRecord();
    expect(found(state)).toEqual([`${path(1)} WITNESS_QUORUM_NOT_MET`]);
    expect(found(bare)).toEqual([`${path(4)} TLOG_PROOF_MISSING`]);
    expect(state.result(false).ok).toBe(false);
  });

  it("the bundle's vkeys entry serves when the caller gives no key; a proof of another record, or a caller's bad key, is reported", () => {
    const state = opened(anchors, 3);
    feed(state, tlogKeysEntry, 'tlog/vault.vkeys', Buffer.from(`${log.vkey}\n`));
    feed(state, tlogProofEntry, path(3), proofOf(3, note));
    feed(state, tlogProofEntry, path(5), proofOf(5, note)); // not next to its record
    expect(found(state)).toEqual([`${path(5)} UNEXPECTED_ENTRY`]);
    expect(state.result(false).tlog.proofs).toBe(1);
    const badKey = opened({ ...anchors, tlog: { logVkeys: ['not a key'] } }, 3);
    feed(badKey, tlogProofEntry, path(3), proofOf(3, note));
    badKey.closeRecord();
    expect(found(badKey)).toEqual(['(archive) TLOG_KEY_INVALID']);
  });
});
