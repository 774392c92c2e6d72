import { BaseError } from '../errors.ts';

/**
 * Codes of capability chains and tokens. Chain codes are what the recorder refuses to sign and
 * what `service-ctl verify` reports; token codes are what POST /v1/attestations/query answers (400)
 * for a token pasted into `capability_token`.
 */
export type CapabilityErrorCode =
  /** A scope outside the grammar (empty, too long, whitespace, a `*` that is not the whole scope). */
  | 'SCOPE_INVALID'
  /** A granter or approver that is not a `<type>:<name>` principal. */
  | 'PRINCIPAL_INVALID'
  /** A link grants more than (or something other than) the link before it. */
  | 'SCOPE_WIDENED'
  /** A chain without links, or with more than the CRD allows. */
  | 'CHAIN_INVALID'
  /** Not a token of a known format, or a token whose content cannot be read. */
  | 'TOKEN_MALFORMED'
  /** Past its validUntil / expiry check (or before its validFrom). */
  | 'TOKEN_EXPIRED'
  /** Signed by a key that is not the chain's root (another namespace's, or nobody's we know). */
  | 'TOKEN_UNTRUSTED'
  /** The root key matches but the signature does not verify (tampered). */
  | 'TOKEN_SIGNATURE_INVALID'
  /** The token verifies but says something else than the signed chain it is attached to. */
  | 'TOKEN_MISMATCH'
  /** The Biscuit library could not be loaded or failed internally. */
  | 'BISCUIT_UNAVAILABLE';

export class CapabilityError extends BaseError<CapabilityErrorCode> {}
