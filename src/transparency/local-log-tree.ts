import type { SubtreeHash } from '../vault/index.ts';
import { completedNodes, hashRanges, nodeHash, nodeKey, type NodeId, type Range } from './merkle.ts';
import { InvariantError } from '../errors.ts';
import { lookupIn } from './stored-tree.ts';

/**
 * The in-memory side of the local log's tree (local-log.ts): perfect-subtree hashes keyed by
 * `nodeKey`, as fetched from the vault's rows, grown by a batch of leaves, folded into the right
 * edges a batch's inclusion paths share. Pure.
 */

/**
 * Every subtree below the head is stored by the append that completed it: a miss is corruption
 * (an invariant, not a condition a caller handles).
 */
export const missingSubtree = (key: string): InvariantError =>
  new InvariantError(`SCITT log is missing the hash of subtree ${key}`);

/**
 * Appends `leaves` at indexes start, start + 1, … to `known` (which must hold the perfect subtrees
 * of [0, start), i.e. its binary decomposition) and adds every subtree they complete. Returns the
 * completed subtrees above the leaves, in order: the node rows the batch stores.
 */
export function growTree(
  known: Map<string, Buffer>,
  start: number,
  leaves: readonly Buffer[],
): SubtreeHash[] {
  const lookup = lookupIn(known, missingSubtree);
  const created: SubtreeHash[] = [];
  for (const [k, leaf] of leaves.entries()) {
    const index = start + k;
    known.set(nodeKey({ level: 0, index }), leaf);
    for (const node of completedNodes(index)) {
      const h = nodeHash(
        lookup({ level: node.level - 1, index: 2 * node.index }),
        lookup({ level: node.level - 1, index: 2 * node.index + 1 }),
      );
      known.set(nodeKey(node), h);
      created.push({ level: node.level, index: node.index, hash: h });
    }
  }
  return created;
}

/**
 * The hash of a range, folding each non-perfect one once: the inclusion paths of a batch share
 * their right-edge ranges, and a perfect range is a single lookup anyway.
 */
export function rangeHasher(lookup: (node: NodeId) => Buffer): (r: Range) => Buffer {
  const folds = new Map<string, Buffer>();
  return (r) => {
    const width = r.end - r.start;
    if (Number.isInteger(Math.log2(width))) return hashRanges([r], lookup)[0]!;
    const key = `${r.start}:${r.end}`;
    let h = folds.get(key);
    if (h === undefined) {
      h = hashRanges([r], lookup)[0]!;
      folds.set(key, h);
    }
    return h;
  };
}
