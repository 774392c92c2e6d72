import type { KeyObject, X509Certificate } from 'node:crypto';
import { createReadStream } from 'node:fs';
import { open, readFile, stat } from 'node:fs/promises';
import { createGunzip } from 'node:zlib';
import {
  readStream,
  StreamError,
  TRAILER_KEY,
  type Trust,
  type VerificationResult,
} from '../attest/index.ts';
import { loadConfig } from '../config/index.ts';
import { visibleText } from '../visible.ts';
import { verifyBundle } from '../verify/index.ts';
import { TlogBundleCheck, type TlogVerifyOptions } from '../verify/tlog.ts';
import { TlogError } from '../tlog/errors.ts';
import { parsePolicy, policyOf, type TlogPolicy } from '../tlog/policy.ts';
import { verifyAibomDir } from './aibom.ts';
import { CHAIN_TRUST_MISSING, verifyChainCli } from './chain.ts';
import { loadLogKeys } from './receipts.ts';
import type { TrustBundle } from '../attest/trust-bundle.ts';
import { recordVerifier, type RecordTrustSource, type RecordVerdict } from '../verify/record.ts';
import { loadTrustBundle } from './trust-bundle.ts';
import type { ApiClient } from './client.ts';
import { CliError, parseCommand, type Command, type OptionSpecs } from './command.ts';
import { apiOptions, clientFrom, UUID } from './options.ts';
import { pemCertificates, pemPublicKeys, readNamedFile } from './pem.ts';

/** A file named by a flag, as text; one that cannot be read is a usage error (exit 2). */
const readPem = async (path: string, what: string): Promise<string> =>
  (await readNamedFile(path, what)).toString('utf8');

/**
 * What a positional of `verify` names must exist and be a non-empty file, or be an attestation id
 * (fetched from the API): checked before any option, so the error is about the input, not about
 * the flags that would verify it. Usage errors (exit 2), one line naming the path.
 */
async function checkInput(path: string): Promise<void> {
  let info: Awaited<ReturnType<typeof stat>>;
  try {
    info = await stat(path);
  } catch (err) {
    if (UUID.test(path)) return;
    throw new CliError(`cannot read ${path}: ${(err as NodeJS.ErrnoException).code ?? String(err)}`, 2);
  }
  const what = `${path}: not an export bundle, envelope or AIBOM`;
  if (info.isDirectory())
    throw new CliError(`${what} (a directory; a fetched AIBOM is verified with --aibom DIR)`, 2);
  if (!info.isFile()) throw new CliError(`${what} (not a regular file)`, 2);
  if (info.size === 0) throw new CliError(`${what} (empty)`, 2);
  try {
    await (await open(path, 'r')).close();
  } catch (err) {
    throw new CliError(`cannot read ${path}: ${(err as NodeJS.ErrnoException).code ?? String(err)}`, 2);
  }
}

/** Every PEM block of a file: public keys, or certificates (their public key is used). */
function keysFromPem(pem: string, path: string): KeyObject[] {
  const keys = pemPublicKeys(pem, path);
  if (keys.length === 0) throw new CliError(`${path}: no PEM public key or certificate`);
  return keys;
}

function certsFromPem(pem: string, path: string): X509Certificate[] {
  const certs = pemCertificates(pem, path);
  if (certs.length === 0) throw new CliError(`${path}: no PEM certificate`);
  return certs;
}

export async function trustFrom(values: {
  key?: string[] | undefined;
  'cert-chain'?: string | undefined;
  'trust-anchor'?: string | undefined;
}): Promise<Trust> {
  const chain = values['cert-chain'];
  const anchor = values['trust-anchor'];
  if (chain !== undefined || anchor !== undefined) {
    if (chain === undefined || anchor === undefined)
      throw new CliError('--cert-chain and --trust-anchor go together', 2);
    return {
      certificateChain: certsFromPem(await readPem(chain, 'certificate chain'), chain),
      trustAnchors: certsFromPem(await readPem(anchor, 'trust anchor'), anchor),
    };
  }
  if (!values.key?.length)
    throw new CliError('give --key <public key or certificate PEM>, or --cert-chain with --trust-anchor', 2);
  const keys: KeyObject[] = [];
  for (const k of values.key) keys.push(...keysFromPem(await readPem(k, 'key'), k));
  return { publicKeys: keys };
}

/** The trust bundle --trust-bundle names, loaded; undefined without the flag. */
const trustBundleFlag = (values: {
  'trust-bundle'?: string | undefined;
}): Promise<TrustBundle | undefined> =>
  values['trust-bundle'] !== undefined ? loadTrustBundle(values['trust-bundle']) : Promise.resolve(undefined);

/**
 * The CAs chains must lead to: --trust-anchor, else the trust bundle's, else SERVICE_TRUST_ANCHOR
 * (what is given on the command line wins over the environment). A file without a certificate is
 * refused before anything is checked; with none of the three, a usage error saying `missing`.
 */
async function trustAnchorsFrom(
  values: { 'trust-anchor'?: string | undefined },
  bundle: TrustBundle | undefined,
  missing: string,
): Promise<X509Certificate[]> {
  const path =
    values['trust-anchor'] ?? (bundle === undefined ? loadConfig('cli').SERVICE_TRUST_ANCHOR : undefined);
  if (path !== undefined) return certsFromPem(await readPem(path, 'trust anchor'), path);
  if (bundle !== undefined) return [...bundle.anchors];
  throw new CliError(missing, 2);
}

/**
 * Roots of the TSAs whose time-stamps are believed: --tsa-trust-anchor, else the trust bundle's
 * (--trust-bundle: the service's TSA, as GET /v1/keys names it), else TSA_TRUST_ANCHORS; none:
 * time-stamps are not checked and certificates are judged now. What is given on the command line
 * wins over the environment.
 */
async function tsaAnchorsFrom(
  values: { 'tsa-trust-anchor'?: string | undefined },
  bundle: TrustBundle | undefined,
): Promise<X509Certificate[]> {
  const flag = values['tsa-trust-anchor'];
  if (flag === undefined && bundle !== undefined && bundle.tsaAnchors.length > 0)
    return [...bundle.tsaAnchors];
  const path = flag ?? loadConfig('cli').TSA_TRUST_ANCHORS;
  if (path !== undefined) return certsFromPem(await readPem(path, 'TSA trust anchor'), path);
  return [];
}

/** What `verify` says of the time a record's certificates were judged at. */
function timeNote(result: VerificationResult): string {
  const t = result.timestamp;
  if (t?.trusted === true) {
    return `  certificates checked at ${t.time.toISOString()}, the time of its RFC 3161 time-stamp by ${t.tsa}`;
  }
  if (t !== undefined) return `  time-stamp not checked (${t.reason ?? 'untrusted'})`;
  return '';
}

/** Names under which a file is always read as an NDJSON stream (its trailer required). */
const STREAM_FILE = /\.(ndjson|jsonl)$/i;

/**
 * Records in a file: one JSON envelope or a JSON array of them, or an NDJSON stream as the query
 * sends it, which must end with its trailer line (count and digest, docs/api.md): a stream cut
 * anywhere, or with lines added, removed or changed, is refused. A `.ndjson`/`.jsonl` file is always
 * read as a stream; any other file is a stream unless it holds one JSON document.
 */
export function recordsFromText(text: string, path: string): unknown[] {
  const stream = (): unknown[] => {
    try {
      return readStream(text);
    } catch (err) {
      if (err instanceof StreamError) {
        throw new CliError(
          err.code === 'STREAM_MALFORMED'
            ? `${path}: not JSON or NDJSON (${err.message})`
            : `${path}: incomplete or altered stream: ${err.message}`,
        );
      }
      throw err;
    }
  };
  if (STREAM_FILE.test(path)) return stream();
  let parsed: unknown;
  try {
    parsed = JSON.parse(text.trim());
  } catch {
    return stream();
  }
  // A lone trailer is the stream of an empty result.
  if (typeof parsed === 'object' && parsed !== null && TRAILER_KEY in parsed) return stream();
  return Array.isArray(parsed) ? parsed : [parsed];
}

/** An export bundle: a tar (ustar magic at 257) or its gzip (1f 8b). */
async function bundleKind(path: string): Promise<'tar' | 'gzip' | null> {
  const f = await open(path, 'r');
  try {
    const head = Buffer.alloc(263);
    const { bytesRead } = await f.read(head, 0, 263, 0);
    if (bytesRead >= 2 && head[0] === 0x1f && head[1] === 0x8b) return 'gzip';
    if (bytesRead >= 262 && head.toString('ascii', 257, 262) === 'ustar') return 'tar';
    return null;
  } finally {
    await f.close();
  }
}

/**
 * `service-ctl verify bundle.tar --trust-anchor ca.pem`: every entry of an export bundle, offline,
 * one line per failure naming the entry. Trust comes only from the files given.
 */
async function verifyBundleFile(
  path: string,
  kind: 'tar' | 'gzip',
  values: {
    'trust-anchor'?: string | undefined;
    'log-keys'?: string | undefined;
    'tsa-trust-anchor'?: string | undefined;
    key?: string[] | undefined;
    json?: boolean | undefined;
  } & WitnessFlags,
  bundle: TrustBundle | undefined,
): Promise<boolean> {
  const anchors = await trustAnchorsFrom(
    values,
    bundle,
    'verifying a bundle needs --trust-anchor <ca.pem> or --trust-bundle <dir|trust-bundle.json> (service-ctl keys fetch saves both)',
  );
  const logKeys = values['log-keys'] !== undefined ? await loadLogKeys(values['log-keys']) : [];
  const publicKeys: KeyObject[] = [];
  for (const k of values.key ?? []) publicKeys.push(...keysFromPem(await readPem(k, 'key'), k));
  const file = createReadStream(path);
  const source = kind === 'gzip' ? file.pipe(createGunzip()) : file;
  const tsaTrustAnchors = await tsaAnchorsFrom(values, bundle);
  const tlog = await witnessPolicyFrom(values);
  const result = await verifyBundle(source, {
    trustAnchors: anchors,
    logKeys,
    publicKeys,
    tsaTrustAnchors,
    tlog,
    ...(bundle !== undefined ? { signerHistory: bundle.signers, localLogKeys: bundle.logKeys } : {}),
  });
  for (const p of result.problems) {
    process.stdout.write(
      values.json === true
        ? `${JSON.stringify({ entry: p.entry, code: p.code, message: p.message })}\n`
        : `FAIL  ${p.entry}  ${p.code}: ${visibleText(p.message)}\n`,
    );
  }
  for (const line of result.chains) {
    process.stdout.write(
      values.json === true ? `${JSON.stringify({ chain: line })}\n` : `CHAIN ${visibleText(line)}\n`,
    );
  }
  const stamped =
    result.timestamped > 0
      ? ` (${result.timestamped} with certificates checked at the time of their RFC 3161 time-stamp)`
      : '';
  const witnessed =
    result.tlog.proofs > 0
      ? `; ${result.tlog.proofs} records with inclusion proofs to ${result.tlog.checkpoints.join('; ')}`
      : '';
  const summary = `${result.attestations} attestations${stamped}, ${result.receipts} receipts, ${result.runs} AIBOMs, ${result.entries} entries${witnessed}`;
  // CHAIN lines come only from a bundle that verified (result.chains is empty otherwise).
  const withheld =
    result.withheldChains > 0
      ? `; ${result.withheldChains} capability chain(s) not listed: they vouch for nothing in a bundle that fails`
      : '';
  process.stdout.write(
    result.ok
      ? `OK    ${path}: bundle verified (${summary})\n`
      : `${path}: bundle NOT verified: ${result.problems.length} problem(s) (${summary})${withheld}\n`,
  );
  return result.ok;
}

/** The witness flags of `verify` (docs/transparency.md "Witnessed logs"). */
interface WitnessFlags {
  'witness-policy'?: string | undefined;
  witness?: string[] | undefined;
  'witness-quorum'?: string | undefined;
  'tlog-key'?: string[] | undefined;
}

/**
 * The witness policy of --witness-policy (a c2sp.org/tlog-policy file) or of --witness (k of them
 * with --witness-quorum, all by default), and the vault log's note keys of --tlog-key. Usage
 * errors (exit 2) for a policy or key that cannot be read.
 */
async function witnessPolicyFrom(values: WitnessFlags): Promise<TlogVerifyOptions> {
  const file = values['witness-policy'];
  const witnesses = values.witness ?? [];
  const quorum = values['witness-quorum'];
  if (file !== undefined && witnesses.length > 0) {
    throw new CliError(
      '--witness-policy and --witness exclude each other (put the witnesses in the policy)',
      2,
    );
  }
  if (quorum !== undefined && witnesses.length === 0)
    throw new CliError('--witness-quorum needs --witness', 2);
  if (quorum !== undefined && !/^[1-9][0-9]*$/.test(quorum)) {
    throw new CliError(`--witness-quorum: a positive integer, got "${quorum}"`, 2);
  }
  const logVkeys = values['tlog-key'] ?? [];
  let policy: TlogPolicy | undefined;
  try {
    if (file !== undefined) policy = parsePolicy(await readPem(file, 'witness policy'));
    else if (witnesses.length > 0) {
      policy = policyOf({
        witnessVkeys: witnesses,
        ...(quorum !== undefined ? { quorum: Number(quorum) } : {}),
      });
    }
    const options = { ...(policy !== undefined ? { policy } : {}), logVkeys };
    new TlogBundleCheck(options); // the keys parse
    return options;
  } catch (err) {
    if (err instanceof TlogError) throw new CliError(`${file ?? '--witness/--tlog-key'}: ${err.message}`, 2);
    throw err;
  }
}

/** Every record the positionals name: records of files (JSON, array, NDJSON), or fetched by id. */
async function recordsOf(
  positionals: readonly string[],
  values: Parameters<typeof clientFrom>[0],
): Promise<{ source: string; record: unknown }[]> {
  let client: ApiClient | undefined;
  const records: { source: string; record: unknown }[] = [];
  for (const p of positionals) {
    if (await isFile(p)) {
      for (const record of recordsFromText(await readFile(p, 'utf8'), p)) records.push({ source: p, record });
    } else if (UUID.test(p)) {
      client ??= clientFrom(values);
      records.push({ source: p, record: await client.getAttestation(p) });
    } else {
      throw new CliError(`${p}: neither a file nor an attestation id`, 2);
    }
  }
  return records;
}

/** What `verify` prints of one record's verdict (a JSON line with --json). */
function printVerdict(label: string, verdict: RecordVerdict, json: boolean, withReceipt: boolean): void {
  const { result } = verdict;
  if (json) {
    process.stdout.write(
      `${JSON.stringify({
        id: label,
        ok: verdict.ok,
        predicate_type: result.predicateType,
        key_id: result.keyId,
        checked_at: result.checkedAt?.toISOString(),
        timestamp: result.timestamp,
        // Like the CHAIN lines of text output: only for a record that verified.
        chains: verdict.chains,
        problems: result.problems,
      })}\n`,
    );
  } else if (verdict.ok) {
    process.stdout.write(
      `OK    ${label}  ${result.predicateType ?? ''}  key ${result.keyId ?? ''}${withReceipt ? '  receipt ok' : ''}${timeNote(result)}\n`,
    );
    for (const line of verdict.chains) process.stdout.write(`CHAIN ${label}  ${visibleText(line)}\n`);
  } else {
    for (const p of result.problems)
      process.stdout.write(`FAIL  ${label}  ${p.code}: ${visibleText(p.message)}\n`);
  }
}

/**
 * `service-ctl verify <record|records.ndjson|id>...`: each record with src/verify/record.ts (the
 * web UI's verdict too), plus its receipt with --log-keys and its capability chains.
 */
async function verifyRecordsCli(
  positionals: readonly string[],
  values: Parameters<typeof trustFrom>[0] &
    Parameters<typeof tsaAnchorsFrom>[0] &
    Parameters<typeof clientFrom>[0] & { 'log-keys'?: string | undefined; json?: boolean | undefined },
  bundle: TrustBundle | undefined,
): Promise<number> {
  const tsaTrustAnchors = await tsaAnchorsFrom(values, bundle);
  const tsa = tsaTrustAnchors.length > 0 ? { tsaTrustAnchors } : {};
  // With the trust bundle, each record gets the chain its cert_chain_ref names (rotations
  // included); otherwise the one key or chain given.
  const source: RecordTrustSource =
    bundle !== undefined ? { bundle, tsaTrustAnchors } : { trust: { ...(await trustFrom(values)), ...tsa } };
  const logKeys = values['log-keys'] !== undefined ? await loadLogKeys(values['log-keys']) : undefined;
  const verify = recordVerifier(source, {
    // With --log-keys, the SCITT receipt is part of the verdict.
    ...(logKeys !== undefined ? { logKeys } : {}),
    ...(bundle !== undefined ? { localLogKeys: bundle.logKeys } : {}),
  });
  const records = await recordsOf(positionals, values);
  let failed = 0;
  for (const { source: from, record } of records) {
    const verdict = await verify(record);
    const id = (record as { id?: unknown }).id;
    if (!verdict.ok) failed++;
    printVerdict(typeof id === 'string' ? id : from, verdict, values.json === true, logKeys !== undefined);
  }
  if (values.json !== true) process.stdout.write(`${records.length - failed} verified, ${failed} failed\n`);
  return failed === 0 ? 0 : 1;
}

async function isFile(path: string): Promise<boolean> {
  try {
    return (await stat(path)).isFile();
  } catch {
    return false;
  }
}

const verifyOptions = {
  key: {
    type: 'string',
    multiple: true,
    value: 'PEM',
    description: 'public key (PEM) the envelopes are signed with',
  },
  'cert-chain': {
    type: 'string',
    value: 'PEM',
    description: 'signer certificate chain (PEM), checked against --trust-anchor',
  },
  'trust-anchor': {
    type: 'string',
    value: 'PEM',
    description:
      'CA certificate(s) the chains and C2PA manifests must lead to (default: SERVICE_TRUST_ANCHOR)',
  },
  'trust-bundle': {
    type: 'string',
    value: 'DIR|FILE',
    description:
      'the trust bundle of `service-ctl keys fetch`: every signer chain, current and rotated, and TSA roots',
  },
  'tsa-trust-anchor': {
    type: 'string',
    value: 'PEM',
    description: 'TSA root(s) the RFC 3161 time-stamps must chain to (default: TSA_TRUST_ANCHORS)',
  },
  'witness-policy': {
    type: 'string',
    value: 'FILE',
    description:
      'bundles: a c2sp.org/tlog-policy file (log, witness, group, quorum lines); every record needs a tlog-proof to a checkpoint its quorum cosigned',
  },
  witness: {
    type: 'string',
    multiple: true,
    value: 'VKEY',
    description:
      'bundles: a witness cosignature/v1 verifier key whose cosignature each record needs (see --witness-quorum)',
  },
  'witness-quorum': {
    type: 'string',
    value: 'N',
    description: 'bundles: how many of the --witness keys must have cosigned (default: all)',
  },
  'tlog-key': {
    type: 'string',
    multiple: true,
    value: 'VKEY',
    description:
      "bundles: the vault log's note verifier key (GET /v1/keys note_keys); default the policy's log lines, else the bundle's own",
  },
  'log-keys': {
    type: 'string',
    value: 'FILE',
    description: 'COSE key set of the SCITT log (checks receipts)',
  },
  json: { type: 'boolean', default: false, description: 'one JSON result per record instead of text' },
  aibom: {
    type: 'string',
    value: 'DIR',
    description: 'verify a fetched AIBOM directory (service-ctl aibom fetch)',
  },
  chain: {
    type: 'boolean',
    default: false,
    description: "verify the whole vault against its signed checkpoints (the API's /v1/chain)",
  },
  checkpoint: {
    type: 'string',
    value: 'FILE',
    description: '--chain: an earlier checkpoint the current one must be consistent with',
  },
  'save-checkpoint': {
    type: 'string',
    value: 'FILE',
    description: '--chain: save the verified checkpoint for next time',
  },
  records: {
    type: 'string',
    value: 'FILE',
    description: '--chain: records (NDJSON) that must still be in place',
  },
  fresh: {
    type: 'boolean',
    default: false,
    description:
      '--chain: ask the service for a new checkpoint of every record; fails unless it answers with one (no fallback to the stored one)',
  },
  'max-age': {
    type: 'string',
    value: 'DURATION',
    description:
      '--chain: refuse a checkpoint issued longer ago than DURATION (90s, 15m, 2h, 7d, 1h30m); its age is printed either way',
  },
  ...apiOptions,
} as const satisfies OptionSpecs;

export const verifyCommand = {
  path: ['verify'],
  summary:
    'verify attestation envelopes offline (file, NDJSON or attestation id): digest, signature, predicate, RFC 3161 time-stamp; --trust-bundle (every signer, rotations); bundles with a witness policy (--witness-policy, --witness); --aibom DIR; --chain (the whole vault against its signed checkpoints)',
  usage:
    '<envelope.json|records.ndjson|attestation-id|bundle.tar>... (--key PEM... | --cert-chain PEM --trust-anchor PEM | --trust-bundle DIR) [--log-keys FILE] [--witness-policy FILE | --witness VKEY... [--witness-quorum N]] [--tlog-key VKEY] [--json] | --aibom DIR [--trust-anchor PEM | --trust-bundle DIR] | --chain (--key PEM | --trust-anchor PEM | --trust-bundle DIR) [--fresh] [--max-age DURATION]',
  options: verifyOptions,
  details:
    'Exit 0 when everything verified, 1 when something did not (one FAIL line each), 2 for usage errors\n' +
    '(a file or directory given that cannot be read, or is no input of verify).\n' +
    'examples:\n' +
    '  service-ctl verify bundle.tar --trust-bundle trust\n' +
    '  service-ctl verify bundle.tar --trust-bundle trust --witness-policy policy.txt\n' +
    '  service-ctl verify bundle.tar --trust-anchor ca.pem --witness "$W1" --witness "$W2" --witness-quorum 1 --tlog-key "$VAULT_VKEY"\n' +
    '  service-ctl verify records.ndjson --key signer.pub --log-keys trust/log-keys.cbor\n' +
    '  service-ctl verify --aibom aibom-dir --trust-anchor trust/ca.pem\n' +
    '  service-ctl verify --chain --key signer.pem --checkpoint cp.cose --fresh --max-age 15m',
  async run(args) {
    const { values, positionals } = parseCommand(this, args, { positionals: true });
    if (!values.chain && (values.fresh || values['max-age'] !== undefined))
      throw new CliError('--fresh and --max-age apply to --chain (the checkpoint of the whole vault)', 2);
    if (values.chain) {
      if (positionals.length > 0) throw new CliError('--chain takes no records to verify (see --records)', 2);
      // Without --key or --trust-anchor: the trust bundle's CAs, else SERVICE_TRUST_ANCHOR's, as
      // --aibom takes them (trustAnchorsFrom); --key and --trust-anchor are read by chain.ts.
      const bundle = values.key === undefined ? await trustBundleFlag(values) : undefined;
      const anchors =
        values.key === undefined && values['trust-anchor'] === undefined
          ? await trustAnchorsFrom(values, bundle, CHAIN_TRUST_MISSING)
          : undefined;
      return verifyChainCli({ ...values, anchors }, clientFrom(values), recordsFromText);
    }
    if (values.aibom !== undefined) {
      const bundle = await trustBundleFlag(values);
      const anchors = await trustAnchorsFrom(
        values,
        bundle,
        '--aibom needs --trust-anchor <ca.crt> or --trust-bundle <dir> (or SERVICE_TRUST_ANCHOR)',
      );
      const pemOf = (certs: readonly X509Certificate[]): string => certs.map((c) => c.toString()).join('');
      const { lines, problems } = await verifyAibomDir(
        values.aibom,
        pemOf(anchors),
        pemOf(await tsaAnchorsFrom(values, bundle)),
      );
      for (const l of lines) process.stdout.write(`OK    ${l}\n`);
      for (const p of problems) process.stdout.write(`FAIL  ${p}\n`);
      process.stdout.write(
        problems.length === 0 ? 'AIBOM verified\n' : `AIBOM NOT verified (${problems.length} problem(s))\n`,
      );
      return problems.length === 0 ? 0 : 1;
    }
    if (positionals.length === 0) {
      throw new CliError(
        'usage: service-ctl verify <envelope.json|records.ndjson|attestation-id>... --key PEM | --cert-chain PEM --trust-anchor PEM | --trust-bundle DIR|FILE',
        2,
      );
    }
    for (const p of positionals) await checkInput(p);
    const bundle = await trustBundleFlag(values);
    const bundles: [string, 'tar' | 'gzip'][] = [];
    for (const p of positionals) {
      const kind = (await isFile(p)) ? await bundleKind(p) : null;
      if (kind !== null) bundles.push([p, kind]);
    }
    if (bundles.length > 0) {
      if (bundles.length !== positionals.length) {
        throw new CliError('verify export bundles on their own (not mixed with envelope files or ids)', 2);
      }
      let ok = true;
      for (const [p, kind] of bundles) ok = (await verifyBundleFile(p, kind, values, bundle)) && ok;
      return ok ? 0 : 1;
    }
    return verifyRecordsCli(positionals, values, bundle);
  },
} satisfies Command & { options: typeof verifyOptions };
