import { BaseError } from '../errors.ts';

/**
 * Failures of the COSE/CBOR layer. They describe bytes, not what the bytes were meant to be: the
 * caller that knows (a C2PA claim signature, a SCITT statement or receipt, a key set) translates
 * them into its own error code and keeps this one as `cause`.
 */
export type CoseErrorCode =
  /** Not the COSE structure asked for: not CBOR, wrong shape, wrong tag, wrong field types. */
  | 'MALFORMED'
  /** A header names an algorithm this service neither signs nor verifies with. */
  | 'UNSUPPORTED_ALGORITHM'
  /** The caller asked for something the structure cannot hold (a signer without a chain, alg ≠ key). */
  | 'INVALID_INPUT';

export class CoseError extends BaseError<CoseErrorCode> {}
