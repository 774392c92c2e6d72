import { hash, timingSafeEqual } from 'node:crypto';

/**
 * RFC 9162 §2.1 Merkle tree hashing with SHA-256 (the COSE Receipts verifiable data structure
 * RFC9162_SHA256), pure and synchronous.
 *
 *   MTH({})      = SHA-256()
 *   MTH({d0})    = SHA-256(0x00 || d0)                      (leaf hash)
 *   MTH(D[n])    = SHA-256(0x01 || MTH(D[0:k]) || MTH(D[k:n])), k = largest power of two < n
 *
 * Proof generation is split in two so that a log need not hold the tree in memory:
 *
 * 1. index arithmetic ({@link inclusionRanges}, {@link consistencyRanges}) says which subtrees
 *    D[a:b] a proof consists of, following RFC 9162 PATH and SUBPROOF exactly;
 * 2. every such subtree is a node of the tree of size n, and its hash is a right fold over at most
 *    log2(n) *perfect* subtrees (aligned, power-of-two sized) ({@link perfectNodes},
 *    {@link foldPerfect}). A perfect subtree never changes once its last leaf is appended, so a log
 *    stores each one once (amortised one per append) and answers any proof from O(log n) stored
 *    hashes. {@link MemoryTree} is that store in memory; local-log.ts keeps it in PostgreSQL.
 *
 * Sizes and indexes are JavaScript numbers: exact up to 2^53, far beyond any log this serves.
 */

export const HASH_SIZE = 32;

const LEAF_PREFIX = Buffer.from([0x00]);
const NODE_PREFIX = Buffer.from([0x01]);

/** MTH of the empty tree: SHA-256 of the empty string. */
export const EMPTY_ROOT: Buffer = hash('sha256', Buffer.alloc(0), 'buffer');

/** RFC 9162 leaf hash: SHA-256(0x00 || entry). */
export function leafHash(entry: Uint8Array): Buffer {
  return hash('sha256', Buffer.concat([LEAF_PREFIX, entry]), 'buffer');
}

/** RFC 9162 interior node hash: SHA-256(0x01 || left || right). */
export function nodeHash(left: Uint8Array, right: Uint8Array): Buffer {
  return hash('sha256', Buffer.concat([NODE_PREFIX, left, right]), 'buffer');
}

/** Half-open range of leaf indexes [start, end): the subtree D[start:end]. */
export interface Range {
  readonly start: number;
  readonly end: number;
}

/** The perfect subtree of 2^level leaves starting at leaf index × 2^level. Level 0 is a leaf. */
export interface NodeId {
  readonly level: number;
  readonly index: number;
}

function assertSize(n: number, what: string): void {
  if (!Number.isSafeInteger(n) || n < 0) throw new RangeError(`${what} must be a non-negative safe integer`);
}

/** Largest power of two strictly smaller than n (n ≥ 2). */
function splitPoint(n: number): number {
  let k = 1;
  while (k * 2 < n) k *= 2;
  return k;
}

/** Largest power of two ≤ n (n ≥ 1). */
function floorPow2(n: number): number {
  let k = 1;
  while (k * 2 <= n) k *= 2;
  return k;
}

/**
 * The subtrees whose hashes form the inclusion proof of leaf `index` in the tree of `size` leaves,
 * in proof order (leaf to root), as RFC 9162 §2.1.3.1 PATH(m, D[n]) defines them.
 */
export function inclusionRanges(index: number, size: number): Range[] {
  assertSize(index, 'index');
  assertSize(size, 'size');
  if (index >= size) throw new RangeError(`leaf index ${index} is not below tree size ${size}`);
  const out: Range[] = [];
  let start = 0;
  let end = size;
  let m = index;
  while (end - start > 1) {
    const k = splitPoint(end - start);
    if (m < k) {
      out.push({ start: start + k, end });
      end = start + k;
    } else {
      out.push({ start, end: start + k });
      start += k;
      m -= k;
    }
  }
  return out.reverse();
}

/**
 * The subtrees whose hashes form the consistency proof from size m to size n, in proof order, as
 * RFC 9162 §2.1.4.1 PROOF(m, D[n]) = SUBPROOF(m, D[n], true) defines them. Empty when m = n, and
 * for m = 0 (every tree extends the empty tree; RFC 9162 defines proofs only for 0 < m).
 */
export function consistencyRanges(m: number, n: number): Range[] {
  assertSize(m, 'old size');
  assertSize(n, 'new size');
  if (m > n) throw new RangeError(`old size ${m} is larger than new size ${n}`);
  if (m === 0 || m === n) return [];
  const out: Range[] = [];
  let start = 0;
  let end = n;
  let mm = m;
  let whole = true; // the `b` flag of SUBPROOF: the old tree is a complete subtree here
  for (;;) {
    const size = end - start;
    if (mm === size) {
      if (!whole) out.push({ start, end });
      break;
    }
    const k = splitPoint(size);
    if (mm <= k) {
      out.push({ start: start + k, end });
      end = start + k;
    } else {
      out.push({ start, end: start + k });
      start += k;
      mm -= k;
      whole = false;
    }
  }
  return out.reverse();
}

/**
 * The perfect subtrees that D[start:end] is made of, left to right, largest first. Every subtree
 * RFC 9162 names (a node of the tree of some size n) starts at a multiple of the smallest power of
 * two ≥ its size, so the greedy split by powers of two stays aligned; anything else is a caller
 * bug and throws.
 */
export function perfectNodes(range: Range): NodeId[] {
  const { start, end } = range;
  assertSize(start, 'range start');
  assertSize(end, 'range end');
  if (end <= start) throw new RangeError(`empty range [${start}, ${end})`);
  const out: NodeId[] = [];
  let s = start;
  while (s < end) {
    const width = floorPow2(end - s);
    if (s % width !== 0) throw new RangeError(`range [${start}, ${end}) is not a Merkle tree node`);
    out.push({ level: Math.log2(width), index: s / width });
    s += width;
  }
  return out;
}

/** MTH of a node from the hashes of its {@link perfectNodes}, in the same order (a right fold). */
export function foldPerfect(hashes: readonly Buffer[]): Buffer {
  let acc = hashes.at(-1);
  if (acc === undefined) throw new RangeError('no subtree hashes to fold');
  for (let i = hashes.length - 2; i >= 0; i--) acc = nodeHash(hashes[i]!, acc);
  return acc;
}

/** Key of a NodeId in maps: `level/index`. */
export function nodeKey(node: NodeId): string {
  return `${node.level}/${node.index}`;
}

/** Every distinct perfect node the given ranges need. */
export function nodesForRanges(ranges: readonly Range[]): NodeId[] {
  const seen = new Map<string, NodeId>();
  for (const r of ranges) for (const n of perfectNodes(r)) seen.set(nodeKey(n), n);
  return [...seen.values()];
}

/** Hashes of `ranges`, each folded from perfect-node hashes that `lookup` supplies. */
export function hashRanges(ranges: readonly Range[], lookup: (node: NodeId) => Buffer): Buffer[] {
  return ranges.map((r) => foldPerfect(perfectNodes(r).map(lookup)));
}

/** The perfect subtrees that complete when leaf `index` is appended (levels 1..), bottom-up. */
export function completedNodes(index: number): NodeId[] {
  assertSize(index, 'index');
  const out: NodeId[] = [];
  let width = 2;
  while ((index + 1) % width === 0) {
    out.push({ level: Math.log2(width), index: (index + 1) / width - 1 });
    width *= 2;
  }
  return out;
}

/**
 * RFC 9162 §2.1.3.2: the root that `path` proves leaf `leafHashValue` at `index` into, for a tree
 * of `size` leaves; undefined when the path cannot be a proof for that position (wrong length,
 * index ≥ size, hashes of the wrong size).
 */
export function rootFromInclusionProof(
  leafHashValue: Uint8Array,
  index: number,
  size: number,
  path: readonly Uint8Array[],
): Buffer | undefined {
  if (!Number.isSafeInteger(index) || !Number.isSafeInteger(size) || index < 0 || index >= size)
    return undefined;
  if (leafHashValue.length !== HASH_SIZE || path.some((p) => p.length !== HASH_SIZE)) return undefined;
  let fn = index;
  let sn = size - 1;
  let r: Buffer = Buffer.from(leafHashValue);
  for (const p of path) {
    if (sn === 0) return undefined;
    if (fn % 2 === 1 || fn === sn) {
      r = nodeHash(p, r);
      while (fn % 2 === 0 && fn !== 0) {
        fn = Math.floor(fn / 2);
        sn = Math.floor(sn / 2);
      }
    } else {
      r = nodeHash(r, p);
    }
    fn = Math.floor(fn / 2);
    sn = Math.floor(sn / 2);
  }
  return sn === 0 ? r : undefined;
}

export function hashesEqual(a: Uint8Array, b: Uint8Array): boolean {
  return a.length === b.length && timingSafeEqual(a, b);
}

/** RFC 9162 §2.1.3.2 inclusion proof verification against a known root. */
export function verifyInclusion(
  leafHashValue: Uint8Array,
  index: number,
  size: number,
  path: readonly Uint8Array[],
  root: Uint8Array,
): boolean {
  const computed = rootFromInclusionProof(leafHashValue, index, size, path);
  return computed !== undefined && hashesEqual(computed, root);
}

/**
 * RFC 9162 §2.1.4.2 consistency proof verification: the tree of size `n` with root `newRoot`
 * extends the tree of size `m` with root `oldRoot`. For m = n the proof must be empty and the roots
 * equal; for m = 0 the proof must be empty (the empty tree is a prefix of every tree).
 */
export function verifyConsistency(
  m: number,
  n: number,
  oldRoot: Uint8Array,
  newRoot: Uint8Array,
  proof: readonly Uint8Array[],
): boolean {
  if (!Number.isSafeInteger(m) || !Number.isSafeInteger(n) || m < 0 || m > n) return false;
  if (proof.some((p) => p.length !== HASH_SIZE)) return false;
  if (m === 0) return proof.length === 0;
  if (m === n) return proof.length === 0 && hashesEqual(oldRoot, newRoot);
  if (proof.length === 0) return false;
  const path = [...proof];
  // An old tree of power-of-two size is itself a node of the new tree: its root starts the path.
  if (Number.isInteger(Math.log2(m))) path.unshift(Buffer.from(oldRoot));
  let fn = m - 1;
  let sn = n - 1;
  while (fn % 2 === 1) {
    fn = Math.floor(fn / 2);
    sn = Math.floor(sn / 2);
  }
  let fr: Buffer = Buffer.from(path[0]!);
  let sr: Buffer = Buffer.from(path[0]!);
  for (const c of path.slice(1)) {
    if (sn === 0) return false;
    if (fn % 2 === 1 || fn === sn) {
      fr = nodeHash(c, fr);
      sr = nodeHash(c, sr);
      while (fn % 2 === 0 && fn !== 0) {
        fn = Math.floor(fn / 2);
        sn = Math.floor(sn / 2);
      }
    } else {
      sr = nodeHash(sr, c);
    }
    fn = Math.floor(fn / 2);
    sn = Math.floor(sn / 2);
  }
  return sn === 0 && hashesEqual(fr, oldRoot) && hashesEqual(sr, newRoot);
}

/**
 * An append-only Merkle tree in memory that stores each perfect subtree hash once (levels[L][i]
 * for the subtree of 2^L leaves starting at i·2^L). Append is amortised O(1) hashes; root,
 * inclusion and consistency proofs for any size ≤ the current size cost O(log n) lookups and
 * hashes. The PostgreSQL log (local-log.ts) is the same structure in a table.
 */
export class MemoryTree {
  readonly #levels: Buffer[][] = [[]];

  get size(): number {
    return this.#levels[0]!.length;
  }

  /** Appends a leaf hash (already `leafHash(entry)`); returns its index. */
  appendLeafHash(leaf: Uint8Array): number {
    if (leaf.length !== HASH_SIZE) throw new RangeError('a leaf hash has 32 bytes');
    const index = this.size;
    this.#levels[0]!.push(Buffer.from(leaf));
    for (const node of completedNodes(index)) {
      const below = this.#levels[node.level - 1]!;
      const level = (this.#levels[node.level] ??= []);
      level[node.index] = nodeHash(below[2 * node.index]!, below[2 * node.index + 1]!);
    }
    return index;
  }

  append(entry: Uint8Array): number {
    return this.appendLeafHash(leafHash(entry));
  }

  /** Hash of a stored perfect subtree. */
  node(node: NodeId): Buffer {
    const h = this.#levels[node.level]?.[node.index];
    if (h === undefined) throw new RangeError(`subtree ${nodeKey(node)} is not complete`);
    return h;
  }

  /** MTH of the first `size` leaves (default: all). */
  root(size = this.size): Buffer {
    this.#checkSize(size);
    if (size === 0) return EMPTY_ROOT;
    return hashRanges([{ start: 0, end: size }], (n) => this.node(n))[0]!;
  }

  inclusionProof(index: number, size = this.size): Buffer[] {
    this.#checkSize(size);
    return hashRanges(inclusionRanges(index, size), (n) => this.node(n));
  }

  consistencyProof(m: number, n = this.size): Buffer[] {
    this.#checkSize(n);
    return hashRanges(consistencyRanges(m, n), (x) => this.node(x));
  }

  #checkSize(size: number): void {
    assertSize(size, 'size');
    if (size > this.size) throw new RangeError(`tree size ${size} exceeds the ${this.size} leaves appended`);
  }
}

/** MTH over a list of entries (not leaf hashes): convenience for tests and small sets. */
export function merkleRoot(entries: readonly Uint8Array[]): Buffer {
  const tree = new MemoryTree();
  for (const e of entries) tree.append(e);
  return tree.root();
}
