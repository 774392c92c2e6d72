import { describe, expect, it } from 'vitest';
import { batchResults, planBatch, type Prepared } from '../../../src/transparency/local-log-batch.ts';
import { growTree, missingSubtree, rangeHasher } from '../../../src/transparency/local-log-tree.ts';
import { lookupIn } from '../../../src/transparency/stored-tree.ts';
import {
  hashRanges,
  inclusionRanges,
  leafHash,
  MemoryTree,
  nodeKey,
  nodesForRanges,
  type NodeId,
} from '../../../src/transparency/merkle.ts';
import type { StoredLogEntry } from '../../../src/vault/index.ts';

// The local log's batch arithmetic without the database: what the batch adds to the tree is checked
// against MemoryTree (merkle.ts), an independent construction of the same RFC 9162 tree.

const leaves = (from: number, n: number): Buffer[] =>
  Array.from({ length: n }, (_, i) => leafHash(Buffer.from(`entry ${from + i}`)));

/** The perfect subtrees of [0, start) as stored rows would give them. */
function decomposition(tree: MemoryTree, start: number): Map<string, Buffer> {
  const known = new Map<string, Buffer>();
  if (start === 0) return known;
  for (const n of nodesForRanges([{ start: 0, end: start }])) known.set(nodeKey(n), tree.node(n));
  return known;
}

describe('growTree', () => {
  it('adds exactly the subtrees the new leaves complete, with the hashes MemoryTree computes', () => {
    for (const [start, count] of [
      [0, 1],
      [0, 8],
      [1, 1],
      [5, 3],
      [7, 9],
      [16, 1],
      [13, 40],
    ] as const) {
      const tree = new MemoryTree();
      for (const l of leaves(0, start + count)) tree.appendLeafHash(l);
      const known = decomposition(tree, start);
      const created = growTree(known, start, leaves(start, count));
      for (const c of created) expect(c.hash.equals(tree.node(c))).toBe(true);
      // Every completed subtree is created once, and nothing else: those whose last leaf is new.
      const expected: NodeId[] = [];
      for (let level = 1; 2 ** level <= start + count; level++) {
        for (let index = 0; (index + 1) * 2 ** level <= start + count; index++) {
          if ((index + 1) * 2 ** level > start) expected.push({ level, index });
        }
      }
      expect(created.map(nodeKey).sort()).toEqual(expected.map(nodeKey).sort());
      // What `known` now holds folds to the tree's root.
      const root = hashRanges([{ start: 0, end: start + count }], lookupIn(known, missingSubtree))[0]!;
      expect(root.equals(tree.root())).toBe(true);
    }
  });

  it('refuses to grow a tree whose decomposition is missing (corruption, not a guess)', () => {
    expect(() => growTree(new Map(), 1, leaves(1, 1))).toThrow(/missing the hash of subtree/);
  });
});

describe('rangeHasher', () => {
  it('gives the inclusion paths MemoryTree gives, folding each right-edge range once', () => {
    const tree = new MemoryTree();
    for (const l of leaves(0, 21)) tree.appendLeafHash(l);
    let lookups = 0;
    const lookup = (n: NodeId): Buffer => {
      lookups += 1;
      return tree.node(n);
    };
    const hash = rangeHasher(lookup);
    for (let i = 0; i < 21; i++) {
      const path = inclusionRanges(i, 21).map(hash);
      expect(Buffer.concat(path).equals(Buffer.concat(tree.inclusionProof(i, 21)))).toBe(true);
    }
    const afterAll = lookups;
    // Again: the non-perfect ranges are cached, so only perfect ones (one lookup each) are read.
    const perfect = Array.from({ length: 21 }, (_, i) => inclusionRanges(i, 21))
      .flat()
      .filter((r) => Number.isInteger(Math.log2(r.end - r.start))).length;
    for (let i = 0; i < 21; i++) inclusionRanges(i, 21).map(hash);
    expect(lookups - afterAll).toBe(perfect);
  });
});

const prepared = (name: string): Prepared => {
  const entry = Buffer.from(name);
  const leaf = leafHash(entry);
  return { entry, leaf, entryId: leaf.toString('hex') };
};

describe('planBatch and batchResults', () => {
  const a = prepared('a');
  const b = prepared('b');
  const c = prepared('c');
  const stored: StoredLogEntry = {
    entryId: b.entryId,
    index: 3,
    statement: b.entry,
    receipt: Buffer.from('old receipt'),
    createdAt: new Date(0),
  };

  it('numbers the new statements from the head on, skipping stored ones and repeats', () => {
    const plan = planBatch([a, b, a, c], new Map([[b.entryId, stored]]), 10);
    expect(plan.fresh).toEqual([a, c]);
    expect([...plan.indexOf]).toEqual([
      [a.entryId, 10],
      [c.entryId, 11],
    ]);
    expect(planBatch([b, b], new Map([[b.entryId, stored]]), 10).fresh).toEqual([]);
  });

  it('answers in input order: stored as stored, a repeat as the same entry but not created twice', () => {
    const batch = [a, b, a, c];
    const storedMap = new Map([[b.entryId, stored]]);
    const now = new Date(1000);
    const plan = planBatch(batch, storedMap, 10);
    const results = batchResults(batch, storedMap, {
      ...plan,
      start: 10,
      receipts: [Buffer.from('ra'), Buffer.from('rc')],
      now,
    });
    expect(results.map((r) => [r.entryId, r.index, r.receipt.toString(), r.created])).toEqual([
      [a.entryId, 10, 'ra', true],
      [b.entryId, 3, 'old receipt', false],
      [a.entryId, 10, 'ra', false],
      [c.entryId, 11, 'rc', true],
    ]);
    expect(results[0]!.createdAt).toBe(now);
    expect(results[1]!.createdAt).toEqual(new Date(0));
  });
});
