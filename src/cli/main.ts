import { ConfigError } from '../config/index.ts';
import { CliError, type Command } from './command.ts';
import { aibomFetchCommand, aibomGenerateCommand } from './aibom.ts';
import { getCommand } from './get.ts';
import {
  attestationExportCommand,
  auditExportCommand,
  auditLogCommand,
  keysFetchCommand,
  keysGetCommand,
} from './export.ts';
import { verifyCommand } from './verify.ts';

/**
 * Command table of service-ctl. Each command is a module exporting a `Command`; this file only
 * dispatches on the leading words (`aibom generate`, `attestation export`, ...).
 */
const commands: Command[] = [
  verifyCommand,
  getCommand,
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
  return `usage: service-ctl <command> [flags]\n\ncommands:\n${lines.join('\n')}\n`;
}

/** Returns the process exit code; never throws for user errors (they become one line on stderr). */
export async function main(argv: readonly string[]): Promise<number> {
  if (argv.length === 0 || argv[0] === 'help' || argv[0] === '--help' || argv[0] === '-h') {
    process.stdout.write(usage());
    return argv.length === 0 ? 2 : 0;
  }
  const match = commands
    .filter((c) => c.path.every((word, i) => argv[i] === word))
    .sort((a, b) => b.path.length - a.path.length)[0];
  if (!match) {
    console.error(`service-ctl: unknown command "${argv.join(' ')}" (see service-ctl help)`);
    return 2;
  }
  try {
    return await match.run(argv.slice(match.path.length));
  } catch (err) {
    if (err instanceof CliError) {
      console.error(`service-ctl: ${err.message}`);
      return err.exitCode;
    }
    const code = (err as NodeJS.ErrnoException).code ?? '';
    const usage = code.startsWith('ERR_PARSE_ARGS') || err instanceof ConfigError;
    console.error(`service-ctl: ${(err as Error).message.split('\n').join('; ')}`);
    return usage ? 2 : 1;
  }
}
