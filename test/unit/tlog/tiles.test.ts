import { generateKeyPairSync } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import { MemoryTree, leafHash, merkleRoot } from '../../../src/transparency/merkle.ts';
import { signCheckpoint } from '../../../src/tlog/checkpoint.ts';
import { cosigner } from '../../../src/tlog/cosignature.ts';
import { ed25519NoteSigner, ed25519NoteVerifier, parseNote } from '../../../src/tlog/note.ts';
import { withSignatures } from '../../../src/tlog/checkpoint.ts';
import { parsePolicy, policyOf, quorumMet } from '../../../src/tlog/policy.ts';
import { formatTlogProof, parseTlogProof, verifyTlogProof } from '../../../src/tlog/proof.ts';
import {
  bundleLeaves,
  decodeEntryBundle,
  encodeEntryBundle,
  formatTileIndex,
  formatTilePath,
  parseTilePath,
  tileAvailable,
  tileNodes,
  tileWidthAt,
} from '../../../src/tlog/tiles.ts';

const code = (fn: () => unknown): string | undefined => {
  try {
    fn();
  } catch (err) {
    return (err as { code?: string }).code;
  }
  return undefined;
};

describe('tile paths (c2sp.org/tlog-tiles)', () => {
  it("encodes the spec's index example and round-trips", () => {
    expect(formatTileIndex(1234067)).toBe('x001/x234/067');
    expect(formatTileIndex(0)).toBe('000');
    expect(formatTileIndex(1000)).toBe('x001/000');
    expect(parseTilePath('0/x001/x234/067')).toEqual({
      level: 0,
      index: 1234067,
      width: 256,
      partial: false,
    });
    expect(parseTilePath('entries/x001/067.p/12')).toEqual({
      level: 'entries',
      index: 1067,
      width: 12,
      partial: true,
    });
    expect(formatTilePath({ level: 2, index: 5, width: 1, partial: true })).toBe('tile/2/005.p/1');
  });

  it('refuses non-canonical and out-of-range paths', () => {
    for (const p of [
      '0/x000/067', // leading zero element
      '0/67',
      '00/000',
      '64/000',
      '0/000.p/0',
      '0/000.p/256',
      '0/000.p/012',
      '0/001/002',
      'x/000',
      '0',
      '0/x001',
      '0/000.p',
    ]) {
      expect(
        code(() => parseTilePath(p)),
        p,
      ).toBe('MALFORMED_TILE_PATH');
    }
  });

  it("has the spec's tiles for trees of 70,000 and 256 leaves", () => {
    const size = 70_000;
    expect(tileWidthAt(0, 272, size)).toBe(256);
    expect(tileWidthAt(0, 273, size)).toBe(112);
    expect(tileWidthAt(0, 274, size)).toBe(0);
    expect(tileWidthAt(1, 0, size)).toBe(256);
    expect(tileWidthAt(1, 1, size)).toBe(17);
    expect(tileWidthAt(2, 0, size)).toBe(1);
    expect(tileWidthAt(3, 0, size)).toBe(0);
    expect(tileWidthAt(0, 0, 256)).toBe(256);
    expect(tileWidthAt(1, 0, 256)).toBe(1);
    expect(tileAvailable({ level: 0, index: 273, width: 112, partial: true }, size)).toBe(true);
    expect(tileAvailable({ level: 0, index: 273, width: 113, partial: true }, size)).toBe(false);
    expect(tileAvailable({ level: 0, index: 273, width: 256, partial: false }, size)).toBe(false);
    expect(tileWidthAt(9, 0, Number.MAX_SAFE_INTEGER)).toBe(0);
  });

  it('a tile is the MTH of each 256^L-leaf block, read from the stored perfect subtrees', () => {
    const entries = Array.from({ length: 600 }, (_, i) => Buffer.from(`entry ${i}`));
    const tree = new MemoryTree();
    for (const e of entries) tree.append(e);
    // Level 1, index 0, width 2: MTH of leaves [0, 256) and [256, 512), straight from the spec.
    const t = parseTilePath('1/000.p/2');
    const { level, first, count } = tileNodes(t);
    const stored = Array.from({ length: count }, (_, i) => tree.node({ level, index: first + i }));
    expect(stored[0]!.equals(merkleRoot(entries.slice(0, 256)))).toBe(true);
    expect(stored[1]!.equals(merkleRoot(entries.slice(256, 512)))).toBe(true);
    expect(bundleLeaves(parseTilePath('entries/002.p/88'))).toEqual({ start: 512, end: 600 });
  });

  it('entry bundles are uint16-length-prefixed and refuse an entry over 65535 bytes', () => {
    const bundle = encodeEntryBundle([Buffer.from('ab'), Buffer.alloc(0), Buffer.from('xyz')]);
    expect(bundle.toString('hex')).toBe('00026162' + '0000' + '000378797a');
    expect(decodeEntryBundle(bundle).map((b) => b.toString())).toEqual(['ab', '', 'xyz']);
    expect(code(() => encodeEntryBundle([Buffer.alloc(65536)]))).toBe('ENTRY_TOO_LARGE');
    expect(code(() => decodeEntryBundle(bundle.subarray(0, 5)))).toBe('MALFORMED_BUNDLE');
  });
});

describe('tlog proofs and witness policies', () => {
  const logKey = generateKeyPairSync('ed25519').privateKey;
  const log = ed25519NoteSigner('log.example/vault', logKey);
  const w1 = cosigner('w1.example', generateKeyPairSync('ed25519').privateKey);
  const w2 = cosigner('w2.example', generateKeyPairSync('ed25519').privateKey);
  const w3 = cosigner('w3.example', generateKeyPairSync('ed25519').privateKey);
  const entries = Array.from({ length: 13 }, (_, i) => Buffer.from(`record ${i}`));
  const tree = new MemoryTree();
  for (const e of entries) tree.append(e);
  const note = signCheckpoint({ origin: log.name, treeSize: 13, rootHash: tree.root() }, log);
  const text = parseNote(note).text;
  const cosigned = withSignatures(parseNote(note), [w1.cosign(text, 100n), w2.cosign(text, 101n)]);
  const proofOf = (i: number, checkpoint = cosigned) =>
    formatTlogProof({ index: i, proof: tree.inclusionProof(i), checkpoint });

  it('round-trips the text format', () => {
    const text = formatTlogProof({
      extra: Buffer.from('hi'),
      index: 5,
      proof: tree.inclusionProof(5),
      checkpoint: cosigned,
    });
    expect(text.startsWith('c2sp.org/tlog-proof@v1\nextra aGk=\nindex 5\n')).toBe(true);
    const p = parseTlogProof(text);
    expect(p.index).toBe(5);
    expect(p.extra?.toString()).toBe('hi');
    expect(p.checkpoint).toBe(cosigned);
    expect(code(() => parseTlogProof('c2sp.org/tlog-proof@v2\nindex 1\n\n' + cosigned))).toBe(
      'MALFORMED_PROOF',
    );
    expect(code(() => parseTlogProof('c2sp.org/tlog-proof@v1\nindex 01\n\n' + cosigned))).toBe(
      'MALFORMED_PROOF',
    );
  });

  it('verifies inclusion, log signature and a 2-of-3 quorum; fails each when broken', () => {
    const policy = policyOf({ logVkeys: [log.vkey], witnessVkeys: [w1.vkey, w2.vkey, w3.vkey], quorum: 2 });
    const opts = {
      leafHash: leafHash(entries[7]!),
      logVerifiers: [ed25519NoteVerifier(log.vkey)],
      origin: log.name,
      policy,
    };
    expect([...verifyTlogProof(proofOf(7), opts).cosigners].sort()).toEqual(['w1', 'w2']);
    // another record's leaf, another index, a changed proof hash
    expect(code(() => verifyTlogProof(proofOf(7), { ...opts, leafHash: leafHash(entries[6]!) }))).toBe(
      'INCLUSION_INVALID',
    );
    expect(code(() => verifyTlogProof(proofOf(7).replace('index 7', 'index 6'), opts))).toBe(
      'INCLUSION_INVALID',
    );
    // quorum of 3: only two cosigned
    const all = policyOf({ logVkeys: [log.vkey], witnessVkeys: [w1.vkey, w2.vkey, w3.vkey] });
    expect(code(() => verifyTlogProof(proofOf(7), { ...opts, policy: all }))).toBe('QUORUM_NOT_MET');
    // the checkpoint alone, no cosignatures
    expect(code(() => verifyTlogProof(proofOf(7, note), opts))).toBe('QUORUM_NOT_MET');
    // a cosignature line of a known witness that does not verify rejects the note
    const forged = withSignatures(parseNote(note), [
      w1.cosign(text.replace('\n13\n', '\n14\n'), 100n),
      w2.cosign(text, 1n),
    ]);
    expect(code(() => verifyTlogProof(proofOf(7, forged), opts))).toBe('NOTE_SIGNATURE_INVALID');
    // another log key
    const other = ed25519NoteSigner(log.name, generateKeyPairSync('ed25519').privateKey);
    expect(
      code(() => verifyTlogProof(proofOf(7), { ...opts, logVerifiers: [ed25519NoteVerifier(other.vkey)] })),
    ).toBe('NOTE_SIGNATURE_INVALID');
  });

  it('parses c2sp.org/tlog-policy groups and evaluates nested quorums', () => {
    const policy = parsePolicy(
      [
        '# two organisations',
        `log ${log.vkey} https://log.example/`,
        `witness X1 ${w1.vkey}`,
        `witness X2 ${w2.vkey}`,
        `\twitness Y1 ${w3.vkey}   https://w3.example/`,
        'group X 2 X1 X2',
        'group Y any Y1',
        'group XY all X Y',
        'quorum XY',
        '',
      ].join('\n'),
    );
    expect(quorumMet(policy.quorum, new Set(['X1', 'X2', 'Y1']))).toBe(true);
    expect(quorumMet(policy.quorum, new Set(['X1', 'Y1']))).toBe(false);
    expect(quorumMet(policy.quorum, new Set(['X1', 'X2']))).toBe(false);
    expect(policy.witnesses.map((w) => w.name)).toEqual(['X1', 'X2', 'Y1']);
    expect(quorumMet(parsePolicy('quorum none').quorum, new Set())).toBe(true);
    for (const bad of [
      'quorum X', // undefined
      `witness A ${w1.vkey}\nwitness B ${w1.vkey}\nquorum A`, // same key twice
      `witness A ${w1.vkey}\ngroup G 2 A\nquorum G`, // k > n
      `witness A ${w1.vkey}\ngroup G any A A\nquorum G`, // member twice
      `witness A ${w1.vkey}`, // no quorum
      `witness A ${w1.vkey}\nquorum A\nquorum A`,
      `witness A ${log.vkey}\nquorum A`, // a log key as a witness key
      `log ${w1.vkey}\nquorum none`, // a witness key as a log key
      'frobnicate\nquorum none',
    ]) {
      expect(
        code(() => parsePolicy(bad)),
        bad,
      ).toBe('MALFORMED_POLICY');
    }
    expect(code(() => policyOf({ witnessVkeys: [w1.vkey], quorum: 2 }))).toBe('MALFORMED_POLICY');
  });
});
