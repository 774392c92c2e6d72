import type { Registry } from 'prom-client';
import type { Logger } from '../log/index.ts';
import { reconcileMetrics } from '../metrics/runtime.ts';
import type { WorkQueue } from './workqueue.ts';

/**
 * What a reconcile asks for next (controller-runtime's `Result`). Returning nothing means done:
 * the key's backoff is reset. Throwing means failed: the key is requeued with backoff.
 */
export interface ReconcileResult {
  /** Requeue with the key's rate-limited backoff without counting an error (e.g. waiting on a peer). */
  requeue?: boolean;
  /** Requeue after this many ms and reset the backoff (periodic checks, known wait times). */
  requeueAfterMs?: number;
  /**
   * The reconcile stopped after a bounded batch of work and has more to do: requeue at once, with
   * the backoff reset, behind the keys of other tenants (the queue is round-robin across them), so
   * one large object never holds a worker for long.
   */
  more?: boolean;
}

export type Reconciler = (
  key: string,
  signal: AbortSignal,
) => Promise<ReconcileResult | void> | ReconcileResult | void;

export interface RunWorkersOptions {
  logger: Logger;
  registry?: Registry;
  /** Label of the reconcile metrics; defaults to the queue's name. */
  name?: string;
  /**
   * Stops the workers: the queue is shut down without draining, the reconciler sees the same signal
   * (so it can abandon slow work, e.g. when leadership is lost) and `runWorkers` resolves once every
   * in-flight reconcile has returned.
   */
  signal?: AbortSignal;
}

/**
 * Runs `n` workers over `queue` until it is shut down and drained. A reconciler error or throw is
 * logged, counted and turned into a rate-limited requeue: it never ends a worker or the loop.
 */
export async function runWorkers(
  queue: WorkQueue,
  n: number,
  reconcile: Reconciler,
  options: RunWorkersOptions,
): Promise<void> {
  if (!(Number.isInteger(n) && n >= 1)) throw new RangeError('need at least one worker');
  const name = options.name ?? queue.name;
  const labels = { controller: name };
  const metrics = options.registry ? reconcileMetrics(options.registry) : undefined;
  const signal = options.signal ?? new AbortController().signal;
  const log = options.logger;
  const stop = (): void => void queue.shutDown({ drain: false });
  if (signal.aborted) stop();
  else signal.addEventListener('abort', stop, { once: true });

  const processOne = async (key: string): Promise<void> => {
    const start = performance.now();
    metrics?.active.inc(labels);
    let result: string;
    try {
      const out = (await reconcile(key, signal)) ?? undefined;
      if (out?.more === true) {
        queue.forget(key);
        // Processing: the add only marks the key dirty; done() below puts it at the back of its shard,
        // at the level it came from (the rest of a backlog Run is backlog still, not a fresh change).
        queue.add(key, queue.processingLevel(key) ?? 'normal');
        result = 'more';
      } else if (out?.requeueAfterMs !== undefined && out.requeueAfterMs > 0) {
        queue.forget(key);
        queue.addAfter(key, out.requeueAfterMs);
        result = 'requeue_after';
      } else if (out?.requeue === true) {
        queue.addRateLimited(key);
        result = 'requeue';
      } else {
        queue.forget(key);
        result = 'success';
      }
    } catch (err) {
      result = 'error';
      metrics?.errors.inc(labels);
      if (signal.aborted) {
        log.debug({ err, key }, 'reconcile ended by shutdown');
      } else {
        queue.addRateLimited(key);
        log.error({ err, key, retries: queue.numRequeues(key) }, 'reconcile failed; requeued with backoff');
      }
    } finally {
      metrics?.duration.observe(labels, (performance.now() - start) / 1000);
      metrics?.active.dec(labels);
      queue.done(key);
    }
    metrics?.total.inc({ ...labels, result });
  };

  const worker = async (): Promise<void> => {
    for (let key = await queue.get(); key !== undefined; key = await queue.get()) await processOne(key);
  };

  try {
    await Promise.all(Array.from({ length: n }, worker));
  } finally {
    signal.removeEventListener('abort', stop);
  }
}
