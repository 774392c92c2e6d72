import { parseArgs } from 'node:util';
import { CliError, type Command } from './command.ts';
import { apiOptions, clientFrom } from './options.ts';

export const getCommand: Command = {
  path: ['get'],
  summary: 'print a run with its `artifacts` (the AIBOM record, its signature and C2PA manifest)',
  async run(args) {
    const { values } = parseArgs({ args: [...args], options: { run: { type: 'string' }, ...apiOptions } });
    if (values.run === undefined) throw new CliError('usage: service-ctl get --run <RUN_ID>', 2);
    if (!/^[0-9a-f-]{36}$/i.test(values.run)) throw new CliError(`--run: ${values.run} is not a run UUID`, 2);
    const run = await clientFrom(values).getRun(values.run);
    process.stdout.write(`${JSON.stringify(run, null, 2)}\n`);
    return 0;
  },
};
