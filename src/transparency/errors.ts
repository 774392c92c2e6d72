import { BaseError } from '../errors.ts';

/**
 * Typed failures of the transparency subsystem (BaseError, src/errors.ts):
 * callers and tests branch on `code`, the message is for humans, the underlying error is `cause`.
 * `retryable` tells the job queue whether another attempt can succeed (a remote outage can end; a
 * malformed receipt from the same server for the same statement will not fix itself soon, but a
 * later attempt is still allowed up to the attempt cap, see jobs.ts).
 */
export type TransparencyErrorCode =
  // Receipt verification (receipt.ts); the same codes are used when a remote returns a bad receipt.
  /** The receipt is not a COSE_Sign1 receipt of RFC9162_SHA256 inclusion (structure, vds, vdp). */
  | 'MALFORMED_RECEIPT'
  /** The inclusion proof does not fit its tree size and leaf index (RFC 9162 §2.1.3.2 fails). */
  | 'INCLUSION_PROOF_INVALID'
  /**
   * The receipt's signature does not verify over the Merkle root recomputed from the statement and
   * the proof: the signature, a path hash or the statement bytes were altered (RFC 9942 §5.2.1:
   * these cannot be told apart, the verifier only learns that the tuple is not authentic).
   */
  | 'RECEIPT_SIGNATURE_INVALID'
  /**
   * The receipt does not verify for this statement and names another subject (CWT `sub`): it is
   * the receipt of another statement. (A receipt that verifies is accepted whatever its `sub`.)
   */
  | 'STATEMENT_MISMATCH'
  /** The receipt's `kid` names none of the log keys supplied. */
  | 'UNKNOWN_LOG_KEY'
  // Signed statements (cose.ts, did-x509.ts).
  /** The bytes are not a COSE_Sign1 signed statement with the headers SCITT requires. */
  | 'MALFORMED_STATEMENT'
  /** The statement's signature does not verify with the key of its x5chain leaf. */
  | 'STATEMENT_SIGNATURE_INVALID'
  /** The statement's `iss` is not a did:x509 that resolves against its x5chain. */
  | 'ISSUER_MISMATCH'
  /** The x5chain does not lead to a trust anchor of the registration policy. */
  | 'UNTRUSTED_ISSUER'
  /** The signer cannot issue SCITT statements (no certificate chain / no CA for did:x509). */
  | 'ISSUER_UNAVAILABLE'
  /** The stored attestation's envelope does not hash to its stored digest: refuse to publish it. */
  | 'ATTESTATION_DIGEST_MISMATCH'
  /** The attestation of a job is not in the vault. */
  | 'ATTESTATION_NOT_FOUND'
  // Local log (local-log.ts).
  /** No entry with that id (or index) in the log. */
  | 'ENTRY_NOT_FOUND'
  /** A tree size outside [0, current size], or m > n for a consistency proof. */
  | 'INVALID_TREE_SIZE'
  // Remote SCRAPI service (scrapi-client.ts).
  /** The service refused the statement (4xx other than 404/409/429); not worth retrying as is. */
  | 'REMOTE_REJECTED'
  /** The service is unreachable, answered 5xx or 429, or kept asking to retry; retry later. */
  | 'REMOTE_UNAVAILABLE'
  /** Registration is still running on the service after the polling budget; retry later. */
  | 'REGISTRATION_PENDING'
  /** The service answered something SCRAPI does not allow here (status, missing Location, bad body). */
  | 'BAD_RESPONSE'
  // Job queue (jobs.ts).
  /** The job's lease expired and another worker owns it now; drop the result of this attempt. */
  | 'LEASE_LOST';

const RETRYABLE: ReadonlySet<TransparencyErrorCode> = new Set([
  'REMOTE_UNAVAILABLE',
  'REGISTRATION_PENDING',
  'BAD_RESPONSE',
  'MALFORMED_RECEIPT',
  'INCLUSION_PROOF_INVALID',
  'RECEIPT_SIGNATURE_INVALID',
  'STATEMENT_MISMATCH',
  'UNKNOWN_LOG_KEY',
]);

export class TransparencyError extends BaseError<TransparencyErrorCode> {
  /** Whether a later attempt may succeed. */
  readonly retryable: boolean;
  /** Server-requested delay (Retry-After), in milliseconds, when the server gave one. */
  readonly retryAfterMs: number | undefined;

  constructor(
    code: TransparencyErrorCode,
    message: string,
    options: { cause?: unknown; retryable?: boolean; retryAfterMs?: number } = {},
  ) {
    super(code, message, options.cause !== undefined ? { cause: options.cause } : undefined);
    this.retryable = options.retryable ?? RETRYABLE.has(code);
    this.retryAfterMs = options.retryAfterMs;
  }
}

export function isTransparencyError(err: unknown, code?: TransparencyErrorCode): err is TransparencyError {
  return err instanceof TransparencyError && (code === undefined || err.code === code);
}
