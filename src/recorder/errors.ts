import type { FailureReason } from '../crd/reasons.ts';
import { BaseError } from '../errors.ts';

/**
 * A recording step failed on a dependency; the code is the condition reason the Run shows for it
 * (src/crd/reasons.ts). The one way a reason is attached to a failure: `because(reason, fn)`.
 */
export type RecordErrorCode = FailureReason;

export class RecordError extends BaseError<RecordErrorCode> {}

/**
 * Runs `fn`; a failure becomes a RecordError with `reason` (the dependency it failed on), unless it
 * already is one (the innermost reason is the most precise) or is a RangeError (RecordingFailed).
 */
export async function because<T>(reason: RecordErrorCode, fn: () => Promise<T>): Promise<T> {
  try {
    return await fn();
  } catch (err) {
    if (err instanceof RecordError) throw err;
    // A RangeError (call stack exceeded, invalid length) is this process's own limit, never the
    // dependency's: blaming the vault for it would send operators after a healthy database.
    const own = err instanceof RangeError ? 'RecordingFailed' : reason;
    throw new RecordError(own, (err as Error)?.message ?? String(err), { cause: err });
  }
}
