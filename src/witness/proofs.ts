import { hashRanges, inclusionRanges, nodesForRanges } from '../transparency/merkle.ts';
import { fetchSubtrees, lookupIn } from '../transparency/stored-tree.ts';
import { withSignatures } from '../tlog/checkpoint.ts';
import { parseNote } from '../tlog/note.ts';
import { formatTlogProof } from '../tlog/proof.ts';
import type { StoredNote, Vault } from '../vault/index.ts';
import { InvariantError } from '../errors.ts';

/**
 * C2SP tlog-proofs of records in the vault tree, for export bundles (docs/export.md): one signed
 * checkpoint of the vault log per export, with the cosignatures the vault holds for it, and per
 * record the RFC 6962 inclusion proof of its leaf (index = seq - 1) in that checkpoint's tree.
 *
 * The checkpoint is the newest note of the vault log that a witness cosigned, when there is one,
 * else the newest note: a verifier with a witness policy needs cosignatures, and one without only
 * the log's signature. Records beyond its size get no proof (a verifier with a policy reports them).
 */

export interface RecordProofs {
  /** The checkpoint every proof of this export leads to, with its cosignature lines. */
  readonly checkpoint: string;
  readonly note: StoredNote;
  /** The tlog-proof text of each record (by seq) the checkpoint covers; others are absent. */
  proofs(seqs: readonly number[]): Promise<Map<number, string>>;
}

/** Nodes fetched per query (one segment of 1000 records needs about 1000 + log2(n)). */
const NODE_CHUNK = 10_000;

export async function recordProofs(vault: Pick<Vault, 'tlog' | 'checkpoints'>): Promise<RecordProofs | null> {
  const note = (await vault.tlog.newestWitnessed('vault')) ?? (await vault.tlog.checkpoint('vault'));
  if (note === null) return null;
  const checkpoint = withSignatures(
    parseNote(note.note),
    note.cosignatures.map((c) => c.line),
  );
  return {
    checkpoint,
    note,
    async proofs(seqs) {
      const covered = seqs.filter((s) => s >= 1 && s <= note.treeSize);
      const ranges = new Map(covered.map((s) => [s, inclusionRanges(s - 1, note.treeSize)]));
      const wanted = nodesForRanges([...ranges.values()].flat());
      const found = await fetchSubtrees((n) => vault.checkpoints.nodes(n), wanted, NODE_CHUNK);
      const lookup = lookupIn(found, (key) => new InvariantError(`the vault tree lacks subtree ${key}`));
      const out = new Map<number, string>();
      for (const [seq, r] of ranges) {
        const proof = hashRanges(r, lookup);
        out.set(seq, formatTlogProof({ index: seq - 1, proof, checkpoint }));
      }
      return out;
    },
  };
}
