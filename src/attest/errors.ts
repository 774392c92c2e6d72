import { BaseError } from '../errors.ts';
import type { TimestampErrorCode } from '../timestamp/errors.ts';

/**
 * Typed failures (BaseError, src/errors.ts): callers and tests branch on `code`, the message is for
 * humans, the underlying error (if any) is `cause`.
 */

/** Thrown while building or signing: the input cannot become a valid attestation. */
export type AttestErrorCode =
  /** A value is not representable as I-JSON / RFC 8785 (NaN, Infinity, BigInt, lone surrogate, functions, cycles, class instances). */
  | 'NOT_CANONICALIZABLE'
  /** A built predicate does not satisfy its own published schema (a caller bug, caught before signing). */
  | 'PREDICATE_INVALID';

export class AttestError extends BaseError<AttestErrorCode> {}

/** One reason a fetched record does not verify. A result lists every problem found, not only the first. */
export type ProblemCode =
  /** The record or its envelope is not a DSSE envelope (missing fields, non-base64, bad digest syntax). */
  | 'MALFORMED_ENVELOPE'
  /** `digest` differs from SHA-256 over the JCS canonical JSON of the envelope. */
  | 'DIGEST_MISMATCH'
  /** `payloadType` is not `application/vnd.in-toto+json`. */
  | 'PAYLOAD_TYPE_UNSUPPORTED'
  /** A signature made by a trusted key (by keyid) does not verify over the PAE bytes. */
  | 'SIGNATURE_INVALID'
  /** No signature is by a trusted key, the chain does not lead to a trust anchor, or the key type is unsupported. */
  | 'UNTRUSTED_KEY'
  /** A certificate on the chain expired before the verification time. */
  | 'CERTIFICATE_EXPIRED'
  /** A certificate on the chain is not yet valid at the verification time. */
  | 'CERTIFICATE_NOT_YET_VALID'
  /** The payload is not an in-toto Statement v1, or its subject does not name what the predicate describes. */
  | 'STATEMENT_INVALID'
  /** The predicate type has no schema in this verifier. */
  | 'PREDICATE_TYPE_UNSUPPORTED'
  /** The predicate does not satisfy the schema of its predicate type. */
  | 'PREDICATE_INVALID'
  /** Unsigned convenience fields of the record (`predicate_type`, `predicate`) disagree with the signed statement. */
  | 'RECORD_MISMATCH'
  /**
   * The record's vault labels (`namespace`, `kind`, `run_id`, `step_id`, `subjects`) disagree with
   * the labels signed in its statement: the record was relabelled after signing (ADR 0007).
   */
  | 'LABEL_MISMATCH'
  /**
   * The record's RFC 3161 time-stamp (`signature.timestamp`) is refused: over other bytes than the
   * signature (`TIMESTAMP_IMPRINT_MISMATCH`), from a TSA that does not chain to the TSA trust
   * anchors (`TIMESTAMP_UNTRUSTED_TSA`), with a bad token signature, and so on (TimestampErrorCode);
   * `TIMESTAMP_OUTSIDE_VALIDITY`: the signer's certificate was not valid at the time-stamp's time.
   */
  | `TIMESTAMP_${TimestampErrorCode}`
  /**
   * Judged against the signer history (the trust bundle's signers with their first use,
   * src/signing/rotation.ts): the record names a certificate the service never used
   * (UNKNOWN_CERTIFICATE), one of another key (KEY_MISMATCH), or was signed after its key had been
   * rotated away, grace included (KEY_ROTATED).
   */
  | 'UNKNOWN_CERTIFICATE'
  | 'KEY_MISMATCH'
  | 'KEY_ROTATED';

export interface Problem {
  code: ProblemCode;
  message: string;
}

/** Thrown by `assertVerified`; `code` is the first problem's, `problems` has them all. */
export class VerificationError extends BaseError<ProblemCode> {
  readonly problems: readonly Problem[];

  constructor(problems: readonly [Problem, ...Problem[]], options?: { cause?: unknown }) {
    super(problems[0].code, problems.map((p) => `${p.code}: ${p.message}`).join('; '), options);
    this.problems = problems;
  }
}
