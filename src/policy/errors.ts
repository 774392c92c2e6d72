import { BaseError } from '../errors.ts';

export type PolicyErrorCode =
  /** A policy pack name or version cannot be recorded unambiguously as `PACK[@VERSION]`. */
  'INVALID_POLICY_PACK';

export class PolicyError extends BaseError<PolicyErrorCode> {}
