import { BaseError } from '../errors.ts';

/** Stable codes of the tlog-witness client and the witnessing loop (docs/transparency.md). */
export type WitnessErrorCode =
  /** The witness did not answer within its deadline, the connection failed, or it answered 5xx. */
  | 'WITNESS_UNAVAILABLE'
  /** The witness answered outside c2sp.org/tlog-witness (a 200 without a valid cosignature, a bad 409). */
  | 'WITNESS_PROTOCOL'
  /** 409 kept coming with other sizes: the witness is being moved by someone else at the same time. */
  | 'WITNESS_CONFLICT'
  /**
   * The log refuses to sign a checkpoint that does not extend the last one it signed: its own tree
   * changed under it (the database was rewritten or rolled back).
   */
  | 'CHECKPOINT_INCONSISTENT';

export class WitnessError extends BaseError<WitnessErrorCode> {}
