/**
 * Coalesces concurrent single-key reads into batched ones (the DataLoader pattern): keys requested
 * while `maxInFlight` batches are already running wait and go together in the next batch, up to
 * `maxBatch` distinct keys each; with capacity free, a key goes out at the end of the current tick
 * (so requests parsed in the same tick share a batch). A lone request therefore waits for nothing,
 * and under load one `WHERE id = ANY(...)` query serves many requests: one round trip and one plan
 * instead of one per request.
 *
 * Nothing is cached between batches: every load reads the database as of its batch. A failed
 * batch rejects every load in it; the next batch is unaffected.
 */

export interface BatchLoaderOptions {
  /** Distinct keys per batch. Default 100. */
  readonly maxBatch?: number;
  /** Batches running at once. Default 1: under load, fewer and larger batches cost the database less (measured: 0.53–0.63× vs 0.43–0.56× of the SQL rate with 2 at 16 clients). */
  readonly maxInFlight?: number;
}

export interface BatchLoader<V> {
  /** The value for `key`, or undefined when the batch found none. */
  load(key: string): Promise<V | undefined>;
}

interface Waiter<V> {
  resolve: (value: V | undefined) => void;
  reject: (err: unknown) => void;
}

export function createBatchLoader<V>(
  fetch: (keys: readonly string[]) => Promise<ReadonlyMap<string, V>>,
  options: BatchLoaderOptions = {},
): BatchLoader<V> {
  const maxBatch = options.maxBatch ?? 100;
  const maxInFlight = options.maxInFlight ?? 1;
  if (!Number.isSafeInteger(maxBatch) || maxBatch < 1)
    throw new RangeError(`maxBatch ${maxBatch} is not ≥ 1`);
  if (!Number.isSafeInteger(maxInFlight) || maxInFlight < 1) {
    throw new RangeError(`maxInFlight ${maxInFlight} is not ≥ 1`);
  }
  // Insertion-ordered: the oldest keys go first.
  const pending = new Map<string, Waiter<V>[]>();
  let inFlight = 0;
  let scheduled = false;

  const run = async (batch: Map<string, Waiter<V>[]>): Promise<void> => {
    try {
      const found = await fetch([...batch.keys()]);
      for (const [key, waiters] of batch) for (const w of waiters) w.resolve(found.get(key));
    } catch (err) {
      for (const waiters of batch.values()) for (const w of waiters) w.reject(err);
    } finally {
      inFlight -= 1;
      dispatch();
    }
  };

  const dispatch = (): void => {
    while (inFlight < maxInFlight && pending.size > 0) {
      const batch = new Map<string, Waiter<V>[]>();
      for (const [key, waiters] of pending) {
        if (batch.size >= maxBatch) break;
        batch.set(key, waiters);
      }
      for (const key of batch.keys()) pending.delete(key);
      inFlight += 1;
      void run(batch);
    }
  };

  return {
    load: (key) =>
      new Promise<V | undefined>((resolve, reject) => {
        const waiters = pending.get(key);
        if (waiters !== undefined) waiters.push({ resolve, reject });
        else pending.set(key, [{ resolve, reject }]);
        if (!scheduled) {
          scheduled = true;
          queueMicrotask(() => {
            scheduled = false;
            dispatch();
          });
        }
      }),
  };
}
