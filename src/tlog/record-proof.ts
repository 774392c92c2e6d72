import { leafFieldsOfApiRecord, recordLeafHash } from '../checkpoint/leaf.ts';
import { TlogError } from './errors.ts';
import type { NoteVerifier } from './note.ts';
import type { TlogPolicy } from './policy.ts';
import { parseTlogProof, verifyTlogProof, type VerifiedTlogProof } from './proof.ts';

/**
 * A record's tlog-proof in the vault log (export bundles: `attestations/<id>/vault.tlog-proof`):
 * the leaf is recomputed from the record as the API serves it (docs/chain.md "The tree"), so the
 * proof binds the record's id, position, digest and labels to a checkpoint the log signed and the
 * policy's witnesses cosigned. The proof's index must be the record's own position (seq - 1).
 */
export function verifyRecordTlogProof(
  record: Record<string, unknown>,
  proofText: string,
  options: {
    readonly logVerifiers: readonly NoteVerifier[];
    readonly origin?: string;
    readonly policy?: TlogPolicy;
  },
): VerifiedTlogProof {
  const fields = leafFieldsOfApiRecord(record);
  if (fields === undefined) {
    throw new TlogError(
      'MALFORMED_PROOF',
      'the record lacks the fields of its leaf (seq, id, digest, labels)',
    );
  }
  const proof = parseTlogProof(proofText);
  if (proof.index !== fields.seq - 1) {
    throw new TlogError(
      'INCLUSION_INVALID',
      `the proof is for leaf ${proof.index}, the record is at seq ${fields.seq} (leaf ${fields.seq - 1})`,
    );
  }
  return verifyTlogProof(proof, { ...options, leafHash: recordLeafHash(fields) });
}
