import { createPublicKey, type X509Certificate } from 'node:crypto';
import type { FastifyInstance, FastifyRequest } from 'fastify';
import { encodeKeySet, logKeyOf, type LogKey } from '../../../cose/key.ts';
import { parseCertificates } from '../../../signing/index.ts';
import type { SignerCertificate, Vault } from '../../../vault/index.ts';
import type { Authorizer } from '../../auth/authorizer.ts';
import { isAllowed } from '../../auth/plugin.ts';
import { listableNamespaces, MAX_QUERY_NAMESPACES, nameNamespaces } from '../../auth/namespaces.ts';
import { ProblemError } from '../../problem.ts';
import { problemResponses } from '../../schemas.ts';
import { typed } from '../../typed.ts';

/**
 * Key distribution: what a verifier needs, to any authenticated caller, without Secrets. The
 * service's own keys (namespace '') are public; a tenant's customer-supplied keys are served to
 * callers who may list attestations in that namespace.
 */
export interface KeyRouteDeps {
  readonly vault: Vault;
  readonly authorizer: Authorizer;
  /** The service signer's CA certificates (ca.crt): the anchors verifiers should hold. */
  readonly trustAnchors: readonly X509Certificate[];
  /** Roots of the TSA whose RFC 3161 time-stamps the records carry (TSA_TRUST_ANCHORS). */
  readonly tsaTrustAnchors?: readonly X509Certificate[];
  /** Keys of the transparency logs (current); past ones come from the store. */
  readonly logKeys: () => Promise<{ key: LogKey; chainPem?: string }[]>;
  readonly ensureServiceKeys: () => Promise<void>;
}

const REF = '^sha256:[0-9a-f]{64}$';

/** Unknown query parameters are refused, as on every other route. */
const noQuery = { type: 'object', additionalProperties: false, properties: {} } as const;

export const keyEntrySchema = {
  $id: 'KeyEntry',
  type: 'object',
  required: ['cert_chain_ref', 'key_id', 'namespace', 'role', 'chain_pem', 'first_used_at'],
  properties: {
    cert_chain_ref: { type: 'string', description: 'sha256 of the leaf DER (the key id for a bare key)' },
    key_id: { type: 'string', description: 'sha256 of the SubjectPublicKeyInfo DER' },
    namespace: {
      type: 'string',
      description: "'' for the service's own keys, else the tenant of a customer key",
    },
    role: { type: 'string', enum: ['signer', 'log'] },
    chain_pem: { type: 'string', description: 'leaf first, then intermediates; or a PUBLIC KEY block' },
    ca_pem: { type: 'string' },
    not_before: { type: ['string', 'null'], format: 'date-time' },
    not_after: { type: ['string', 'null'], format: 'date-time' },
    first_used_at: { type: 'string', format: 'date-time' },
  },
} as const;

export const trustBundleSchema = {
  $id: 'TrustBundle',
  type: 'object',
  required: ['trust_anchors_pem', 'signers', 'log_keys', 'note_keys'],
  properties: {
    trust_anchors_pem: { type: 'string', description: 'the CA certificates (PEM) signer chains lead to' },
    tsa_trust_anchors_pem: {
      type: 'string',
      description:
        'the root certificates (PEM) of the time-stamping authority whose RFC 3161 time-stamps records carry; empty without one',
    },
    signers: { type: 'array', items: { $ref: 'KeyEntry#' }, description: 'every signer, current and past' },
    log_keys: {
      type: 'object',
      required: ['cose_key_set'],
      properties: {
        cose_key_set: {
          type: 'string',
          description: 'base64 COSE Key Set of every log key, current and past',
        },
        entries: { type: 'array', items: { $ref: 'KeyEntry#' } },
      },
    },
    note_keys: {
      type: 'array',
      description:
        'the Ed25519 note verifier keys (c2sp.org/signed-note vkeys, <origin>+<key id>+<base64>) of the C2SP checkpoints of /v1/tlog/vault and /v1/tlog/scitt, newest first per log, past ones included',
      items: {
        type: 'object',
        required: ['log', 'vkey'],
        properties: { log: { type: 'string', enum: ['vault', 'scitt'] }, vkey: { type: 'string' } },
      },
    },
  },
} as const;

function entryView(e: SignerCertificate) {
  return {
    cert_chain_ref: e.certRef,
    key_id: e.keyId,
    namespace: e.namespace,
    role: e.role,
    chain_pem: e.chainPem,
    ca_pem: e.caPem,
    not_before: e.notBefore?.toISOString() ?? null,
    not_after: e.notAfter?.toISOString() ?? null,
    first_used_at: e.firstUsedAt.toISOString(),
  };
}

const LABEL = '[a-z0-9]([-a-z0-9]*[a-z0-9])?';

const nameThem = nameNamespaces('read', 'attestations', '/querystring/namespace');

/**
 * '' (the service's keys, public) plus the customer-key namespaces the caller may list attestations
 * in: those `named` (the `namespace` parameter), else every namespace holding customer keys. The
 * query's bound (auth/namespaces.ts): the cluster-wide question first, then at most
 * MAX_QUERY_NAMESPACES one by one; a caller without the cluster-wide grant must name the
 * namespaces (400) once more than that hold customer keys. Before, every such namespace was
 * reviewed one by one, uncapped, on every request (every UI run page asks).
 */
async function readableKeyNamespaces(
  deps: KeyRouteDeps,
  req: FastifyRequest,
  named: readonly string[] | undefined,
): Promise<string[]> {
  const tenants = named === undefined ? await deps.vault.signers.namespaces() : undefined;
  // No customer key anywhere: nothing to decide.
  if (tenants !== undefined && tenants.length === 0) return [''];
  const { allowed } = await listableNamespaces(
    (namespace) => isAllowed(deps.authorizer, req, { namespace, verb: 'list', resource: 'attestations' }),
    named,
    () => Promise.resolve(tenants ?? []),
    nameThem,
  );
  return ['', ...allowed.filter((ns) => ns !== '')];
}

/** `?namespace=a,b`: the tenants whose customer keys to serve (at most MAX_QUERY_NAMESPACES). */
const namespaceQuery = {
  type: 'object',
  additionalProperties: false,
  properties: {
    namespace: {
      type: 'string',
      maxLength: MAX_QUERY_NAMESPACES * 64,
      pattern: `^${LABEL}(,${LABEL}){0,${MAX_QUERY_NAMESPACES - 1}}$`,
      description: `comma-separated namespaces whose customer keys to include, at most ${MAX_QUERY_NAMESPACES}; default: every namespace holding customer keys that the caller may list attestations in (a caller without a cluster-wide grant must name them once more than ${MAX_QUERY_NAMESPACES} namespaces hold customer keys). The service's keys are always included`,
    },
  },
} as const;

const namedIn = (q: { namespace?: string }): string[] | undefined =>
  q.namespace !== undefined ? [...new Set(q.namespace.split(','))] : undefined;

function pemOf(certs: readonly X509Certificate[]): string {
  return certs.map((c) => c.toString()).join('');
}

/** The anchors: the configured CA plus every CA the service's signers were loaded with (deduplicated). */
function anchorsOf(deps: KeyRouteDeps, entries: readonly SignerCertificate[]): X509Certificate[] {
  const out = new Map<string, X509Certificate>();
  for (const c of deps.trustAnchors) out.set(c.fingerprint256, c);
  for (const e of entries) {
    if (e.namespace !== '' || e.caPem === '') continue;
    for (const c of parseCertificates(e.caPem, 'ca_pem')) out.set(c.fingerprint256, c);
  }
  return [...out.values()];
}

export function keyRoutes(fastify: FastifyInstance, deps: KeyRouteDeps): void {
  const app = typed(fastify);
  app.get(
    '/v1/keys',
    {
      schema: {
        summary:
          'The trust bundle: CA certificates, every signer chain (current and past), the SCITT log keys, the note keys of the C2SP checkpoints',
        querystring: namespaceQuery,
        response: { 200: { $ref: 'TrustBundle#' }, ...problemResponses },
      },
    },
    async (req) => {
      await deps.ensureServiceKeys();
      const entries = await deps.vault.signers.list(
        await readableKeyNamespaces(deps, req, namedIn(req.query)),
      );
      const signers = entries.filter((e) => e.role === 'signer');
      const logEntries = entries.filter((e) => e.role === 'log');
      const keys = new Map<string, LogKey>();
      for (const k of await deps.logKeys()) keys.set(k.key.kid.toString('hex'), k.key);
      for (const e of logEntries) {
        const key = e.chainPem.includes('CERTIFICATE')
          ? parseCertificates(e.chainPem, 'chain_pem')[0]!.publicKey
          : createPublicKey(e.chainPem);
        const logKey = logKeyOf(key);
        keys.set(logKey.kid.toString('hex'), logKey);
      }
      const noteKeys = await Promise.all(
        (['vault', 'scitt'] as const).map(async (log) =>
          (await deps.vault.tlog.vkeys(log)).map((vkey) => ({ log, vkey })),
        ),
      );
      return {
        note_keys: noteKeys.flat(),
        trust_anchors_pem: pemOf(anchorsOf(deps, entries)),
        tsa_trust_anchors_pem: pemOf(deps.tsaTrustAnchors ?? []),
        signers: signers.map(entryView),
        log_keys: {
          cose_key_set: encodeKeySet([...keys.values()]).toString('base64'),
          entries: logEntries.map(entryView),
        },
      };
    },
  );

  app.get(
    '/v1/keys/ca.pem',
    {
      schema: {
        summary: 'The CA certificates (PEM) to pass as --trust-anchor',
        querystring: noQuery,
        response: {
          200: { description: 'PEM', content: { 'application/x-pem-file': { schema: { type: 'string' } } } },
          ...problemResponses,
        },
      },
    },
    async (_req, reply) => {
      await deps.ensureServiceKeys();
      const entries = await deps.vault.signers.list(['']);
      return reply.type('application/x-pem-file').send(pemOf(anchorsOf(deps, entries)));
    },
  );

  app.get(
    '/v1/keys/:ref',
    {
      schema: {
        summary: 'Resolve a cert_chain_ref or key id (sha256:<hex>) to its certificate chain(s)',
        querystring: namespaceQuery,
        params: {
          type: 'object',
          required: ['ref'],
          properties: { ref: { type: 'string', pattern: REF } },
        },
        response: {
          200: {
            type: 'object',
            required: ['items'],
            properties: { items: { type: 'array', items: { $ref: 'KeyEntry#' } } },
          },
          ...problemResponses,
        },
      },
    },
    async (req, reply) => {
      await deps.ensureServiceKeys();
      const found = await deps.vault.signers.resolve(
        req.params.ref,
        await readableKeyNamespaces(deps, req, namedIn(req.query)),
      );
      if (found.length === 0)
        throw new ProblemError(404, 'NOT_FOUND', 'no certificate or key is known by this reference');
      if ((req.headers.accept ?? '').includes('application/x-pem-file')) {
        return reply.type('application/x-pem-file').send(found[0]!.chainPem);
      }
      return { items: found.map(entryView) };
    },
  );
}
