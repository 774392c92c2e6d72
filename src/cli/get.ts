import type { Command } from './command.ts';
import { parseCommand } from './command.ts';
import { apiOptions, clientFrom, parseRunRef, runOption } from './options.ts';
import { outputOption, parseOutput, render, type Column, type OutputFormat } from './output.ts';

const FORMATS: OutputFormat[] = ['json', 'yaml', 'table'];

type RunDetail = Record<string, unknown> & {
  id: string;
  namespace?: string;
  name?: string;
  phase?: string | null;
  steps?: unknown[];
  artifacts?: {
    aibom?: { digest?: string; bucket?: string; key?: string; transparency?: { status?: string } };
  };
};

const COLUMNS: Column<RunDetail>[] = [
  { header: 'namespace', value: (r) => r.namespace },
  { header: 'name', value: (r) => r.name },
  { header: 'id', value: (r) => r.id },
  { header: 'phase', value: (r) => r.phase },
  { header: 'steps', value: (r) => r.steps?.length },
  { header: 'aibom', value: (r) => r.artifacts?.aibom?.digest },
  {
    header: 'location',
    value: (r) =>
      r.artifacts?.aibom?.key !== undefined
        ? `s3://${r.artifacts.aibom.bucket}/${r.artifacts.aibom.key}`
        : undefined,
  },
  { header: 'transparency', value: (r) => r.artifacts?.aibom?.transparency?.status },
];

const options = { ...runOption, ...outputOption(FORMATS, 'json'), ...apiOptions };

export const getCommand = {
  path: ['get'],
  summary: 'print a run with its `artifacts` (the AIBOM record, its signature and C2PA manifest)',
  usage: '--run <UUID|NAMESPACE/NAME> [-o json|yaml|table]',
  options,
  details:
    'The JSON is GET /v1/runs/{id} as the API answers it: enough to verify the AIBOM offline.\n' +
    'examples:\n  service-ctl get --run demo/sample-run -o table\n  service-ctl get --run "$RUN_UID" | jq .artifacts.aibom.digest',
  async run(args) {
    const { values } = parseCommand(this, args);
    const ref = parseRunRef(values.run);
    const format = parseOutput(values.output, FORMATS, 'json');
    const run = (await clientFrom(values).resolveRun(ref)) as RunDetail;
    process.stdout.write(render(run, format, COLUMNS));
    // The record above carries the AIBOM's digest, signature, key id, cert_chain_ref and manifest
    // digest; the bytes and the certificates are one command away (stderr: stdout stays data).
    if (run.artifacts?.aibom !== undefined) {
      process.stderr.write(
        `to verify the AIBOM offline: service-ctl audit export --run ${run.id} --output evidence.tar && ` +
          `service-ctl keys fetch --out trust && service-ctl verify evidence.tar --trust-anchor trust/ca.pem\n`,
      );
    }
    return 0;
  },
} satisfies Command & { options: typeof options };
