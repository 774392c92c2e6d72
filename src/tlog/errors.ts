import { BaseError } from '../errors.ts';

/** Stable codes of the C2SP transparency-log formats (docs/transparency.md, "Witnessed logs"). */
export type TlogErrorCode =
  /** Not a signed note: control characters, no signature block, a malformed signature line. */
  | 'MALFORMED_NOTE'
  /** A verifier key (`<name>+<hex id>+<base64>`) that cannot be parsed or whose id does not match. */
  | 'MALFORMED_VKEY'
  /** A signature by a known key fails, or no known key signed the note at all. */
  | 'NOTE_SIGNATURE_INVALID'
  /** The note text is not a tlog-checkpoint (origin, size, base64 root hash, extension lines). */
  | 'MALFORMED_CHECKPOINT'
  /** The checkpoint names another log than the one expected. */
  | 'ORIGIN_MISMATCH'
  /** A tile path outside c2sp.org/tlog-tiles (level, index elements, partial width). */
  | 'MALFORMED_TILE_PATH'
  /** An entry bundle that does not split into uint16-length-prefixed entries. */
  | 'MALFORMED_BUNDLE'
  /** A log entry longer than an entry bundle's uint16 length prefix can say (65535 bytes). */
  | 'ENTRY_TOO_LARGE'
  /** Not a c2sp.org/tlog-proof. */
  | 'MALFORMED_PROOF'
  /** The inclusion proof does not lead from the leaf to the checkpoint's root. */
  | 'INCLUSION_INVALID'
  /** A c2sp.org/tlog-policy file that cannot be parsed (unknown name, bad threshold, no quorum). */
  | 'MALFORMED_POLICY'
  /** The checkpoint's verified cosignatures do not satisfy the policy's quorum. */
  | 'QUORUM_NOT_MET';

export class TlogError extends BaseError<TlogErrorCode> {}
