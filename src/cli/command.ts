export interface Command {
  /** Leading words that select the command, e.g. ['aibom', 'generate']. */
  readonly path: readonly string[];
  readonly summary: string;
  /** Resolves to the exit code. Throws CliError for user-facing failures. */
  run(args: readonly string[]): Promise<number>;
}

/** A failure to print as one line on stderr; exit code 2 for usage errors, 1 otherwise. */
export class CliError extends Error {
  readonly exitCode: number;
  constructor(message: string, exitCode = 1) {
    super(message);
    this.name = 'CliError';
    this.exitCode = exitCode;
  }
}
