import { Reasons, type FailureReason } from '../../crd/reasons.ts';
import { ObjectStoreError } from '../../blob/store.ts';
import { RecordError } from '../../recorder/index.ts';
import { isVaultUnavailable } from '../../vault/index.ts';

/**
 * What a failed reconcile is called on the Run (its condition reason and Warning Event): a
 * RecordError says its own code; an object store or PostgreSQL outage is named as such; anything
 * else is a recording failure.
 */
export function failureReason(err: unknown): FailureReason {
  if (err instanceof RecordError) return err.code;
  if (err instanceof ObjectStoreError) return Reasons.ObjectStoreUnavailable;
  if (isVaultUnavailable(err)) return Reasons.VaultUnavailable;
  return Reasons.RecordingFailed;
}

/** The message a failure shows on the Run: what is down, then the error's first line (at most 500 characters). */
export function humanCause(reason: FailureReason, err: unknown): string {
  const msg = ((err as Error)?.message ?? String(err)).split('\n')[0]!.slice(0, 500);
  switch (reason) {
    case Reasons.VaultUnavailable:
      return `the vault (PostgreSQL) is unavailable: ${msg}`;
    case Reasons.ObjectStoreUnavailable:
      return `the object store is unavailable: ${msg}`;
    case Reasons.SignerUnavailable:
      return `no signer could be loaded: ${msg}`;
    case Reasons.TimestampUnavailable:
      return `no RFC 3161 time-stamp could be obtained: ${msg}`;
    default:
      return msg;
  }
}
