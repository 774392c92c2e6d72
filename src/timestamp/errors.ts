import { BaseError } from '../errors.ts';

/**
 * Typed failures of RFC 3161 time-stamping (BaseError, src/errors.ts): callers and tests branch on
 * `code`, never on the message.
 */
export type TimestampErrorCode =
  /** The TSA did not answer within the deadline (network error, timeout, 5xx, 429). */
  | 'TSA_UNAVAILABLE'
  /** The TSA answered with a PKIStatus other than granted / grantedWithMods, or a 4xx. */
  | 'TSA_REJECTED'
  /** Not a TimeStampResp / TimeStampToken we can read (ASN.1, CMS or TSTInfo structure). */
  | 'MALFORMED_TIMESTAMP'
  /** The token's message imprint is not the hash of the data it is presented for. */
  | 'IMPRINT_MISMATCH'
  /** The token's nonce is not the one the request carried (a replayed or foreign answer). */
  | 'NONCE_MISMATCH'
  /** The CMS signature (or its messageDigest / signing-certificate attributes) does not verify. */
  | 'TIMESTAMP_SIGNATURE_INVALID'
  /** The TSA certificate does not chain to a configured TSA trust anchor, or lacks the timeStamping EKU. */
  | 'UNTRUSTED_TSA'
  /** A certificate of the TSA's chain was outside its validity period at the token's genTime. */
  | 'TSA_CERTIFICATE_EXPIRED'
  /**
   * The time-stamped signature's own certificate was not valid at the token's genTime: the
   * timestamp proves the signature was made outside the signer's validity period.
   */
  | 'OUTSIDE_VALIDITY'
  /** The token uses an algorithm this service does not verify. */
  | 'UNSUPPORTED_TIMESTAMP';

export class TimestampError extends BaseError<TimestampErrorCode> {}
