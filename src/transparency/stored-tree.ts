import { hashRanges, nodeKey, nodesForRanges, type NodeId, type Range } from './merkle.ts';

/**
 * Reading a Merkle tree stored as its perfect subtrees (the vault tree's `vault_tree_nodes`, the
 * local SCITT log's entries and nodes): fetch the subtrees some ranges decompose into, in one query
 * (or a few bounded ones), and fold each range in memory. Every proof, root and tile of both trees
 * is read this way. The fetch is the caller's: this module does no I/O of its own.
 *
 * A subtree below the stored head that is not stored is corruption, never a reason to guess: the
 * caller names the error (`missing`), since what it means differs by tree (TREE_DIVERGED for the
 * vault tree, an invariant for the SCITT log).
 */

export type FetchSubtrees = (
  nodes: readonly NodeId[],
) => Promise<readonly (NodeId & { readonly hash: Buffer })[]>;

/** The hashes of `nodes` that are stored, by nodeKey; at most `chunk` nodes per fetch, none for none. */
export async function fetchSubtrees(
  fetch: FetchSubtrees,
  nodes: readonly NodeId[],
  chunk = Number.POSITIVE_INFINITY,
): Promise<Map<string, Buffer>> {
  const out = new Map<string, Buffer>();
  for (let i = 0; i < nodes.length; i += chunk) {
    for (const r of await fetch(nodes.slice(i, i + chunk))) out.set(nodeKey(r), r.hash);
  }
  return out;
}

/** A lookup over fetched hashes that throws `missing(nodeKey)` for a subtree not among them. */
export function lookupIn(
  map: ReadonlyMap<string, Buffer>,
  missing: (key: string) => Error,
): (node: NodeId) => Buffer {
  return (node) => {
    const h = map.get(nodeKey(node));
    if (h === undefined) throw missing(nodeKey(node));
    return h;
  };
}

/** The hash of each range, from the stored subtrees (one fetch). */
export async function hashStoredRanges(
  fetch: FetchSubtrees,
  ranges: readonly Range[],
  missing: (key: string) => Error,
): Promise<Buffer[]> {
  return hashRanges(ranges, lookupIn(await fetchSubtrees(fetch, nodesForRanges(ranges)), missing));
}
