import { BaseError } from '../errors.ts';
import type { ReconcileResult } from './workers.ts';

/** A reconcile that did not return within its deadline; its key is retried with backoff. */
export class ReconcileTimeoutError extends BaseError<'RECONCILE_TIMEOUT'> {
  constructor(message: string) {
    super('RECONCILE_TIMEOUT', message);
  }
}

/**
 * Wraps a reconciler so that no key holds a worker longer than `timeoutMs`. A reconcile past its
 * deadline keeps running in the background (its own calls have deadlines and will end it), but the
 * worker is released to other keys at once; while it runs, the same key is not reconciled a second
 * time concurrently, only requeued with backoff.
 */
export function withReconcileDeadline(
  reconcile: (key: string) => Promise<ReconcileResult | undefined | void>,
  timeoutMs: number,
  onOverrun: (key: string) => void,
): (key: string) => Promise<ReconcileResult | undefined | void> {
  const overrunning = new Set<string>();
  return async (key) => {
    if (overrunning.has(key)) return { requeue: true };
    const run = reconcile(key);
    let timer: ReturnType<typeof setTimeout> | undefined;
    const deadline = new Promise<'timeout'>((resolve) => {
      timer = setTimeout(resolve, timeoutMs, 'timeout');
    });
    try {
      const outcome = await Promise.race([run.then((result) => ({ result })), deadline]);
      if (outcome !== 'timeout') return outcome.result;
    } finally {
      clearTimeout(timer);
    }
    overrunning.add(key);
    run
      .catch(() => undefined)
      .finally(() => overrunning.delete(key))
      .catch(() => undefined);
    onOverrun(key);
    throw new ReconcileTimeoutError(`reconcile of ${key} did not finish within ${timeoutMs} ms`);
  };
}
