import { createHash, X509Certificate } from 'node:crypto';
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
import { verifyManifest } from '../c2pa/index.ts';
import { loadConfig } from '../config/index.ts';
import { computeAibom } from '../recorder/index.ts';
import { validateChain, verifyWith } from '../signing/index.ts';
import { TimestampError, verifyTimestamp } from '../timestamp/index.ts';
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

interface AibomMeta {
  digest?: string;
  attestation_ids?: string[];
  signature?: {
    algorithm?: string;
    key_id?: string;
    signature?: string;
    timestamp?: { time?: string; tsa?: string; signed_timestamp?: string };
  };
}

/**
 * The runtime signature's RFC 3161 time-stamp (metadata `signature.timestamp`): it must be over the
 * signature bytes, from a trusted TSA, and the signer's chain must have been valid at its time.
 * Returns the line to print, or pushes the problem.
 */
function checkSignatureTimestamp(
  signedTimestamp: string,
  signature: Buffer,
  chain: readonly X509Certificate[],
  anchors: readonly X509Certificate[],
  tsaAnchors: readonly X509Certificate[],
  problems: string[],
): string | undefined {
  try {
    const t = verifyTimestamp(Buffer.from(signedTimestamp, 'base64'), {
      data: signature,
      trustAnchors: tsaAnchors,
    });
    const valid = validateChain(chain, anchors, t.genTime);
    if (!valid.ok) {
      problems.push(
        `OUTSIDE_VALIDITY: the runtime signature was time-stamped at ${t.genTime.toISOString()}: ${valid.message}`,
      );
      return undefined;
    }
    return `timestamp  ${t.genTime.toISOString()} by ${t.tsa} (RFC 3161, over the runtime signature); certificates valid then`;
  } catch (err) {
    if (!(err instanceof TimestampError)) throw err;
    problems.push(`TIMESTAMP ${err.code}: runtime signature time-stamp: ${err.message}`);
    return undefined;
  }
}

/**
 * Offline check of a fetched AIBOM directory: digest, the runtime trust signer's signature, the C2PA
 * manifest (bound to the bytes, chained to the trust anchor) and that all three agree on the
 * attestation ids. Returns the problems (empty = verified).
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
  const meta = JSON.parse(metaText.toString('utf8')) as AibomMeta;
  const bom = JSON.parse(bytes.toString('utf8')) as Aibom;
  const problems: string[] = [];
  const lines: string[] = [];
  const digest = `sha256:${createHash('sha256').update(bytes).digest('hex')}`;
  if (digest !== meta.digest)
    problems.push(`DIGEST_MISMATCH: aibom.json is ${digest}, metadata says ${meta.digest}`);
  else lines.push(`digest     ${digest}`);
  const pems = (pem: string) =>
    (pem.match(/-----BEGIN CERTIFICATE-----[\s\S]+?-----END CERTIFICATE-----/g) ?? []).map(
      (p) => new X509Certificate(p),
    );
  const anchors = pems(trustAnchorPem);
  const tsaAnchors = pems(tsaAnchorPem);
  const c2pa = verifyManifest({
    store: manifest,
    asset: bytes,
    trustAnchors: anchors,
    tsaTrustAnchors: tsaAnchors,
  });
  if (!c2pa.ok) for (const p of c2pa.problems) problems.push(`C2PA ${p.code}: ${p.message}`);
  else {
    const at = c2pa.checkedAt?.toISOString() ?? '?';
    const ts = c2pa.timestamp;
    const when =
      ts?.trusted === true
        ? `certificates checked at ${at}, the time of its RFC 3161 time-stamp by ${ts.tsa ?? 'a trusted TSA'}`
        : ts !== undefined
          ? `certificates checked now, ${at}: its time-stamp is not trusted here (${ts.reason ?? ''})`
          : `certificates checked now, ${at}: the manifest has no time-stamp`;
    lines.push(`c2pa       ${c2pa.manifestLabel} signed by ${c2pa.signer} (trusted; ${when})`);
  }
  const sig = meta.signature;
  if (!sig?.signature || !c2pa.signerCertificate) {
    problems.push('SIGNATURE_MISSING: no runtime signature or no trusted signer certificate');
  } else if (sig.key_id !== c2pa.signerKeyId) {
    problems.push(`UNTRUSTED_KEY: AIBOM signed by ${sig.key_id}, manifest signer is ${c2pa.signerKeyId}`);
  } else if (
    !verifyWith(
      sig.algorithm as 'ECDSA_P256_SHA256',
      c2pa.signerCertificate.publicKey,
      bytes,
      Buffer.from(sig.signature, 'base64'),
    )
  ) {
    problems.push('SIGNATURE_INVALID: the runtime trust signature does not verify');
  } else {
    lines.push(`signature  ${sig.algorithm} ${sig.key_id}`);
    const signed = sig.timestamp?.signed_timestamp;
    if (signed !== undefined) {
      const chain = c2pa.chain ?? [c2pa.signerCertificate];
      const line = checkSignatureTimestamp(
        signed,
        Buffer.from(sig.signature, 'base64'),
        chain,
        anchors,
        tsaAnchors,
        problems,
      );
      if (line !== undefined) lines.push(line);
    }
  }
  const ids = JSON.stringify(bom.trust?.attestation_ids ?? []);
  if (
    ids !== JSON.stringify(meta.attestation_ids ?? []) ||
    (c2pa.ok && ids !== JSON.stringify(c2pa.attestationIds ?? []))
  ) {
    problems.push(
      'ATTESTATION_IDS_MISMATCH: the BOM, its metadata and its C2PA manifest list different attestations',
    );
  } else {
    lines.push(
      `attests    ${(bom.trust?.attestation_ids ?? []).length} attestation ids, identical in BOM, metadata and C2PA`,
    );
  }
  return { lines, problems };
}
