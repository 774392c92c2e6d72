import { parseArgs } from 'node:util';
import { BaseError } from '../errors.ts';

/**
 * One flag of a command: what `node:util` parseArgs needs, plus what its help shows. A command
 * declares its flags once (`options`); parsing (`parseCommand`) and `--help` both read them, so the
 * help cannot drift from what the command accepts.
 */
export interface OptionSpec {
  readonly type: 'string' | 'boolean';
  readonly short?: string;
  readonly multiple?: boolean;
  readonly default?: string | boolean;
  /** Placeholder of the value in the help (`ID`, `FILE`); string options only. */
  readonly value?: string;
  readonly description: string;
}

export type OptionSpecs = Readonly<Record<string, OptionSpec>>;

export interface Command {
  /** Leading words that select the command, e.g. ['aibom', 'generate']. */
  readonly path: readonly string[];
  readonly summary: string;
  /** What follows the command words in the synopsis, e.g. `--run <RUN> [--out DIR]`. */
  readonly usage?: string;
  /** The flags, for parsing and for `--help`; a command without them gets a help of its summary. */
  readonly options?: OptionSpecs;
  /** Further help: what the output is, examples. */
  readonly details?: string;
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

/** The `--help` flag every command has (main.ts answers it before the command runs). */
export const HELP_OPTION = {
  help: { type: 'boolean', short: 'h', description: 'show this help' },
} as const satisfies OptionSpecs;

/**
 * Parses `args` against the command's flags (strict: an unknown flag or a missing value is a usage
 * error, exit 2, naming the command's help).
 */
export function parseCommand<const O extends OptionSpecs>(
  command: { readonly path: readonly string[]; readonly options: O },
  args: readonly string[],
  { positionals = false }: { positionals?: boolean } = {},
) {
  const options = Object.fromEntries(
    Object.entries<OptionSpec>({ ...command.options, ...HELP_OPTION }).map(([k, o]) => [
      k,
      {
        type: o.type,
        ...(o.short !== undefined ? { short: o.short } : {}),
        ...(o.multiple !== undefined ? { multiple: o.multiple } : {}),
        ...(o.default !== undefined ? { default: o.default } : {}),
      },
    ]),
  ) as O & typeof HELP_OPTION;
  try {
    return parseArgs({ args: [...args], options, allowPositionals: positionals, strict: true });
  } catch (err) {
    const lines = (err as Error).message.split('\n');
    let message = lines[0]!.replace(/\.?$/, '');
    // `--limit -5`: parseArgs takes -5 for a flag and says how to write it on its last line only.
    const dash = lines.find((l) => l.startsWith('To specify an option argument starting with a dash'));
    if (dash !== undefined) message += `: ${dash.replace(/^To specify/, 'to give').replace(/\.?$/, '')}`;
    throw new CliError(`${message} (see service-ctl ${command.path.join(' ')} --help)`, 2, { cause: err });
  }
}

function flagText(name: string, o: OptionSpec): string {
  const long = `--${name}${o.type === 'string' ? ` ${o.value ?? name.toUpperCase()}` : ''}`;
  return o.short !== undefined ? `-${o.short}, ${long}` : `    ${long}`;
}

/** The help of one command: synopsis, summary, flags with their descriptions, details. */
export function helpText(command: Command): string {
  const name = `service-ctl ${command.path.join(' ')}`;
  const lines = [`usage: ${name}${command.usage !== undefined ? ` ${command.usage}` : ' [flags]'}`, ''];
  lines.push(command.summary);
  const options: [string, OptionSpec][] = [
    ...Object.entries(command.options ?? {}),
    ...Object.entries(HELP_OPTION),
  ];
  const flags = options.map(([k, o]) => [flagText(k, o), o] as const);
  const width = Math.max(...flags.map(([f]) => f.length));
  lines.push('', 'flags:');
  for (const [f, o] of flags) {
    const more = [
      o.multiple ? 'repeatable' : undefined,
      o.default !== undefined && o.default !== false ? `default ${String(o.default)}` : undefined,
    ].filter((x) => x !== undefined);
    lines.push(`  ${f.padEnd(width)}  ${o.description}${more.length > 0 ? ` (${more.join(', ')})` : ''}`);
  }
  if (command.details !== undefined) lines.push('', command.details.trimEnd());
  return `${lines.join('\n')}\n`;
}
