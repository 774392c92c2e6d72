import type { X509Certificate } from 'node:crypto';
import type { Signer } from '../signing/signer.ts';
import {
  foldPerfect,
  nodeHash,
  perfectNodes,
  consistencyRanges,
  inclusionRanges,
  nodeKey,
  type Range,
} from '../transparency/merkle.ts';
import { fetchSubtrees, hashStoredRanges } from '../transparency/stored-tree.ts';
import type { CheckpointRepository, LeafRecord, StoredCheckpoint, TreeNode } from '../vault/index.ts';
import { CheckpointError } from './errors.ts';
import { recordLeafHash, type LeafFields } from './leaf.ts';
import { signCheckpoint, verifyCheckpoint } from './statement.ts';

/**
 * The checkpointer's work: extend the stored Merkle tree over the records from the last signed
 * checkpoint to the vault head, and sign a checkpoint of it. The tree is stored as its perfect
 * subtrees (vault_tree_nodes, written once each), so extending by k records costs k leaf hashes,
 * about k node hashes and O(log n) reads; any proof later costs O(log n) reads (merkle.ts).
 *
 * Before extending, the last checkpoint is verified with the signer's own key and the stored
 * subtrees must still fold to its root: a tree changed in the database is never extended or signed
 * over (TREE_DIVERGED), so each checkpoint is consistent with every earlier one.
 */

export interface CheckpointerSigning {
  /**
   * The service signer: signs checkpoints. A function when it follows its Secret (read once per
   * checkpoint, so a renewed key signs the next one).
   */
  readonly signer: Signer | (() => Signer);
  /**
   * The CA certificates of the service signer (a function: they grow as the signer is renewed).
   * The last checkpoint must chain to one of them (at its own time): it may have been signed by a
   * key that was rotated away since. Without CAs, it must verify with the current key.
   */
  readonly caCertificates?: readonly X509Certificate[] | (() => readonly X509Certificate[]);
}

/** Records read per query while extending. */
const READ_BATCH = 1000;
/** Subtrees written per call while extending (bounded memory for a large backlog). */
const WRITE_BATCH = 10_000;

export function leafFieldsOf(r: LeafRecord): LeafFields {
  return {
    seq: r.seq,
    id: r.id,
    digest: r.digest,
    namespace: r.namespace,
    kind: r.kind,
    run_id: r.runId,
    step_id: r.stepId,
    subjects: r.subjects,
    created_at: r.createdAt.toISOString(),
  };
}

/** Stored hashes of `nodes` by nodeKey; TREE_DIVERGED when one is missing. */
async function storedNodes(
  repo: CheckpointRepository,
  nodes: readonly { level: number; index: number }[],
): Promise<Map<string, Buffer>> {
  const found = await fetchSubtrees((n) => repo.nodes(n), nodes);
  for (const n of nodes) if (!found.has(nodeKey(n))) throw lacks(nodeKey(n));
  return found;
}

/** A subtree of a signed tree is gone from the database: it was changed under the vault. */
const lacks = (key: string): CheckpointError =>
  new CheckpointError('TREE_DIVERGED', `the vault tree lacks subtree ${key}`);

/** The proof made of the hashes of `ranges`, from the stored subtrees (TREE_DIVERGED when one is missing). */
function proofOf(repo: CheckpointRepository, ranges: readonly Range[]): Promise<Buffer[]> {
  return hashStoredRanges((n) => repo.nodes(n), ranges, lacks);
}

/** RFC 9162 consistency proof from `m` to `n` records, from the stored subtrees. */
export async function consistencyProof(repo: CheckpointRepository, m: number, n: number): Promise<Buffer[]> {
  return proofOf(repo, consistencyRanges(m, n));
}

/** RFC 9162 inclusion proof of the record at `seq` in the tree of `size` records. */
export async function inclusionProof(
  repo: CheckpointRepository,
  seq: number,
  size: number,
): Promise<Buffer[]> {
  return proofOf(repo, inclusionRanges(seq - 1, size));
}

/**
 * Signs a checkpoint of every record up to the vault head, extending the tree first. Returns the
 * newest checkpoint and whether this call made it (none is made when the head has not moved).
 * Throws CheckpointError TREE_DIVERGED / CHAIN_GAP when the database no longer matches the last
 * checkpoint, and the database's 23001 when another checkpointer stored one meanwhile.
 */
export async function makeCheckpoint(
  repo: CheckpointRepository,
  signing: CheckpointerSigning,
  now: () => Date = () => new Date(),
  /**
   * A checkpoint signed earlier and kept outside the database (witness.ts): the tree must still
   * hold it (the same root at its size), or nothing is signed (HISTORY_LOST).
   */
  witnessed?: { readonly treeSize: number; readonly rootHash: Buffer },
): Promise<{ checkpoint: StoredCheckpoint | null; created: boolean }> {
  const signer = typeof signing.signer === 'function' ? signing.signer() : signing.signer;
  const cas =
    typeof signing.caCertificates === 'function' ? signing.caCertificates() : (signing.caCertificates ?? []);
  const [last, head] = await Promise.all([repo.get(), repo.head()]);
  const m = last?.treeSize ?? 0;
  const lost = (why: string): never => {
    throw new CheckpointError(
      'HISTORY_LOST',
      `a checkpoint of ${witnessed?.treeSize ?? 0} records was signed and kept outside the database, and ${why}: ` +
        'the database lost acknowledged records (docs/failover.md)',
    );
  };
  if (witnessed !== undefined) {
    if (witnessed.treeSize > head.seq) lost(`the vault holds ${head.seq}`);
    if (witnessed.treeSize <= m) {
      const nodes = perfectNodes({ start: 0, end: witnessed.treeSize });
      const found = await storedNodes(repo, nodes);
      if (!foldPerfect(nodes.map((x) => found.get(nodeKey(x))!)).equals(witnessed.rootHash)) {
        lost(`the vault's first ${witnessed.treeSize} records fold to another root`);
      }
    }
  }
  if (head.seq <= m) return { checkpoint: last, created: false };

  // The frontier of the last checkpoint: its perfect subtrees, which must fold to its signed root.
  let stack: TreeNode[] = [];
  if (last !== null) {
    const signed = verifyCheckpoint(
      last.statement,
      cas.length > 0 ? { trustAnchors: cas, at: last.createdAt } : { publicKeys: [signer.publicKey] },
    );
    if (signed.treeSize !== last.treeSize || !signed.rootHash.equals(last.rootHash)) {
      throw new CheckpointError(
        'TREE_DIVERGED',
        `checkpoint ${m}: the row differs from its signed statement`,
      );
    }
    const nodes = perfectNodes({ start: 0, end: m });
    const found = await storedNodes(repo, nodes);
    stack = nodes.map((n) => ({ ...n, hash: found.get(nodeKey(n))! }));
    if (!foldPerfect(stack.map((n) => n.hash)).equals(signed.rootHash)) {
      throw new CheckpointError(
        'TREE_DIVERGED',
        `the stored vault tree no longer folds to the root checkpoint ${m} signs`,
      );
    }
  }

  const n = head.seq;
  let pending: TreeNode[] = [];
  let lastId = '';
  for (let after = m; after < n;) {
    const rows = await repo.leaves(after, n, READ_BATCH);
    if (rows.length === 0) throw new CheckpointError('CHAIN_GAP', `no record after seq ${after} up to ${n}`);
    for (const r of rows) {
      if (r.seq !== after + 1) {
        throw new CheckpointError('CHAIN_GAP', `record seq ${r.seq} follows seq ${after}: one is missing`);
      }
      let node: TreeNode = { level: 0, index: r.seq - 1, hash: recordLeafHash(leafFieldsOf(r)) };
      pending.push(node);
      // Complete every subtree this leaf closes (equal levels on top of the stack merge).
      while (stack.length > 0 && stack.at(-1)!.level === node.level) {
        const left = stack.pop()!;
        node = { level: node.level + 1, index: left.index / 2, hash: nodeHash(left.hash, node.hash) };
        pending.push(node);
      }
      stack.push(node);
      after = r.seq;
      lastId = r.id;
      if (witnessed !== undefined && r.seq === witnessed.treeSize) {
        if (!foldPerfect(stack.map((x) => x.hash)).equals(witnessed.rootHash)) {
          lost(`the vault's first ${witnessed.treeSize} records fold to another root`);
        }
      }
    }
    if (pending.length >= WRITE_BATCH) {
      await repo.addNodes(pending);
      pending = [];
    }
  }
  await repo.addNodes(pending);

  const rootHash = foldPerfect(stack.map((x) => x.hash));
  const issuedAt = now().toISOString();
  const statement = signCheckpoint({ treeSize: n, rootHash, lastId, issuedAt }, signer, cas);
  await repo.add({ treeSize: n, rootHash, lastId, statement });
  const stored = await repo.get(n);
  return { checkpoint: stored, created: true };
}
