import { readFile, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import {
  AibomError,
  prettyAibom,
  prettyCycloneDx,
  toCycloneDx,
  validateCycloneDx,
  type Aibom,
  type AibomRun,
} from '../aibom/index.ts';
import { verifyAibomArtifact } from '../aibom/verify.ts';
import {
  isViewFormat,
  prettyView,
  spdxProfileProblems,
  VIEW_FORMAT_NAMES,
  VIEW_FORMATS,
  validateCycloneDx17,
  type CycloneDx17Bom,
  type ViewPart,
} from '../aibom/views/index.ts';

import { loadConfig } from '../config/index.ts';
import { computeAibom, computeAibomViews } from '../recorder/index.ts';
import { isTerminal } from '../crd/run.ts';
import { parsePolicyPackRef, PolicyError } from '../policy/index.ts';
import { connectVault } from '../vault/index.ts';
import { CliError, parseCommand, type Command, type OptionSpecs } from './command.ts';
import { makeDirectory } from './dirs.ts';
import { apiOptions, clientFrom, parseRunRef, runOption, runRefText } from './options.ts';
import { pemCertificates } from './pem.ts';

async function output(text: string, file: string | undefined): Promise<void> {
  if (file === undefined) process.stdout.write(text);
  else await writeFile(file, text);
}

const generateOptions = {
  ...runOption,
  output: {
    type: 'string',
    value: 'FILE',
    description: 'write the BOM to FILE (pretty-printed JSON); stdout when omitted',
  },
  'policy-pack': {
    type: 'string',
    value: 'PACK[@VERSION]',
    description:
      "override the run's policy pack (metadata.policy_pack), which steps without a pack of their own follow too; default, as recorded: the pack found in the step specs (the first step's: its own, else the run-level spec.policyPack every step without one carries; with neither, the first step naming one), else baseline",
  },
  format: {
    type: 'string',
    value: 'FORMAT',
    default: 'aibom',
    description:
      'aibom (the spec payload, as stored), cyclonedx (strict CycloneDX 1.5, validated), or a recorded standard view: cyclonedx-1.7 (with CycloneDX Attestations), spdx-3.0.1',
  },
} as const satisfies OptionSpecs;

export const aibomGenerateCommand = {
  path: ['aibom', 'generate'],
  summary: "recompute a run's AIBOM from the database (same payload the runtime stored)",
  usage:
    '--run <UUID|NAMESPACE/NAME> [--output FILE] [--policy-pack PACK[@VERSION]] [--format aibom|cyclonedx|cyclonedx-1.7|spdx-3.0.1]',
  options: generateOptions,
  details:
    'Reads the vault directly (DATABASE_URL), not the API. NAMESPACE/NAME is the most recent run of\n' +
    'that name the vault holds; without --policy-pack the output is byte-identical (after\n' +
    'canonicalisation) to the stored AIBOM. --format cyclonedx-1.7 and spdx-3.0.1 recompute the\n' +
    'standard views the vault recorded with the AIBOM (docs/aibom.md), from the run and its records:\n' +
    'byte-identical after canonicalisation to the recorded view (GET .../artifacts/aibom?format=...);\n' +
    'they are checked (CycloneDX 1.7 schema and declarations; SPDX AI and Dataset profiles) before\n' +
    'they are written, and take no --policy-pack (a view is of the stored AIBOM). --output writes\n' +
    'the pretty-printed JSON to FILE (replaced if it exists) and nothing to stdout. Policy packs:\n' +
    'docs/aibom.md, "Policy packs".',
  async run(args) {
    const { values } = parseCommand(this, args);
    const ref = parseRunRef(values.run);
    const format = values.format;
    if (format !== 'aibom' && format !== 'cyclonedx' && !isViewFormat(format)) {
      throw new CliError(
        `--format is aibom (the spec payload), cyclonedx (strict CycloneDX 1.5) or a view: ${VIEW_FORMAT_NAMES.join(', ')}`,
        2,
      );
    }
    if (isViewFormat(format) && values['policy-pack'] !== undefined) {
      throw new CliError(`--format ${format} is a view of the stored AIBOM: it takes no --policy-pack`, 2);
    }
    let override;
    try {
      override = values['policy-pack'] !== undefined ? parsePolicyPackRef(values['policy-pack']) : undefined;
    } catch (err) {
      throw new CliError((err as Error).message, 2);
    }
    const config = loadConfig('cli');
    if (config.DATABASE_URL === undefined)
      throw new CliError('DATABASE_URL is required to read the vault', 2);
    const vault = await connectVault(config.DATABASE_URL, {
      max: 2,
      applicationName: 'service-ctl',
      ...(config.DATABASE_CA_FILE !== undefined ? { tls: { caFile: config.DATABASE_CA_FILE } } : {}),
    });
    try {
      const run =
        'id' in ref ? await vault.runs.get(ref.id) : await vault.runs.latest(ref.namespace, ref.name);
      if (!run) throw new CliError(`run ${runRefText(ref)} not found`);
      const phase = run.phase;
      if (!isTerminal(phase)) {
        throw new CliError(
          `run ${runRefText(ref)} is ${run.phase ?? 'not started'}: an AIBOM exists only for succeeded or failed runs`,
        );
      }
      const aibomRun: AibomRun = {
        id: run.id,
        namespace: run.namespace,
        name: run.name,
        spec: run.spec,
        phase,
      };
      if (isViewFormat(format)) {
        let computed;
        try {
          computed = await computeAibomViews(vault.attestations, aibomRun);
        } catch (err) {
          if (err instanceof AibomError || err instanceof PolicyError) throw new CliError(err.message);
          throw err;
        }
        const view = computed.views.find((v) => v.format === format)!;
        // Every evidence entry must name one of the run's records, digest equal.
        const problems =
          format === 'cyclonedx-1.7'
            ? await validateCycloneDx17(view.document as CycloneDx17Bom, computed.recordDigests)
            : spdxProfileProblems(view.document);
        if (problems.length > 0) {
          throw new CliError(`${format} view failed validation: ${JSON.stringify(problems[0])}`);
        }
        await output(prettyView(view.document), values.output);
        return 0;
      }
      let bom: Aibom;
      try {
        ({ bom } = await computeAibom(vault.attestations, aibomRun, override));
      } catch (err) {
        if (err instanceof AibomError || err instanceof PolicyError) throw new CliError(err.message);
        throw err;
      }
      if (format === 'cyclonedx') {
        const doc = toCycloneDx(bom, { run: aibomRun });
        const problems = await validateCycloneDx(doc);
        if (problems.length > 0)
          throw new CliError(`CycloneDX view failed validation: ${JSON.stringify(problems[0])}`);
        await output(prettyCycloneDx(doc), values.output);
      } else {
        await output(prettyAibom(bom), values.output);
      }
      return 0;
    } finally {
      await vault.close();
    }
  },
} satisfies Command & { options: typeof generateOptions };

const fetchOptions = {
  ...runOption,
  out: { type: 'string', value: 'DIR', description: 'directory to write into (default: aibom-<run id>)' },
  ...apiOptions,
} as const satisfies OptionSpecs;

export const aibomFetchCommand = {
  path: ['aibom', 'fetch'],
  summary:
    "download a run's AIBOM, its C2PA manifest and metadata record, and its standard views with their records, into a directory",
  usage: '--run <UUID|NAMESPACE/NAME> [--out DIR]',
  options: fetchOptions,
  details:
    'Writes aibom.json, aibom.c2pa and aibom.meta.json, and for each standard view the metadata\n' +
    'lists (docs/aibom.md) its bytes (aibom.cdx-1.7.json, aibom.spdx-3.0.1.json) and its record\n' +
    '(<name>.record.json); check them offline with\n' +
    '  service-ctl verify --aibom DIR --trust-anchor ca.crt',
  async run(args) {
    const { values } = parseCommand(this, args);
    const ref = parseRunRef(values.run);
    const client = clientFrom(values);
    const run = await client.resolveRun(ref);
    const id = run.id;
    const dir = values.out ?? `aibom-${id}`;
    const meta = (run.artifacts as Record<string, unknown> | undefined)?.aibom;
    if (!meta) throw new CliError(`run ${runRefText(ref)} has no AIBOM yet`);
    const bytes = await client.bytes('GET', `/v1/runs/${id}/artifacts/aibom`);
    const manifest = await client.bytes('GET', `/v1/runs/${id}/artifacts/aibom/manifest`, 'application/c2pa');
    await makeDirectory(dir);
    await writeFile(join(dir, 'aibom.json'), bytes);
    await writeFile(join(dir, 'aibom.c2pa'), manifest);
    await writeFile(join(dir, 'aibom.meta.json'), `${JSON.stringify(meta, null, 2)}\n`);
    const written = ['aibom.json', 'aibom.c2pa', 'aibom.meta.json'];
    const views = ((meta as Record<string, unknown>).views ?? {}) as Record<
      string,
      { attestation_id?: string }
    >;
    for (const format of VIEW_FORMAT_NAMES) {
      const id = views[format]?.attestation_id;
      if (typeof id !== 'string') continue;
      const name = VIEW_FORMATS[format].artifactName;
      const view = await client.bytes('GET', `/v1/runs/${run.id}/artifacts/aibom?format=${format}`, '*/*');
      await writeFile(join(dir, name), view);
      await writeFile(
        join(dir, recordFileOf(name)),
        `${JSON.stringify(await client.getAttestation(id), null, 2)}\n`,
      );
      written.push(name, recordFileOf(name));
    }
    process.stdout.write(`wrote ${dir}/${written.join(', ')}\n`);
    return 0;
  },
} satisfies Command & { options: typeof fetchOptions };

/** The file a fetched view's record is saved in: `aibom.cdx-1.7.json` → `aibom.cdx-1.7.record.json`. */
const recordFileOf = (viewFile: string): string => viewFile.replace(/\.json$/, '.record.json');

/**
 * Offline check of a fetched AIBOM directory (aibom.json, aibom.c2pa, aibom.meta.json, and the
 * standard views with their records): see verifyAibomArtifact. Returns the problems (empty =
 * verified).
 */
export async function verifyAibomDir(
  dir: string,
  trustAnchorPem: string,
  tsaAnchorPem = '',
): Promise<{ lines: string[]; problems: string[] }> {
  const read = async (f: string) => {
    try {
      return await readFile(join(dir, f));
    } catch {
      throw new CliError(`${join(dir, f)}: cannot read`);
    }
  };
  const [bytes, manifest, metaText] = [
    await read('aibom.json'),
    await read('aibom.c2pa'),
    await read('aibom.meta.json'),
  ];
  let metadata: unknown;
  try {
    metadata = JSON.parse(metaText.toString('utf8'));
  } catch {
    throw new CliError(`${join(dir, 'aibom.meta.json')}: not JSON`);
  }
  // Every view file present; the ones the metadata lists but the directory lacks are VIEW_MISSING.
  const optional = async (f: string): Promise<Buffer | undefined> => {
    try {
      return await readFile(join(dir, f));
    } catch {
      return undefined;
    }
  };
  const views: ViewPart[] = [];
  for (const format of VIEW_FORMAT_NAMES) {
    const name = VIEW_FORMATS[format].artifactName;
    const viewBytes = await optional(name);
    const recordText = await optional(recordFileOf(name));
    let record: unknown;
    try {
      record = recordText !== undefined ? JSON.parse(recordText.toString('utf8')) : undefined;
    } catch {
      throw new CliError(`${join(dir, recordFileOf(name))}: not JSON`);
    }
    views.push({ format, bytes: viewBytes, record });
  }
  const { lines, problems } = verifyAibomArtifact(
    { bytes, manifest, metadata, views },
    pemCertificates(trustAnchorPem, 'trust anchor'),
    pemCertificates(tsaAnchorPem, 'TSA trust anchor'),
  );
  return { lines, problems: problems.map((p) => `${p.code}: ${p.message}`) };
}
