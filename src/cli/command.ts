import { BaseError } from '../errors.ts';

export interface Command {
  /** Leading words that select the command, e.g. ['aibom', 'generate']. */
  readonly path: readonly string[];
  readonly summary: string;
  /** Resolves to the exit code. Throws CliError for user-facing failures. */
  run(args: readonly string[]): Promise<number>;
}

/**
 * `USAGE`: the command line is wrong (exit 2); `FAILED`: the command could not do its job (exit 1);
 * `API`: the API answered a problem (`ApiError`, which carries the problem's own code).
 */
export type CliErrorCode = 'USAGE' | 'FAILED' | 'API';

/** A failure to print as one line on stderr; exit code 2 for usage errors, 1 otherwise. */
export class CliError extends BaseError<CliErrorCode> {
  readonly exitCode: number;
  constructor(message: string, exitCode = 1, options: { cause?: unknown; code?: CliErrorCode } = {}) {
    super(
      options.code ?? (exitCode === 2 ? 'USAGE' : 'FAILED'),
      message,
      options.cause !== undefined ? { cause: options.cause } : undefined,
    );
    this.exitCode = exitCode;
  }
}
