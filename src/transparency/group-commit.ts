/**
 * Group commit: items arriving while a batch is being written wait for it and then go together in
 * the next one (at most `maxBatch` each); a lone item is a batch of one, at once. The batch
 * function answers in input order; when it throws, every item of that batch rejects with the
 * error and the next batch still runs.
 */
export function groupCommit<I, O>(
  maxBatch: number,
  runBatch: (items: I[]) => Promise<O[]>,
): (item: I) => Promise<O> {
  const pending: { item: I; resolve: (r: O) => void; reject: (e: unknown) => void }[] = [];
  let flushing = false;
  const flush = async (): Promise<void> => {
    flushing = true;
    try {
      while (pending.length > 0) {
        const batch = pending.splice(0, maxBatch);
        try {
          const results = await runBatch(batch.map((b) => b.item));
          for (const [i, b] of batch.entries()) b.resolve(results[i]!);
        } catch (err) {
          for (const b of batch) b.reject(err);
        }
      }
    } finally {
      flushing = false;
    }
  };
  return (item) =>
    new Promise((resolve, reject) => {
      pending.push({ item, resolve, reject });
      // A microtask, not at once: items submitted in the same tick (Promise.all over a claim)
      // share the first batch.
      if (!flushing) {
        flushing = true;
        queueMicrotask(() => void flush());
      }
    });
}
