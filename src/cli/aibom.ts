import { X509Certificate } from 'node:crypto';
import { mkdir, readFile, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { parseArgs } from 'node:util';
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
import { loadConfig } from '../config/index.ts';
import { computeAibom } from '../recorder/index.ts';
import { isTerminal } from '../api/run.ts';
import { parsePolicyPackRef, PolicyError } from '../policy/index.ts';
import { connectVault } from '../vault/index.ts';
import { CliError, type Command } from './command.ts';
import { apiOptions, clientFrom } from './options.ts';

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;

async function output(text: string, file: string | undefined): Promise<void> {
  if (file === undefined) process.stdout.write(text);
  else await writeFile(file, text);
}

export const aibomGenerateCommand: Command = {
  path: ['aibom', 'generate'],
  summary: "recompute a run's AIBOM from the database (same payload the runtime stored)",
  async run(args) {
    const { values } = parseArgs({
      args: [...args],
      options: {
        run: { type: 'string' },
        output: { type: 'string' },
        'policy-pack': { type: 'string' },
        format: { type: 'string', default: 'aibom' },
      },
    });
    if (values.run === undefined) throw new CliError('--run <RUN_ID> is required', 2);
    if (!UUID.test(values.run)) throw new CliError(`--run: ${values.run} is not a run UUID`, 2);
    if (values.format !== 'aibom' && values.format !== 'cyclonedx') {
      throw new CliError('--format is aibom (the spec payload) or cyclonedx (strict CycloneDX 1.5)', 2);
    }
    let override;
    try {
      override = values['policy-pack'] !== undefined ? parsePolicyPackRef(values['policy-pack']) : undefined;
    } catch (err) {
      throw new CliError(`--policy-pack: ${(err as Error).message}`, 2);
    }
    const config = loadConfig('cli');
    if (config.DATABASE_URL === undefined)
      throw new CliError('DATABASE_URL is required to read the vault', 2);
    const vault = await connectVault(config.DATABASE_URL, { max: 2, applicationName: 'service-ctl' });
    try {
      const run = await vault.runs.get(values.run.toLowerCase());
      if (!run) throw new CliError(`run ${values.run} not found`);
      const phase = run.phase;
      if (!isTerminal(phase)) {
        throw new CliError(
          `run ${values.run} is ${run.phase ?? 'not started'}: an AIBOM exists only for succeeded or failed runs`,
        );
      }
      const aibomRun: AibomRun = {
        id: run.id,
        namespace: run.namespace,
        name: run.name,
        spec: run.spec,
        phase,
      };
      let bom: Aibom;
      try {
        ({ bom } = await computeAibom(vault.attestations, aibomRun, override));
      } catch (err) {
        if (err instanceof AibomError || err instanceof PolicyError) throw new CliError(err.message);
        throw err;
      }
      if (values.format === 'cyclonedx') {
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
};

export const aibomFetchCommand: Command = {
  path: ['aibom', 'fetch'],
  summary: "download a run's AIBOM, its C2PA manifest and metadata record into a directory",
  async run(args) {
    const { values } = parseArgs({
      args: [...args],
      options: { run: { type: 'string' }, out: { type: 'string' }, ...apiOptions },
    });
    if (values.run === undefined || !UUID.test(values.run))
      throw new CliError('--run <RUN_ID> is required', 2);
    const dir = values.out ?? `aibom-${values.run}`;
    const client = clientFrom(values);
    const run = await client.getRun(values.run);
    const meta = (run.artifacts as Record<string, unknown> | undefined)?.aibom;
    if (!meta) throw new CliError(`run ${values.run} has no AIBOM yet`);
    const bytes = Buffer.from(
      await (await client.request('GET', `/v1/runs/${values.run}/artifacts/aibom`)).arrayBuffer(),
    );
    const manifest = Buffer.from(
      await (
        await client.request(
          'GET',
          `/v1/runs/${values.run}/artifacts/aibom/manifest`,
          undefined,
          'application/c2pa',
        )
      ).arrayBuffer(),
    );
    await mkdir(dir, { recursive: true });
    await writeFile(join(dir, 'aibom.json'), bytes);
    await writeFile(join(dir, 'aibom.c2pa'), manifest);
    await writeFile(join(dir, 'aibom.meta.json'), `${JSON.stringify(meta, null, 2)}\n`);
    process.stdout.write(`wrote ${dir}/aibom.json, aibom.c2pa, aibom.meta.json\n`);
    return 0;
  },
};

/**
 * Offline check of a fetched AIBOM directory (aibom.json, aibom.c2pa, aibom.meta.json): see
 * verifyAibomArtifact. Returns the problems (empty = verified).
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
  const pems = (pem: string) =>
    (pem.match(/-----BEGIN CERTIFICATE-----[\s\S]+?-----END CERTIFICATE-----/g) ?? []).map(
      (p) => new X509Certificate(p),
    );
  const { lines, problems } = verifyAibomArtifact(
    { bytes, manifest, metadata },
    pems(trustAnchorPem),
    pems(tsaAnchorPem),
  );
  return { lines, problems: problems.map((p) => `${p.code}: ${p.message}`) };
}
