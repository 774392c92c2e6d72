import { BaseError } from '../errors.ts';

/**
 * Typed failures of key and certificate handling. Callers branch on `code`, never on `message`
 * (the message is for humans and may change); the underlying error, when there is one, is `cause`.
 */
export type SigningErrorCode =
  /** The key is neither ECDSA P-256 nor Ed25519 (RSA, P-384, encrypted PKCS#8, …). */
  | 'UNSUPPORTED_KEY_TYPE'
  /** The private key is not the key certified by the leaf certificate. */
  | 'KEY_CERT_MISMATCH'
  /** The private key could not be parsed. */
  | 'MALFORMED_KEY'
  /** A certificate could not be parsed, or a PEM bundle holds no certificate. */
  | 'MALFORMED_CERTIFICATE'
  /** A required field (`tls.crt`, `tls.key`) is absent or empty, or a file could not be read. */
  | 'MISSING_MATERIAL'
  /** The certificates do not form a chain (leaf first) up to the supplied CA certificates. */
  | 'CHAIN_INVALID'
  /** A certificate of the chain is outside its validity period at load time. */
  | 'CERTIFICATE_EXPIRED'
  | 'CERTIFICATE_NOT_YET_VALID';

export class SigningError extends BaseError<SigningErrorCode> {}
