import { setTimeout as delay } from 'node:timers/promises';
import type pg from 'pg';
import type { Logger } from '../log/index.ts';
import { claim, DEFAULT_RETRY_POLICY, type RetryPolicy } from './jobs.ts';
import type { Publisher } from './publisher.ts';

/**
 * The transparency worker loop: claim a batch of due jobs (SKIP LOCKED, so any number of replicas
 * can run it), work them concurrently through the publisher, repeat; sleep `idleMs` when nothing
 * is due. `wake()` cuts the sleep short (call it after enqueueing in the same process).
 */

export interface WorkerOptions {
  readonly pool: pg.Pool;
  readonly publisher: Publisher;
  /** Jobs claimed (and worked concurrently) per round. Default 8. */
  readonly batchSize?: number;
  /** Sleep when no job is due. Default 1 s. */
  readonly idleMs?: number;
  /** Sleep after the database failed a claim. Default 5 s. */
  readonly errorDelayMs?: number;
  /** Must be the publisher's policy (lease and attempt cap). */
  readonly policy?: RetryPolicy;
  readonly logger?: Logger;
}

export interface TransparencyWorker {
  /** Runs until `signal` aborts; resolves after the current round finished. */
  run(signal: AbortSignal): Promise<void>;
  /** One round: claims up to a batch, works it, returns how many jobs were claimed. */
  drainOnce(signal?: AbortSignal): Promise<number>;
  /** Ends the current idle sleep early. */
  wake(): void;
}

export function createWorker(options: WorkerOptions): TransparencyWorker {
  const batchSize = options.batchSize ?? 8;
  const idleMs = options.idleMs ?? 1_000;
  const errorDelayMs = options.errorDelayMs ?? 5_000;
  const policy = options.policy ?? DEFAULT_RETRY_POLICY;
  const log = options.logger?.child({ component: 'transparency-worker' });
  let waking: AbortController | undefined;
  // A wake that arrives while a round is running is remembered, so the next pause is skipped:
  // otherwise a job enqueued mid-round would wait a full idle period.
  let wakePending = false;

  const drainOnce = async (signal?: AbortSignal): Promise<number> => {
    const jobs = await claim(options.pool, batchSize, { policy });
    await Promise.all(
      jobs.map((job) => options.publisher.process(job, signal !== undefined ? { signal } : {})),
    );
    return jobs.length;
  };

  const pause = async (ms: number, signal: AbortSignal): Promise<void> => {
    if (wakePending) {
      wakePending = false;
      return;
    }
    waking = new AbortController();
    try {
      await delay(ms, undefined, { signal: AbortSignal.any([signal, waking.signal]) });
    } catch {
      // woken or stopped
    } finally {
      waking = undefined;
    }
  };

  return {
    drainOnce,
    wake: () => {
      if (waking) waking.abort();
      else wakePending = true;
    },
    async run(signal) {
      log?.info({ batchSize }, 'transparency worker started');
      while (!signal.aborted) {
        let claimed: number;
        try {
          claimed = await drainOnce(signal);
        } catch (err) {
          log?.error({ err }, 'transparency worker round failed');
          await pause(errorDelayMs, signal);
          continue;
        }
        // A full batch suggests more is due: go again at once.
        if (claimed < batchSize) await pause(idleMs, signal);
      }
      log?.info('transparency worker stopped');
    },
  };
}
