import { ConfigError } from '../config/index.ts';
import { CliError, helpText, type Command } from './command.ts';
import { aibomFetchCommand, aibomGenerateCommand } from './aibom.ts';
import { getCommand } from './get.ts';
import {
  attestationExportCommand,
  auditExportCommand,
  auditLogCommand,
  keysFetchCommand,
  keysGetCommand,
} from './export.ts';
import { queryCommand } from './query.ts';
import { verifyCommand } from './verify.ts';
import { quietWasmImportWarning } from '../capability/wasm-warning.ts';

/**
 * Command table of service-ctl. Each command is a module exporting a `Command`; this file only
 * dispatches on the leading words (`aibom generate`, `attestation export`, ...) and answers
 * `--help` for every command from its declared flags (src/cli/command.ts).
 */
export const commands: readonly Command[] = [
  verifyCommand,
  getCommand,
  queryCommand,
  aibomGenerateCommand,
  aibomFetchCommand,
  attestationExportCommand,
  auditExportCommand,
  auditLogCommand,
  keysFetchCommand,
  keysGetCommand,
  {
    path: ['version'],
    summary: 'print the service-ctl version',
    usage: '',
    options: {},
    run: async () => {
      const { default: pkg } = (await import('../../package.json', { with: { type: 'json' } })) as {
        default: { version: string };
      };
      process.stdout.write(`${pkg.version}\n`);
      return 0;
    },
  },
];

function usage(): string {
  const width = Math.max(...commands.map((c) => c.path.join(' ').length));
  const lines = commands.map((c) => `  ${c.path.join(' ').padEnd(width)}  ${c.summary}`);
  return (
    `usage: service-ctl <command> [flags]\n\ncommands:\n${lines.join('\n')}\n\n` +
    `service-ctl <command> --help shows a command's flags. Environment: SERVICE_API_URL, SERVICE_TOKEN,\n` +
    `SERVICE_TRUST_ANCHOR, DATABASE_URL (aibom generate).\n`
  );
}

/** The command the leading words of `words` select (the longest match). */
function commandOf(words: readonly string[]): Command | undefined {
  return commands
    .filter((c) => c.path.every((word, i) => words[i] === word))
    .sort((a, b) => b.path.length - a.path.length)[0];
}

const isHelp = (a: string): boolean => a === '--help' || a === '-h';

/**
 * Exit status when the reader of stdout went away (`service-ctl verify … | head -1`): what a shell
 * reports for a process killed by SIGPIPE (128 + 13). Not 0: a pipeline under `set -o pipefail`
 * must not read a verification cut short as a success.
 */
export const EPIPE_EXIT = 141;

const guarded = new WeakSet<NodeJS.WriteStream>();

/**
 * Every command writes to stdout; when its reader closes, the next write fails with EPIPE as an
 * 'error' event on the stream, which unhandled crashes with a stack trace. Like other CLIs, end
 * quietly instead (nothing more can be written anyway). Installed once per stream, from `main`, so
 * it covers every command; any other stream error is rethrown as before.
 */
export function exitQuietlyOnEpipe(
  stream: NodeJS.WriteStream = process.stdout,
  exit: (code: number) => void = (code) => process.exit(code),
): void {
  if (guarded.has(stream)) return;
  guarded.add(stream);
  stream.on('error', (err: NodeJS.ErrnoException) => {
    if (err.code === 'EPIPE') exit(EPIPE_EXIT);
    else throw err;
  });
}

/** Returns the process exit code; never throws for user errors (they become one line on stderr). */
export async function main(argv: readonly string[]): Promise<number> {
  quietWasmImportWarning();
  exitQuietlyOnEpipe();
  if (argv.length === 0 || argv[0] === 'help' || isHelp(argv[0]!)) {
    // `service-ctl help get`: that command's help.
    const topic = argv[0] === 'help' ? commandOf(argv.slice(1)) : undefined;
    process.stdout.write(topic ? helpText(topic) : usage());
    return argv.length === 0 ? 2 : 0;
  }
  const match = commandOf(argv);
  if (!match) {
    console.error(`service-ctl: unknown command "${argv.join(' ')}" (see service-ctl help)`);
    return 2;
  }
  const args = argv.slice(match.path.length);
  // Before the command parses anything: `--help` works on a command line that is otherwise wrong.
  if (args.some(isHelp)) {
    process.stdout.write(helpText(match));
    return 0;
  }
  try {
    return await match.run(args);
  } catch (err) {
    if (err instanceof CliError) {
      console.error(`service-ctl: ${err.message}`);
      return err.exitCode;
    }
    const code = (err as NodeJS.ErrnoException).code ?? '';
    const usage = code.startsWith('ERR_PARSE_ARGS') || err instanceof ConfigError;
    const hint = code.startsWith('ERR_PARSE_ARGS') ? ` (see service-ctl ${match.path.join(' ')} --help)` : '';
    const message =
      err instanceof ConfigError
        ? `invalid configuration: ${err.problems.join('; ')}`
        : (err as Error).message.split('\n').join('; ');
    console.error(`service-ctl: ${message}${hint}`);
    return usage ? 2 : 1;
  }
}
