import { consistencyRanges } from '../transparency/merkle.ts';
import { hashStoredRanges, type FetchSubtrees } from '../transparency/stored-tree.ts';
import type { TlogName, Vault } from '../vault/index.ts';
import { InvariantError } from '../errors.ts';

/**
 * The service's two Merkle trees as the witnessing loop and the tiles see them: what to checkpoint
 * now, and RFC 9162 proofs from the stored perfect subtrees (O(log n) rows each).
 *
 * - `vault`: the tree of every record (docs/chain.md). Its checkpoint is the newest signed vault
 *   checkpoint: a note states the same size and root (the database refuses any other).
 * - `scitt`: the local SCITT log (docs/transparency.md). Its checkpoint is the log's head, whose
 *   root the receipts of that size prove.
 */
export interface WitnessedLog {
  readonly name: TlogName;
  /** c2sp.org/tlog-checkpoint origin, also the note key's name. */
  readonly origin: string;
  /** The tree to checkpoint now; null while empty. */
  current(): Promise<{ treeSize: number; rootHash: Buffer } | null>;
  /** RFC 9162 consistency proof from m to n leaves (m ≤ n ≤ the stored tree). */
  consistencyProof(m: number, n: number): Promise<Buffer[]>;
}

function proofFrom(fetch: FetchSubtrees, m: number, n: number): Promise<Buffer[]> {
  return hashStoredRanges(
    fetch,
    consistencyRanges(m, n),
    (key) => new InvariantError(`the stored tree lacks subtree ${key}`),
  );
}

/** The origins of the two logs: `<prefix>/v1/tlog/<name>`, their tlog-tiles prefixes. */
export function originOf(prefix: string, name: TlogName): string {
  return `${prefix.replace(/\/+$/, '')}/v1/tlog/${name}`;
}

export function vaultLog(vault: Vault, origin: string): WitnessedLog {
  return {
    name: 'vault',
    origin,
    async current() {
      const c = await vault.checkpoints.get();
      return c === null ? null : { treeSize: c.treeSize, rootHash: c.rootHash };
    },
    consistencyProof: (m, n) => proofFrom((nodes) => vault.checkpoints.nodes(nodes), m, n),
  };
}

export function scittLog(vault: Vault, origin: string): WitnessedLog {
  return {
    name: 'scitt',
    origin,
    async current() {
      const head = await vault.scittLog.head();
      return head.size === 0 ? null : { treeSize: head.size, rootHash: head.root };
    },
    consistencyProof: (m, n) => proofFrom((nodes) => vault.scittLog.subtrees(nodes), m, n),
  };
}
