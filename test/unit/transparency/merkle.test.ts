import { createHash } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import {
  consistencyRanges,
  EMPTY_ROOT,
  inclusionRanges,
  leafHash,
  MemoryTree,
  merkleRoot,
  perfectNodes,
  rootFromInclusionProof,
  verifyConsistency,
  verifyInclusion,
} from '../../../src/transparency/merkle.ts';

/**
 * A second, deliberately naive implementation written straight from the RFC 9162 text
 * (§2.1.1 MTH, §2.1.3.1 PATH, §2.1.4.1 PROOF/SUBPROOF): recursive, over the raw entries, sharing
 * no code with src/transparency/merkle.ts (not even the hash helpers).
 */
const sha256 = (...parts: Uint8Array[]): Buffer => {
  const h = createHash('sha256');
  for (const p of parts) h.update(p);
  return h.digest();
};

/** "k be the largest power of two smaller than n (i.e., k < n <= 2k)" */
const largestPowerOfTwoBelow = (n: number): number => {
  let k = 1;
  while (k < n) k *= 2;
  return k / 2;
};

/**
 * MTH is a pure function of the sequence, so it is memoised by (first entry, length): every D in
 * this file is a contiguous slice of one array of distinct Buffers, and that pair names it. The
 * memo changes no result, only how often the recursion runs: the exhaustive test below asks for
 * the same subtrees ~320,000 times (1.5-3 s of hashing on a busy machine without it).
 */
const mthMemo = new WeakMap<Uint8Array, Map<number, Buffer>>();

function MTH(D: readonly Uint8Array[]): Buffer {
  const n = D.length;
  if (n === 0) return sha256();
  let byLength = mthMemo.get(D[0]!);
  if (!byLength) mthMemo.set(D[0]!, (byLength = new Map<number, Buffer>()));
  const known = byLength.get(n);
  if (known) return known;
  let out: Buffer;
  if (n === 1) out = sha256(Buffer.from([0x00]), D[0]!);
  else {
    const k = largestPowerOfTwoBelow(n);
    out = sha256(Buffer.from([0x01]), MTH(D.slice(0, k)), MTH(D.slice(k, n)));
  }
  byLength.set(n, out);
  return out;
}

function PATH(m: number, D: readonly Uint8Array[]): Buffer[] {
  const n = D.length;
  if (n === 1 && m === 0) return [];
  const k = largestPowerOfTwoBelow(n);
  if (m < k) return [...PATH(m, D.slice(0, k)), MTH(D.slice(k, n))];
  return [...PATH(m - k, D.slice(k, n)), MTH(D.slice(0, k))];
}

function PROOF(m: number, D: readonly Uint8Array[]): Buffer[] {
  return SUBPROOF(m, D, true);
}

function SUBPROOF(m: number, D: readonly Uint8Array[], b: boolean): Buffer[] {
  const n = D.length;
  if (m === n) return b ? [] : [MTH(D)];
  const k = largestPowerOfTwoBelow(n);
  if (m <= k) return [...SUBPROOF(m, D.slice(0, k), b), MTH(D.slice(k, n))];
  return [...SUBPROOF(m - k, D.slice(k, n), false), MTH(D.slice(0, k))];
}

const Rfc9162 = { MTH, PATH, PROOF };

const hex = (b: Uint8Array): string => Buffer.from(b).toString('hex');
const entries = (n: number): Buffer[] => Array.from({ length: n }, (_, i) => Buffer.from(`entry-${i}`));

function flip(b: Buffer, bit = 0): Buffer {
  const c = Buffer.from(b);
  c[bit >> 3]! ^= 1 << (bit & 7);
  return c;
}

describe('RFC 9162 Merkle tree', () => {
  it('hashes the empty tree to SHA-256 of the empty string', () => {
    expect(hex(EMPTY_ROOT)).toBe('e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855');
    expect(hex(merkleRoot([]))).toBe(hex(Rfc9162.MTH([])));
  });

  // The 8-entry test tree of the Certificate Transparency test suites (merkle_tree_test.cc) and the
  // MTH of each prefix. The naive implementation above must reproduce them too.
  const ctLeaves = [
    '',
    '00',
    '10',
    '2021',
    '3031',
    '40414243',
    '5051525354555657',
    '606162636465666768696a6b6c6d6e6f',
  ];
  const ctRoots = [
    '6e340b9cffb37a989ca544e6bb780a2c78901d3fb33738768511a30617afa01d',
    'fac54203e7cc696cf0dfcb42c92a1d9dbaf70ad9e621f4bd8d98662f00e3c125',
    'aeb6bcfe274b70a14fb067a5e5578264db0fa9b51af5e0ba159158f329e06e77',
    'd37ee418976dd95753c1c73862b9398fa2a2cf9b4ff0fdfe8b30cd95209614b7',
    '4e3bbb1f7b478dcfe71fb631631519a3bca12c9aefca1612bfce4c13a86264d4',
    '76e67dadbcdf1e10e1b74ddc608abd2f98dfb16fbce75277b5232a127f2087ef',
    'ddb89be403809e325750d3d263cd78929c2942b7942a34b77e122c9594a74c8c',
    '5dc9da79a70659a9ad559cb701ded9a2ab9d823aad2f4960cfe370eff4604328',
  ];
  it('reproduces the Certificate Transparency test-tree roots', () => {
    const data = ctLeaves.map((h) => Buffer.from(h, 'hex'));
    const tree = new MemoryTree();
    for (const [i, d] of data.entries()) {
      tree.append(d);
      expect(hex(tree.root())).toBe(ctRoots[i]);
      expect(hex(Rfc9162.MTH(data.slice(0, i + 1)))).toBe(ctRoots[i]);
    }
  });

  // Exhaustive on purpose: every m ≤ n ≤ 64, 2,080 inclusion and 2,080 consistency proofs against
  // the naive recursion. It once took 2.1 s alone and hit vitest's 5 s default on a busy machine;
  // with MTH memoised and one assertion per size (instead of one per proof) it takes well under 1 s, and
  // the timeout is still deliberately generous.
  it('agrees with the naive RFC text for every m ≤ n ≤ 64 (root, PATH, PROOF) and verifies', () => {
    const all = entries(64);
    const tree = new MemoryTree();
    for (const e of all) tree.append(e);
    const roots = Array.from({ length: 65 }, (_, n) => Rfc9162.MTH(all.slice(0, n)));
    for (let n = 1; n <= 64; n++) {
      const D = all.slice(0, n);
      const root = roots[n]!;
      const ours: string[] = [`root ${hex(tree.root(n))}`];
      const rfc: string[] = [`root ${hex(root)}`];
      const failed: string[] = [];
      for (let m = 0; m < n; m++) {
        const path = tree.inclusionProof(m, n);
        ours.push(`PATH(${m}) ${path.map(hex).join(',')}`);
        rfc.push(`PATH(${m}) ${Rfc9162.PATH(m, D).map(hex).join(',')}`);
        if (!verifyInclusion(leafHash(D[m]!), m, n, path, root)) failed.push(`inclusion ${m} ${n}`);
      }
      for (let m = 1; m <= n; m++) {
        const proof = tree.consistencyProof(m, n);
        ours.push(`PROOF(${m}) ${proof.map(hex).join(',')}`);
        rfc.push(`PROOF(${m}) ${Rfc9162.PROOF(m, D).map(hex).join(',')}`);
        if (!verifyConsistency(m, n, roots[m]!, root, proof)) failed.push(`consistency ${m} ${n}`);
      }
      expect(ours, `n = ${n}`).toEqual(rfc);
      expect(failed, `n = ${n}`).toEqual([]);
    }
  }, 60_000);

  it('answers for a past size exactly what a tree of that size answers', () => {
    const all = entries(37);
    const big = new MemoryTree();
    for (const e of all) big.append(e);
    for (const n of [1, 2, 5, 16, 17, 31]) {
      const small = new MemoryTree();
      for (const e of all.slice(0, n)) small.append(e);
      expect(hex(big.root(n))).toBe(hex(small.root()));
      for (let m = 0; m < n; m++) expect(big.inclusionProof(m, n)).toEqual(small.inclusionProof(m));
    }
  });

  it('rejects tampered inclusion proofs', () => {
    const all = entries(23);
    const tree = new MemoryTree();
    for (const e of all) tree.append(e);
    const root = tree.root();
    for (let m = 0; m < 23; m++) {
      const leaf = leafHash(all[m]!);
      const path = tree.inclusionProof(m);
      for (let i = 0; i < path.length; i++) {
        const bad = path.map((p, j) => (j === i ? flip(p, 5) : p));
        expect(verifyInclusion(leaf, m, 23, bad, root)).toBe(false);
      }
      expect(verifyInclusion(flip(leaf), m, 23, path, root)).toBe(false);
      expect(verifyInclusion(leaf, m, 23, path.slice(1), root)).toBe(false);
      expect(verifyInclusion(leaf, m, 23, [...path, path[0]!], root)).toBe(false);
      expect(verifyInclusion(leaf, (m + 1) % 23, 23, path, root)).toBe(false);
      // (The size alone is not bound by the hashes: some sizes share a path shape with 23, and the
      // same root then comes out. What a proof proves is "leaf under this root".)
      expect(verifyInclusion(leaf, m, 2 * 23, path, root)).toBe(false);
      expect(verifyInclusion(leaf, m, 23, path, flip(root))).toBe(false);
    }
    expect(rootFromInclusionProof(leafHash(all[0]!), 23, 23, [])).toBeUndefined();
    expect(rootFromInclusionProof(leafHash(all[0]!), 0, 1, [])).toEqual(leafHash(all[0]!));
  });

  it('rejects tampered consistency proofs', () => {
    const all = entries(29);
    const tree = new MemoryTree();
    for (const e of all) tree.append(e);
    for (let m = 1; m < 29; m++) {
      const oldRoot = tree.root(m);
      const newRoot = tree.root();
      const proof = tree.consistencyProof(m);
      expect(verifyConsistency(m, 29, oldRoot, newRoot, proof)).toBe(true);
      for (let i = 0; i < proof.length; i++) {
        const bad = proof.map((p, j) => (j === i ? flip(p, 9) : p));
        expect(verifyConsistency(m, 29, oldRoot, newRoot, bad)).toBe(false);
      }
      expect(verifyConsistency(m, 29, flip(oldRoot), newRoot, proof)).toBe(false);
      expect(verifyConsistency(m, 29, oldRoot, flip(newRoot), proof)).toBe(false);
      expect(verifyConsistency(m, 29, oldRoot, newRoot, proof.slice(0, -1))).toBe(false);
      expect(verifyConsistency(m, 2 * 29, oldRoot, newRoot, proof)).toBe(false);
    }
    expect(verifyConsistency(5, 5, tree.root(5), tree.root(5), [])).toBe(true);
    expect(verifyConsistency(5, 5, tree.root(5), tree.root(6), [])).toBe(false);
    expect(verifyConsistency(0, 5, EMPTY_ROOT, tree.root(5), [])).toBe(true);
    expect(verifyConsistency(6, 5, tree.root(6), tree.root(5), [])).toBe(false);
  });

  // ~17,000 proofs, ~60,000 ranges: mismatches are collected and asserted once (an expect per range
  // made this the slowest unit test of the file on a busy machine).
  it('splits every proof subtree into aligned perfect subtrees', () => {
    const wrong: string[] = [];
    const check = (kind: string, m: number, n: number, r: { start: number; end: number }): void => {
      const nodes = perfectNodes(r);
      const covered = nodes.reduce((s, x) => s + 2 ** x.level, 0);
      if (covered !== r.end - r.start) wrong.push(`${kind}(${m}, ${n}) [${r.start}, ${r.end}): ${covered}`);
    };
    for (let n = 1; n <= 130; n++) {
      for (let m = 0; m < n; m++) for (const r of inclusionRanges(m, n)) check('inclusion', m, n, r);
      for (let m = 1; m <= n; m++) for (const r of consistencyRanges(m, n)) check('consistency', m, n, r);
    }
    expect(wrong).toEqual([]);
    expect(() => perfectNodes({ start: 1, end: 3 })).toThrow(RangeError);
  });
});
