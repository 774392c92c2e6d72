import { setTimeout as delay } from 'node:timers/promises';
import type { Logger } from '../log/index.ts';
import { DUE_CHANNEL, type TransparencyJobRepository, type VaultListener } from '../vault/index.ts';
import { claim, DEFAULT_RETRY_POLICY, type RetryPolicy } from './jobs.ts';
import type { Publisher } from './publisher.ts';

/**
 * The transparency worker loop: claim a batch of due jobs (SKIP LOCKED, so any number of replicas
 * can run it), work them concurrently through the publisher, repeat. When nothing is due it sleeps
 * until the earliest queued job (or lease) is due, or until the vault announces that a job became
 * claimable (enqueued or put back, in this process or any other: the DUE_CHANNEL notification,
 * src/vault/listener.ts). Publications and failures elsewhere do not wake it. While the listener is
 * not connected it polls every `idleMs` instead, so a database without notifications (or a
 * listener reconnecting) delays jobs but never strands them.
 */

export interface WorkerOptions {
  /** The queue's rows (`vault.transparencyJobs`). */
  readonly jobs: TransparencyJobRepository;
  readonly publisher: Publisher;
  /** Wake-ups from other processes; without it the worker polls every `idleMs`. */
  readonly listener?: VaultListener;
  /** Jobs claimed (and worked concurrently) per round. Default 8. */
  readonly batchSize?: number;
  /** Sleep when no job is due and no listener is connected. Default 1 s. */
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

/** Longest single timer: a job due later is waited for in steps (setTimeout's range is 2^31−1 ms). */
const MAX_TIMER_MS = 2 ** 31 - 1;

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

  const wake = (): void => {
    if (waking) waking.abort();
    else wakePending = true;
  };

  const drainOnce = async (signal?: AbortSignal): Promise<number> => {
    const jobs = await claim(options.jobs, batchSize, { policy });
    await Promise.all(
      jobs.map((job) => options.publisher.process(job, signal !== undefined ? { signal } : {})),
    );
    return jobs.length;
  };

  const pause = async (ms: number | null, signal: AbortSignal): Promise<void> => {
    if (wakePending) {
      wakePending = false;
      return;
    }
    waking = new AbortController();
    const until = AbortSignal.any([signal, waking.signal]);
    try {
      if (ms === null) {
        if (!until.aborted)
          await new Promise((resolve) => until.addEventListener('abort', resolve, { once: true }));
      } else await delay(Math.min(ms, MAX_TIMER_MS), undefined, { signal: until });
    } catch {
      // woken or stopped
    } finally {
      waking = undefined;
    }
  };

  /** How long to sleep with nothing due: until the next job is due (null: until woken). */
  const idleFor = async (): Promise<number | null> => {
    if (options.listener?.connected() !== true) return idleMs;
    const due = await options.jobs.nextDueInMs();
    return due === null ? null : Math.max(0, Math.ceil(due));
  };

  return {
    drainOnce,
    wake,
    async run(signal) {
      log?.info({ batchSize }, 'transparency worker started');
      const unsubscribe = await options.listener?.subscribe(DUE_CHANNEL, {
        onNotify: wake,
        // Connected (again): whatever was enqueued meanwhile is claimable now.
        resync: wake,
      });
      try {
        while (!signal.aborted) {
          let claimed: number;
          try {
            claimed = await drainOnce(signal);
            // A full batch suggests more is due: go again at once.
            if (claimed < batchSize) await pause(await idleFor(), signal);
          } catch (err) {
            log?.error({ err }, 'transparency worker round failed');
            await pause(errorDelayMs, signal);
          }
        }
      } finally {
        unsubscribe?.();
      }
      log?.info('transparency worker stopped');
    },
  };
}
