import type { Loop } from '../queue/loop.ts';
import { createQueueLoop } from '../queue/queue-loop.ts';
import type { Logger } from '../log/index.ts';
import { DUE_CHANNEL, type TransparencyJobRepository, type VaultListener } from '../vault/index.ts';
import { claim, DEFAULT_RETRY_POLICY, type RetryPolicy } from './jobs.ts';
import type { Publisher } from './publisher.ts';

/**
 * The transparency worker: claim a batch of due jobs (SKIP LOCKED, so any number of replicas can
 * run it), work them concurrently through the publisher, repeat (the loop of
 * src/queue/queue-loop.ts). It is woken by the vault announcing that a job became
 * claimable (enqueued or put back, in this process or any other: the DUE_CHANNEL notification);
 * publications and failures elsewhere do not wake it.
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

export interface TransparencyWorker extends Loop {
  /** Runs until `signal` aborts; resolves after the current round finished. */
  run(signal: AbortSignal): Promise<void>;
  /** One round: claims up to a batch, works it, returns how many jobs were claimed. */
  drainOnce(signal?: AbortSignal): Promise<number>;
  /** Ends the current idle sleep early. */
  wake(): void;
}

export function createWorker(options: WorkerOptions): TransparencyWorker {
  const batchSize = options.batchSize ?? 8;
  const policy = options.policy ?? DEFAULT_RETRY_POLICY;

  const drainOnce = async (signal?: AbortSignal): Promise<number> => {
    const jobs = await claim(options.jobs, batchSize, { policy });
    await Promise.all(
      jobs.map((job) => options.publisher.process(job, signal !== undefined ? { signal } : {})),
    );
    return jobs.length;
  };

  const loop = createQueueLoop({
    name: 'transparency worker',
    round: drainOnce,
    batchSize,
    nextDueInMs: () => options.jobs.nextDueInMs(),
    channel: DUE_CHANNEL,
    ...(options.listener !== undefined ? { listener: options.listener } : {}),
    ...(options.idleMs !== undefined ? { idleMs: options.idleMs } : {}),
    ...(options.errorDelayMs !== undefined ? { errorDelayMs: options.errorDelayMs } : {}),
    ...(options.logger !== undefined
      ? { logger: options.logger.child({ component: 'transparency-worker' }) }
      : {}),
  });

  return { name: loop.name, drainOnce, wake: loop.wake, run: loop.run };
}
