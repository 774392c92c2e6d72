import { describe, expect, it } from 'vitest';
import {
  MemoryTree,
  leafHash,
  nodeKey,
  consistencyRanges,
  type NodeId,
} from '../../../src/transparency/merkle.ts';
import { fetchSubtrees, hashStoredRanges } from '../../../src/transparency/stored-tree.ts';

// The one reader of trees stored as perfect subtrees (vault tree, SCITT log, witness proofs),
// against MemoryTree as the stored rows.

function stored(size: number): {
  tree: MemoryTree;
  fetch: (n: readonly NodeId[]) => Promise<(NodeId & { hash: Buffer })[]>;
  calls: number[];
} {
  const tree = new MemoryTree();
  for (let i = 0; i < size; i++) tree.appendLeafHash(leafHash(Buffer.from(`e${i}`)));
  const calls: number[] = [];
  const fetch = (nodes: readonly NodeId[]): Promise<(NodeId & { hash: Buffer })[]> => {
    calls.push(nodes.length);
    return Promise.resolve(nodes.map((n) => ({ ...n, hash: tree.node(n) })));
  };
  return { tree, fetch, calls };
}

describe('stored tree', () => {
  it('folds ranges into the proofs MemoryTree gives, in one fetch', async () => {
    const { tree, fetch, calls } = stored(37);
    const proof = await hashStoredRanges(fetch, consistencyRanges(13, 37), (k) => new Error(k));
    expect(Buffer.concat(proof).equals(Buffer.concat(tree.consistencyProof(13, 37)))).toBe(true);
    expect(calls).toHaveLength(1);
  });

  it('fetches in chunks, and not at all for no nodes', async () => {
    const { fetch, calls } = stored(64);
    const nodes = Array.from({ length: 25 }, (_, index) => ({ level: 0, index }));
    const got = await fetchSubtrees(fetch, nodes, 10);
    expect(calls).toEqual([10, 10, 5]);
    expect([...got.keys()]).toEqual(nodes.map(nodeKey));
    expect((await fetchSubtrees(fetch, [])).size).toBe(0);
    expect(calls).toHaveLength(3);
  });

  it("throws the caller's error for a subtree the rows lack", async () => {
    const { fetch } = stored(8);
    const lossy = async (n: readonly NodeId[]) => (await fetch(n)).filter((x) => x.level !== 2);
    await expect(
      hashStoredRanges(lossy, [{ start: 0, end: 8 }], (k) => new Error(`gone ${k}`)),
    ).resolves.toHaveLength(1);
    await expect(
      hashStoredRanges(lossy, [{ start: 0, end: 4 }], (k) => new Error(`gone ${k}`)),
    ).rejects.toThrow('gone 2/0');
  });
});
