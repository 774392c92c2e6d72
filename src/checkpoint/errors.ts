import { BaseError } from '../errors.ts';

/** Stable codes of the vault's checkpoints and chain verification (docs/chain.md). */
export type CheckpointErrorCode =
  /** Not a checkpoint statement: not COSE_Sign1, wrong subject or content type, malformed payload. */
  | 'CHECKPOINT_INVALID'
  /** The checkpoint's signature does not verify, or its signer is not the one trusted. */
  | 'CHECKPOINT_SIGNATURE_INVALID'
  /** The stored subtrees no longer fold to a signed root: the tree was changed in the database. */
  | 'TREE_DIVERGED'
  /** The records skip a position: one was removed (or renumbered away). */
  | 'CHAIN_GAP'
  /** The records as served do not fold to the root a checkpoint signs: removed, reordered or relabelled. */
  | 'ROOT_MISMATCH'
  /** A later checkpoint is not an extension of an earlier one (RFC 9162 consistency proof fails). */
  | 'INCONSISTENT'
  /** A record does not hash to the leaf the vault serves for its position. */
  | 'LEAF_MISMATCH'
  /**
   * A record the verifier holds sits beyond the newest checkpoint: no signed root covers it yet, so
   * nothing vouches that it is (or will stay) where it was. Not proof of tampering; a verdict of
   * "verified" would be a claim about records nobody checked.
   */
  | 'NOT_COVERED'
  /**
   * A signed checkpoint kept outside the database (checkpoint/witness.ts) covers records the vault
   * no longer holds, or a tree the vault's differs from: the database lost acknowledged writes. The
   * checkpointer signs nothing over the new history until an operator accepts the loss
   * (VAULT_ACCEPT_LOST_CHECKPOINT, docs/failover.md).
   */
  | 'HISTORY_LOST'
  /**
   * `verify --chain --fresh` did not get a checkpoint signed for the request (the service answered
   * anything but 200): a replayed or cached answer cannot stand in for one.
   */
  | 'CHECKPOINT_NOT_FRESH'
  /** The checkpoint was issued longer ago than the verifier accepts (`--max-age`). */
  | 'CHECKPOINT_STALE';

export class CheckpointError extends BaseError<CheckpointErrorCode> {}
