import { setTimeout as delay } from 'node:timers/promises';
import type { Logger } from '../log/index.ts';
import type { Loop } from './loop.ts';

/**
 * The loop of a worker over a database queue (the SCITT publisher, the time-stamper): claim a batch
 * of due jobs (SKIP LOCKED, so any number of replicas run it), work it, repeat. When nothing is due
 * it sleeps until the earliest queued job is due, or until a notification on `channel` says jobs
 * became claimable (in this process or any other: src/vault/listener.ts). While the listener is not
 * connected it polls every `idleMs` instead, so a database without notifications (or a listener
 * reconnecting) delays jobs but never strands them. A failed round is logged and retried after
 * `errorDelayMs`.
 */

/** The part of the vault's LISTEN connection the loop uses. */
export interface QueueListener {
  subscribe(
    channel: string,
    subscription: { onNotify: (payload: string) => void; resync: () => void },
  ): Promise<() => void>;
  connected(): boolean;
}

export interface QueueLoopOptions {
  /** For logs. */
  readonly name: string;
  /** One round: claims up to `batchSize` due jobs, works them, returns how many were claimed. */
  readonly round: (signal: AbortSignal) => Promise<number>;
  readonly batchSize: number;
  /** Milliseconds until the earliest queued job is due (≤ 0: now); null when none is queued. */
  readonly nextDueInMs: () => Promise<number | null>;
  /** Wake-ups from other processes; without it the loop polls every `idleMs`. */
  readonly listener?: QueueListener;
  /** NOTIFY channel announcing claimable jobs. */
  readonly channel: string;
  /** Sleep when no job is due and no listener is connected. Default 1 s. */
  readonly idleMs?: number;
  /** Sleep after a failed round. Default 5 s. */
  readonly errorDelayMs?: number;
  readonly logger?: Logger;
}

export interface QueueLoop extends Loop {
  /** Runs until `signal` aborts; resolves after the current round finished. */
  readonly run: (signal: AbortSignal) => Promise<void>;
  /** Ends the current idle sleep early. */
  readonly wake: () => void;
}

/** Longest single timer: a job due later is waited for in steps (setTimeout's range is 2^31−1 ms). */
const MAX_TIMER_MS = 2 ** 31 - 1;

export function createQueueLoop(options: QueueLoopOptions): QueueLoop {
  const idleMs = options.idleMs ?? 1_000;
  const errorDelayMs = options.errorDelayMs ?? 5_000;
  const log = options.logger;
  let waking: AbortController | undefined;
  // A wake that arrives while a round is running is remembered, so the next pause is skipped:
  // otherwise a job enqueued mid-round would wait a full idle period.
  let wakePending = false;

  const wake = (): void => {
    if (waking) waking.abort();
    else wakePending = true;
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
    const due = await options.nextDueInMs();
    return due === null ? null : Math.max(0, Math.ceil(due));
  };

  return {
    name: options.name,
    wake,
    run: async (signal) => {
      log?.info({ batchSize: options.batchSize }, `${options.name} started`);
      const unsubscribe = await options.listener?.subscribe(options.channel, {
        onNotify: wake,
        // Connected (again): whatever was enqueued meanwhile is claimable now.
        resync: wake,
      });
      try {
        while (!signal.aborted) {
          try {
            const claimed = await options.round(signal);
            // A full batch suggests more is due: go again at once.
            if (claimed < options.batchSize) await pause(await idleFor(), signal);
          } catch (err) {
            log?.error({ err }, `${options.name} round failed`);
            await pause(errorDelayMs, signal);
          }
        }
      } finally {
        unsubscribe?.();
      }
      log?.info(`${options.name} stopped`);
    },
  };
}

/**
 * Delay before attempt `attempts + 1`: base·2^(attempts−1) capped at max, with "equal jitter"
 * (half fixed, half random) so replicas that failed together do not retry together.
 */
export function backoffDelay(
  attempts: number,
  policy: { readonly baseDelayMs: number; readonly maxDelayMs: number },
  random: () => number = Math.random,
): number {
  const exp = Math.min(policy.maxDelayMs, policy.baseDelayMs * 2 ** Math.max(0, attempts - 1));
  return Math.round(exp / 2 + (exp / 2) * random());
}
