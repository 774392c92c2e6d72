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
    // The record above carries the AIBOM's digest, signature, key id, cert_chain_ref and manifest
    // digest; the bytes and the certificates are one command away (stderr: stdout stays JSON).
    const artifacts = run.artifacts as Record<string, unknown> | undefined;
    if (artifacts?.aibom !== undefined) {
      const id = String(run.id);
      process.stderr.write(
        `to verify the AIBOM offline: service-ctl audit export --run ${id} --output evidence.tar && ` +
          `service-ctl keys fetch --out trust && service-ctl verify evidence.tar --trust-anchor trust/ca.pem\n`,
      );
    }
    return 0;
  },
};
