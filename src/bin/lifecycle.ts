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
