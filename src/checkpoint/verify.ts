import { foldPerfect, nodeHash, verifyConsistency, EMPTY_ROOT } from '../transparency/merkle.ts';
import { CheckpointError } from './errors.ts';
import type { Checkpoint } from './statement.ts';

/**
 * The verifier's side of the chain (service-ctl verify --chain), pure: fold the leaves the vault
 * serves into the roots its signed checkpoints claim, in one pass and O(log n) memory, and check an
 * RFC 9162 consistency proof between two checkpoints.
 */

/** A streaming RFC 9162 tree: leaves in order, the root of any prefix while passing it. */
export class LeafFold {
  readonly #stack: { level: number; hash: Buffer }[] = [];
  #size = 0;

  get size(): number {
    return this.#size;
  }

  append(leafHash: Buffer): void {
    let node = { level: 0, hash: leafHash };
    while (this.#stack.length > 0 && this.#stack.at(-1)!.level === node.level) {
      const left = this.#stack.pop()!;
      node = { level: node.level + 1, hash: nodeHash(left.hash, node.hash) };
    }
    this.#stack.push(node);
    this.#size += 1;
  }

  /** MTH of the leaves appended so far. */
  root(): Buffer {
    return this.#stack.length === 0 ? EMPTY_ROOT : foldPerfect(this.#stack.map((n) => n.hash));
  }
}

export interface ChainFinding {
  readonly code: CheckpointError['code'];
  readonly message: string;
}

/**
 * Checks `leaves` (seq order, as GET /v1/chain/leaves serves them) against every checkpoint in
 * `checkpoints`: seq continuity from 1, and the root of the first treeSize leaves equal to the
 * signed root. `expected` (seq → leaf hash the verifier recomputed from records it holds) must
 * match the leaf served at that seq; a held seq beyond the newest checkpoint is NOT_COVERED (no
 * signed root vouches for it, and the leaves past the checkpoint are not walked). Returns every
 * finding (empty: all hold), the leaves folded, and `held`: how many held records were checked
 * against a signed root and found where they were (never one NOT_COVERED or mismatched).
 */
export async function checkLeaves(
  leaves: AsyncIterable<{ seq: number; leafHash: Buffer }>,
  checkpoints: readonly Checkpoint[],
  expected: ReadonlyMap<number, Buffer> = new Map(),
): Promise<{ findings: ChainFinding[]; count: number; held: number }> {
  const findings: ChainFinding[] = [];
  const wanted = [...checkpoints].sort((a, b) => a.treeSize - b.treeSize);
  const last = wanted.at(-1)?.treeSize ?? 0;
  const fold = new LeafFold();
  const seen = new Set<number>();
  let matched = 0;
  let next = 0;
  const checkAt = (): void => {
    while (next < wanted.length && wanted[next]!.treeSize === fold.size) {
      const c = wanted[next]!;
      if (!fold.root().equals(c.rootHash)) {
        findings.push({
          code: 'ROOT_MISMATCH',
          message: `the first ${c.treeSize} records as served do not fold to the root checkpoint ${c.treeSize} signs: a record was removed, reordered, inserted or relabelled`,
        });
      }
      next += 1;
    }
  };
  for await (const { seq, leafHash } of leaves) {
    if (fold.size >= last) break;
    if (seq !== fold.size + 1) {
      findings.push({
        code: 'CHAIN_GAP',
        message: `record seq ${seq} follows seq ${fold.size}: ${seq > fold.size + 1 ? 'records are missing' : 'records are out of order'}`,
      });
      return { findings, count: fold.size, held: 0 };
    }
    const want = expected.get(seq);
    if (want !== undefined) {
      seen.add(seq);
      if (!want.equals(leafHash)) {
        findings.push({
          code: 'LEAF_MISMATCH',
          message: `the record you hold at seq ${seq} is not the one the vault serves there`,
        });
      } else matched += 1;
    }
    fold.append(leafHash);
    checkAt();
  }
  if (fold.size < last) {
    findings.push({
      code: 'CHAIN_GAP',
      message: `the vault serves ${fold.size} records but checkpoint ${last} covers ${last}: records were removed`,
    });
  }
  const beyond: number[] = [];
  for (const seq of expected.keys()) {
    if (seq > last) beyond.push(seq);
    else if (!seen.has(seq) && fold.size >= last) {
      findings.push({
        code: 'LEAF_MISMATCH',
        message: `no record is served at seq ${seq}, where you hold one`,
      });
    }
  }
  if (beyond.length > 0) {
    beyond.sort((a, b) => a - b);
    const range = beyond.length === 1 ? `seq ${beyond[0]}` : `seq ${beyond[0]}…${beyond.at(-1)}`;
    findings.push({
      code: 'NOT_COVERED',
      message: `${beyond.length} record(s) you hold (${range}) are beyond the newest checkpoint (${last} records): no signed root covers them yet (--fresh asks for a checkpoint of every record)`,
    });
  }
  // Any finding about the served tree means no held record is shown to be where it was.
  const held = findings.some((f) => f.code !== 'NOT_COVERED') ? 0 : matched;
  return { findings, count: fold.size, held };
}

/** RFC 9162: `newer` extends `older`. Throws CheckpointError INCONSISTENT otherwise. */
export function assertConsistent(older: Checkpoint, newer: Checkpoint, proof: readonly Buffer[]): void {
  if (older.treeSize > newer.treeSize) {
    throw new CheckpointError(
      'INCONSISTENT',
      `the vault's newest checkpoint (${newer.treeSize} records) is older than yours (${older.treeSize}): it was rolled back`,
    );
  }
  if (!verifyConsistency(older.treeSize, newer.treeSize, older.rootHash, newer.rootHash, proof)) {
    throw new CheckpointError(
      'INCONSISTENT',
      `checkpoint ${newer.treeSize} does not extend checkpoint ${older.treeSize}: earlier records were changed or removed`,
    );
  }
}
