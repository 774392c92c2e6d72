import { setTimeout as sleep } from 'node:timers/promises';
import { BaseError } from '../errors.ts';
import type { Logger } from '../log/index.ts';

export type Stop = () => Promise<void>;

/**
 * Runs `start`, then waits for SIGTERM or SIGINT and calls the returned stop function once.
 * A second signal, or a stop that takes longer than `graceMs`, exits hard: Kubernetes sends SIGKILL
 * after terminationGracePeriodSeconds anyway, and a wedged shutdown must not hide that.
 */
export async function runUntilSignal(
  logger: Logger,
  start: () => Promise<Stop>,
  graceMs = 20_000,
): Promise<void> {
  let stop: Stop;
  try {
    stop = await start();
  } catch (err) {
    logger.fatal({ err }, 'start failed');
    process.exitCode = 1;
    return;
  }
  await new Promise<void>((resolve) => {
    let stopping = false;
    const onSignal = (signal: NodeJS.Signals): void => {
      if (stopping) {
        logger.warn({ signal }, 'second signal, exiting now');
        process.exit(1);
      }
      stopping = true;
      logger.info({ signal }, 'shutting down');
      const timer = setTimeout(() => {
        logger.error({ graceMs }, 'shutdown exceeded grace period, exiting');
        process.exit(1);
      }, graceMs);
      timer.unref();
      stop()
        .then(() => logger.info('stopped'))
        .catch((err: unknown) => {
          logger.error({ err }, 'error during shutdown');
          process.exitCode = 1;
        })
        .finally(resolve);
    };
    process.on('SIGTERM', onSignal);
    process.on('SIGINT', onSignal);
  });
}

/** /readyz's failure while the process drains after SIGTERM (see `Drain`). */
export class ShuttingDown extends BaseError<'SHUTTING_DOWN'> {
  constructor() {
    super('SHUTTING_DOWN', 'shutting down');
  }
}

/**
 * The first step of a server's stop: report not ready, keep serving for `delayMs`, then let the
 * caller close its listener. Endpoints of a terminating pod leave the Service asynchronously (the
 * EndpointSlice controller, then every node's kube-proxy rewriting its rules), so a listener closed
 * at SIGTERM refuses the connections still routed to it: seen in the e2e's rolling `helm upgrade`,
 * one ECONNREFUSED through the Service as the last old pod went. kube-apiserver's
 * --shutdown-delay-duration is the same idea.
 */
export class Drain {
  #draining = false;
  readonly #delayMs: number;

  constructor(delayMs: number) {
    this.#delayMs = delayMs;
  }

  /** Whether `start` ran: the process is draining. */
  get draining(): boolean {
    return this.#draining;
  }

  /** Throws ShuttingDown once `start` ran: put in front of the readiness check. */
  check(): void {
    if (this.#draining) throw new ShuttingDown();
  }

  /** Marks the process not ready and resolves after the delay (at once when it is 0). */
  async start(logger: Logger): Promise<void> {
    this.#draining = true;
    if (this.#delayMs === 0) return;
    logger.info({ delayMs: this.#delayMs }, 'draining: not ready, still serving');
    await sleep(this.#delayMs);
  }
}
