import { X509Certificate } from 'node:crypto';
import { writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { trustBundleOf, TrustBundleError } from '../attest/trust-bundle.ts';
import { TAR_GZIP_MEDIA_TYPE, TAR_MEDIA_TYPE } from '../export/layout.ts';
import { tsaTrustedRoot } from '../timestamp/index.ts';
import type { ApiClient } from './client.ts';
import { CliError, parseCommand, type Command, type OptionSpecs } from './command.ts';
import { makeDirectory } from './dirs.ts';
import { download } from './download.ts';
import { filterOf, filterOptions } from './filter.ts';
import { apiOptions, clientFrom, parseRunRef, runOption, UUID } from './options.ts';
import { pemCertificates } from './pem.ts';

/** What both downloads answer: an export bundle, plain or gzipped (anything else is not the API's). */
const BUNDLE_ACCEPT = `${TAR_MEDIA_TYPE}, ${TAR_GZIP_MEDIA_TYPE}`;

/** Both downloads (a selection, one artifact's evidence) may come gzipped. */
const gzipOption = {
  gzip: { type: 'boolean', default: false, description: 'gzip the bundle' },
} as const satisfies OptionSpecs;

const attestationExportOptions = {
  output: { type: 'string', short: 'o', value: 'FILE', description: 'where to write the bundle (required)' },
  id: { type: 'string', multiple: true, value: 'UUID', description: 'an attestation id to export' },
  ...filterOptions,
  ...gzipOption,
  scitt: {
    type: 'boolean',
    default: false,
    description:
      'also enqueue a SCITT registration for each exported record that has no job yet; the service publishes them in the background (the bundle lists the job ids, not receipts: export again later for the receipts)',
  },
  ...apiOptions,
} as const satisfies OptionSpecs;

export const attestationExportCommand = {
  path: ['attestation', 'export'],
  summary: 'export a bundle (tar) of attestations with everything needed to verify them offline',
  usage: '--output bundle.tar [--id UUID]... [filters] [--gzip] [--scitt]',
  options: attestationExportOptions,
  details:
    'The bundle holds the records with their Sigstore bundles, receipts, signer chains, AIBOMs and\n' +
    "C2PA manifests, an index and the bundle's own C2PA manifest (docs/export.md). Verify it with\n" +
    '  service-ctl keys fetch --out trust && service-ctl verify bundle.tar --trust-bundle trust',
  async run(args) {
    const { values } = parseCommand(this, args);
    const client = clientFrom(values);
    if (values.output === undefined) throw new CliError('--output <bundle.tar> is required', 2);
    for (const id of values.id ?? []) if (!UUID.test(id)) throw new CliError(`--id: ${id} is not a UUID`, 2);
    const body: Record<string, unknown> = {
      ...(values.id !== undefined ? { ids: values.id } : {}),
      ...(await filterOf(values, () => client)),
      ...(values.gzip ? { gzip: true } : {}),
      ...(values.scitt ? { scitt: true } : {}),
    };
    const { res, bytes } = await download(values.output, client.urlOf('/v1/attestations/export'), () =>
      client.request('POST', '/v1/attestations/export', body, BUNDLE_ACCEPT),
    );
    const withheld = Number(res.headers.get('x-export-withheld-namespaces') ?? '0');
    process.stdout.write(
      `wrote ${values.output}: ${res.headers.get('x-export-attestations') ?? '?'} attestations, ${bytes} bytes\n`,
    );
    if (withheld > 0) {
      process.stderr.write(
        `service-ctl: ${withheld} namespace(s) you asked for were withheld (no read or export right)\n`,
      );
    }
    return 0;
  },
} satisfies Command & { options: typeof attestationExportOptions };

const auditExportOptions = {
  ...runOption,
  artifact: { type: 'string', value: 'KIND', default: 'aibom', description: 'the artifact (only aibom)' },
  output: {
    type: 'string',
    short: 'o',
    value: 'FILE',
    description: 'where to write the bundle (default: evidence-<run id>-<artifact>.tar)',
  },
  ...gzipOption,
  ...apiOptions,
} as const satisfies OptionSpecs;

export const auditExportCommand = {
  path: ['audit', 'export'],
  summary: "bundle one artifact's evidence: binary, C2PA manifest, capability chain, SCITT receipt",
  usage: '--run <UUID|NAMESPACE/NAME> [--artifact aibom] [--output FILE] [--gzip]',
  options: auditExportOptions,
  details:
    'The very bytes the web UI\'s "Export with receipts" downloads (GET /v1/runs/{id}/artifacts/aibom/evidence).',
  async run(args) {
    const { values } = parseCommand(this, args);
    const ref = parseRunRef(values.run);
    if (values.artifact !== 'aibom')
      throw new CliError(`--artifact: only aibom is exported, not ${values.artifact}`, 2);
    const client = clientFrom(values);
    const runId = await client.runId(ref);
    const output = values.output ?? `evidence-${runId}-${values.artifact}.tar${values.gzip ? '.gz' : ''}`;
    // The same GET the UI's "Export with receipts" button issues: the bytes are the route's.
    const path = `/v1/runs/${runId}/artifacts/${values.artifact}/evidence${values.gzip ? '?gzip=true' : ''}`;
    const { bytes } = await download(output, client.urlOf(path), () =>
      client.request('GET', path, undefined, BUNDLE_ACCEPT),
    );
    process.stdout.write(`wrote ${output}: ${bytes} bytes\n`);
    return 0;
  },
} satisfies Command & { options: typeof auditExportOptions };

const auditLogOptions = {
  namespace: {
    type: 'string',
    short: 'n',
    value: 'NS',
    description: 'rows of this namespace (default: every row you may list)',
  },
  action: { type: 'string', value: 'ACTION', description: 'rows of this action (download, export, ...)' },
  from: { type: 'string', value: 'RFC3339', description: 'rows at or after this time' },
  to: { type: 'string', value: 'RFC3339', description: 'rows before this time' },
  ...apiOptions,
} as const satisfies OptionSpecs;

export const auditLogCommand = {
  path: ['audit', 'log'],
  summary: 'print the audit log (downloads and exports) as NDJSON; needs list on auditlogs',
  usage: '[--namespace NS] [--action ACTION] [--from RFC3339] [--to RFC3339]',
  options: auditLogOptions,
  async run(args) {
    const { values } = parseCommand(this, args);
    const client = clientFrom(values);
    let after: number | null = 0;
    while (after !== null) {
      const q: URLSearchParams = new URLSearchParams({ after: String(after), limit: '1000' });
      for (const k of ['namespace', 'action', 'from', 'to'] as const) {
        const v = values[k];
        if (v !== undefined) q.set(k, v);
      }
      const page = await client.page<{ items: unknown[]; next_after: number | null }>(
        'GET',
        `/v1/audit?${q.toString()}`,
        undefined,
        'items',
      );
      for (const item of page.items) process.stdout.write(`${JSON.stringify(item)}\n`);
      after = page.next_after;
    }
    return 0;
  },
} satisfies Command & { options: typeof auditLogOptions };

interface TrustBundle {
  trust_anchors_pem: string;
  tsa_trust_anchors_pem?: string;
  signers: { cert_chain_ref: string; key_id: string; chain_pem: string }[];
  log_keys: { cose_key_set: string };
}

/**
 * Fetches the trust bundle into `dir`: ca.pem, log-keys.cbor, certs/<cert_chain_ref hex>.pem (the
 * chains), keys/<key_id hex>.pem (their public keys, for `cosign --key`), trust-bundle.json; and,
 * when the service time-stamps, tsa-ca.pem and trusted_root.json (a Sigstore trusted root naming
 * the TSA, for `cosign … --use-signed-timestamps --trusted-root`).
 */
export async function fetchTrust(
  client: ApiClient,
  dir: string,
  namespaces: readonly string[] = [],
): Promise<TrustBundle> {
  const path = `/v1/keys${keysQuery(namespaces)}`;
  const bundle = await client.json<TrustBundle>('GET', path);
  // Checked (its certificates parsed) before anything is written: what the API gave must be a
  // trust bundle the verifier can load back (loadTrustBundle), not whatever answered.
  try {
    trustBundleOf(bundle);
  } catch (err) {
    if (!(err instanceof TrustBundleError)) throw err;
    throw new CliError(`${client.urlOf(path)} answered no trust bundle: ${err.message}`);
  }
  await makeDirectory(join(dir, 'certs'));
  await makeDirectory(join(dir, 'keys'));
  await writeFile(join(dir, 'ca.pem'), bundle.trust_anchors_pem);
  await writeFile(join(dir, 'log-keys.cbor'), Buffer.from(bundle.log_keys.cose_key_set, 'base64'));
  for (const s of bundle.signers) {
    await writeFile(join(dir, 'certs', `${s.cert_chain_ref.replace(/^sha256:/, '')}.pem`), s.chain_pem);
    const key = s.chain_pem.includes('CERTIFICATE')
      ? new X509Certificate(s.chain_pem).publicKey.export({ type: 'spki', format: 'pem' })
      : s.chain_pem;
    await writeFile(join(dir, 'keys', `${s.key_id.replace(/^sha256:/, '')}.pem`), key);
  }
  const tsaPem = bundle.tsa_trust_anchors_pem ?? '';
  if (tsaPem.includes('CERTIFICATE')) {
    await writeFile(join(dir, 'tsa-ca.pem'), tsaPem);
    const roots = pemCertificates(tsaPem, "the trust bundle's tsa_trust_anchors_pem");
    await writeFile(join(dir, 'trusted_root.json'), `${JSON.stringify(tsaTrustedRoot(roots), null, 2)}\n`);
  }
  await writeFile(join(dir, 'trust-bundle.json'), `${JSON.stringify(bundle, null, 2)}\n`);
  return bundle;
}

/** `?namespace=a,b` of the key routes (none: every namespace the caller may read, when few enough). */
const keysQuery = (namespaces: readonly string[]): string =>
  namespaces.length > 0 ? `?namespace=${encodeURIComponent([...new Set(namespaces)].join(','))}` : '';

const keysNamespaceOption = {
  namespace: {
    type: 'string',
    multiple: true,
    value: 'NS',
    description:
      "include this namespace's customer-supplied keys (repeatable, at most 16; default: every namespace holding customer keys that you may list attestations in, which you must name once more than 16 hold them, unless you may list attestations cluster-wide)",
  },
} as const satisfies OptionSpecs;

const keysFetchOptions = {
  out: {
    type: 'string',
    value: 'DIR',
    default: 'trust',
    description: 'directory to write the trust bundle into',
  },
  ...keysNamespaceOption,
  ...apiOptions,
} as const satisfies OptionSpecs;

export const keysFetchCommand = {
  path: ['keys', 'fetch'],
  summary: 'save the trust bundle (CA, signer chains current and past, SCITT log keys) into a directory',
  usage: '[--out DIR] [--namespace NS]...',
  options: keysFetchOptions,
  details:
    'Writes ca.pem, log-keys.cbor, certs/<ref>.pem, keys/<key id>.pem (for cosign --key),\n' +
    'trust-bundle.json and, when the service time-stamps, tsa-ca.pem and trusted_root.json.',
  async run(args) {
    const { values } = parseCommand(this, args);
    const dir = values.out;
    // An empty --out would write into the working directory while naming files `/ca.pem`.
    if (dir.trim() === '') throw new CliError('--out needs a directory name (default: trust)', 2);
    const bundle = await fetchTrust(clientFrom(values), dir, values.namespace ?? []);
    process.stdout.write(
      `wrote ${dir}/ca.pem, ${dir}/log-keys.cbor, ${bundle.signers.length} signer chain(s) in ${dir}/certs/, ${dir}/trust-bundle.json` +
        `${(bundle.tsa_trust_anchors_pem ?? '').includes('CERTIFICATE') ? `, ${dir}/tsa-ca.pem, ${dir}/trusted_root.json` : ''}\n`,
    );
    return 0;
  },
} satisfies Command & { options: typeof keysFetchOptions };

const keysGetOptions = { ...keysNamespaceOption, ...apiOptions } as const satisfies OptionSpecs;

export const keysGetCommand = {
  path: ['keys', 'get'],
  summary: 'print the certificate chain (PEM) of a cert_chain_ref or key id',
  usage: '[--namespace NS]... sha256:<hex>',
  options: keysGetOptions,
  async run(args) {
    const { values, positionals } = parseCommand(this, args, { positionals: true });
    const ref = positionals[0];
    if (ref === undefined || !/^sha256:[0-9a-f]{64}$/.test(ref)) {
      throw new CliError('usage: service-ctl keys get sha256:<hex> (a cert_chain_ref or key_id)', 2);
    }
    const res = await clientFrom(values).request(
      'GET',
      `/v1/keys/${ref}${keysQuery(values.namespace ?? [])}`,
      undefined,
      'application/x-pem-file',
    );
    process.stdout.write(await res.text());
    return 0;
  },
} satisfies Command & { options: typeof keysGetOptions };
