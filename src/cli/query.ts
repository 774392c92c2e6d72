import { setTimeout as sleep } from 'node:timers/promises';
import { StreamDigest } from '../attest/index.ts';
import type { ApiClient } from './client.ts';
import { CliError, parseCommand, type Command, type OptionSpecs } from './command.ts';
import { filterOf, filterOptions } from './filter.ts';
import { apiOptions, clientFrom } from './options.ts';
import { outputOption, parseOutput, render, type Column, type OutputFormat } from './output.ts';

const FORMATS: OutputFormat[] = ['table', 'json', 'yaml', 'ndjson'];

type Envelope = Record<string, unknown> & {
  id: string;
  namespace?: string;
  kind?: string;
  subjects?: string[];
  predicate_type?: string;
  created_at?: string;
  transparency?: { status?: string } | null;
};

/** The vault's own predicate URIs shortened to `step/v1`; others without their scheme. */
export function shortPredicate(uri: string | undefined): string | undefined {
  return uri?.replace(/^https?:\/\//, '').replace(/^vault\.service\.dev\/attestations\//, '');
}

const COLUMNS: Column<Envelope>[] = [
  { header: 'id', value: (e) => e.id },
  { header: 'namespace', value: (e) => e.namespace },
  { header: 'kind', value: (e) => e.kind },
  { header: 'subject', value: (e) => e.subjects?.[0] },
  { header: 'predicate', value: (e) => shortPredicate(e.predicate_type) },
  { header: 'created', value: (e) => e.created_at },
  { header: 'transparency', value: (e) => e.transparency?.status },
];

const options = {
  ...filterOptions,
  limit: { type: 'string', value: 'N', description: 'page size, 1–1000 (default 100)' },
  cursor: { type: 'string', value: 'CURSOR', description: 'the page after a previous one (its next_cursor)' },
  all: {
    type: 'boolean',
    description: 'every matching record, streamed as NDJSON (what service-ctl verify reads)',
  },
  watch: { type: 'boolean', description: 'like --all, then keep printing new records as they are stored' },
  interval: { type: 'string', value: 'SECONDS', default: '2', description: 'how often --watch asks' },
  ...outputOption(FORMATS, 'table, ndjson with --all/--watch'),
  ...apiOptions,
} as const satisfies OptionSpecs;

type Values = ReturnType<typeof parseCommand<typeof options>>['values'];

/** The API's query body (docs/api.md) from the flags; a bad flag is a usage error. */
async function queryOf(values: Values, client: () => ApiClient): Promise<Record<string, unknown>> {
  const filter = await filterOf(values, client);
  if (values.limit !== undefined) {
    const n = Number(values.limit);
    if (!Number.isInteger(n) || n < 1 || n > 1000) throw new CliError('--limit is 1–1000', 2);
    filter.limit = n;
  }
  if (values.cursor !== undefined) filter.cursor = values.cursor;
  return filter;
}

/**
 * Prints every record matching `filter` (NDJSON), then asks again every `intervalMs` for records
 * stored since the last one seen. Records are stored in order (ids, sequence and created_at grow
 * together: docs/vault.md), so asking `from` the last created_at misses none; records of that
 * same millisecond already printed are skipped by id.
 */
async function watch(client: ApiClient, filter: Record<string, unknown>, intervalMs: number): Promise<never> {
  let from = filter.from as string | undefined;
  let atFrom = new Set<string>();
  for (;;) {
    for await (const record of client.queryAll({ ...filter, ...(from !== undefined ? { from } : {}) })) {
      const e = record as Envelope;
      if (atFrom.has(e.id)) continue;
      process.stdout.write(`${JSON.stringify(e)}\n`);
      if (e.created_at !== undefined && e.created_at !== from) {
        from = e.created_at;
        atFrom = new Set();
      }
      atFrom.add(e.id);
    }
    await sleep(intervalMs);
  }
}

export const queryCommand = {
  path: ['query'],
  summary: 'find attestations by run, step, subject, artifact, policy pack, capability token, kind or time',
  usage:
    '[--run RUN] [--kind KIND] [...filters] [--limit N] [--cursor C] [-o table|json|yaml] | --all | --watch',
  options,
  details:
    'Without --all one page is printed (json and yaml show next_cursor; the table names it on stderr).\n' +
    'Only namespaces the caller may list are searched; how many others were asked for is said on stderr.\n' +
    'examples:\n' +
    '  service-ctl query --run demo/sample-run\n' +
    '  service-ctl query --policy-pack baseline@1.2.0 --kind step -o json\n' +
    '  service-ctl query --run demo/sample-run --all > records.ndjson && service-ctl verify records.ndjson --key signer.pem',
  async run(args) {
    const { values } = parseCommand(this, args);
    let client: ApiClient | undefined;
    const api = (): ApiClient => (client ??= clientFrom(values));
    const streaming = values.all === true || values.watch === true;
    const format = parseOutput(values.output, FORMATS, streaming ? 'ndjson' : 'table');
    if (streaming && format !== 'ndjson') throw new CliError('--all and --watch print NDJSON (-o ndjson)', 2);
    if (streaming && (values.cursor !== undefined || values.limit !== undefined))
      throw new CliError('--all and --watch read everything: no --cursor or --limit', 2);
    if (values.watch === true && values.to !== undefined)
      throw new CliError('--watch has no end: no --to', 2);
    const interval = Number(values.interval);
    if (!Number.isFinite(interval) || interval <= 0) throw new CliError('--interval takes seconds', 2);
    const filter = await queryOf(values, api);
    if (values.watch === true) return watch(api(), filter, interval * 1000);
    if (values.all === true) {
      // The stream as the API sends it: record lines, then the trailer (count and digest of the
      // lines) once the API's own trailer checked out, so `service-ctl verify` tells a complete
      // file from a cut one.
      const digest = new StreamDigest();
      for await (const record of api().queryAll(filter)) {
        const line = `${JSON.stringify(record)}\n`;
        process.stdout.write(line);
        digest.add(line, 1);
      }
      process.stdout.write(digest.trailer());
      return 0;
    }
    const page = await api().queryPage(filter);
    if (format === 'table') {
      process.stdout.write(page.items.length > 0 ? render(page.items as Envelope[], 'table', COLUMNS) : '');
      if (page.items.length === 0) console.error('no attestations found');
      if (page.next_cursor !== null) console.error(`more: --cursor ${page.next_cursor}`);
    } else {
      process.stdout.write(format === 'ndjson' ? render(page.items, 'ndjson') : render(page, format));
    }
    if (page.excluded_namespace_count > 0)
      console.error(`not searched (no list permission): ${page.excluded_namespace_count} namespace(s)`);
    return 0;
  },
} satisfies Command & { options: typeof options };
