import { pino, type Logger, type LevelWithSilent } from 'pino';

export type { Logger } from 'pino';

/**
 * Root logger of a process. Modules never import a global logger: they receive a child
 * (`logger.child({ component })`) from the entry point that wired them.
 */
export function createLogger(name: string, level: LevelWithSilent = 'info'): Logger {
  return pino({
    name,
    level,
    base: { pid: process.pid },
    timestamp: pino.stdTimeFunctions.isoTime,
    redact: { paths: ['*.authorization', '*.token', '*.password', '*.secretKey'], censor: '[redacted]' },
  });
}
