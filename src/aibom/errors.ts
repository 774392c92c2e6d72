import { BaseError } from '../errors.ts';

/**
 * Typed failures of the AIBOM module (BaseError, src/errors.ts): callers and tests
 * branch on `code`; the message is for humans; the underlying error, if any, is `cause`.
 */
export type AibomErrorCode =
  /** The run cannot be described: its id is not a UUID, or its phase is not terminal. */
  | 'INVALID_RUN'
  /** A step breaks an invariant the Run CRD guarantees (duplicate or malformed id, not exactly one of model/tool, bad temperature). */
  | 'INVALID_STEP'
  /** A policy pack name or version cannot be recorded unambiguously as `PACK[@VERSION]`. */
  | 'INVALID_POLICY_PACK'
  /** An attestation id is not a UUID, or is listed twice. */
  | 'INVALID_ATTESTATION_ID'
  /** A value handed to the builder is not representable as RFC 8785 JSON (NaN, class instances, cycles...). */
  | 'NOT_CANONICALIZABLE'
  /** The run given to the CycloneDX view is not the run the BOM was built from (DAG or id differs). */
  | 'RUN_MISMATCH'
  /** A view's records are not the AIBOM's attestation ids in order, or a digest is malformed. */
  | 'VIEW_INPUT_MISMATCH'
  /** The CycloneDX view fails the CycloneDX 1.5 JSON schema or the referential checks. */
  | 'CYCLONEDX_INVALID';

export class AibomError extends BaseError<AibomErrorCode> {}
