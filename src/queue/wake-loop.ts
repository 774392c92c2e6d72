/**
 * A leader's round loop: one round at the start, then one whenever `poke` is called (a
 * notification) or `intervalMs` passes without one, until `signal` aborts; the round in progress
 * finishes first. A round that throws goes to `onError` and the loop goes on. Pokes during a round
 * coalesce into one more round. Used by the vault checkpointer and the witnessing loop.
 */
export async function runWakeLoop(opts: {
  readonly signal: AbortSignal;
  readonly intervalMs: number;
  /** Subscribes `poke` to what should start a round; returns the unsubscribe. */
  readonly subscribe: (poke: () => void) => Promise<() => void>;
  readonly round: () => Promise<void>;
  readonly onError: (err: unknown) => void;
}): Promise<void> {
  const { signal } = opts;
  let wanted = true; // a round at the start of the term
  let wake: (() => void) | undefined;
  const unsubscribe = await opts.subscribe(() => {
    wanted = true;
    wake?.();
  });
  const onAbort = (): void => wake?.();
  signal.addEventListener('abort', onAbort);
  try {
    while (!signal.aborted) {
      if (wanted) {
        wanted = false;
        try {
          await opts.round();
        } catch (err) {
          opts.onError(err);
        }
        continue;
      }
      await new Promise<void>((resolve) => {
        const timer = setTimeout(() => {
          wanted = true;
          resolve();
        }, opts.intervalMs);
        wake = () => {
          clearTimeout(timer);
          resolve();
        };
        if (signal.aborted || wanted) wake();
      });
      wake = undefined;
    }
  } finally {
    signal.removeEventListener('abort', onAbort);
    unsubscribe();
  }
}
