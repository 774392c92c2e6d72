import type { FastifyInstance, FastifyRequest } from 'fastify';
import type { Vault } from '../../../vault/index.ts';
import type { Authorizer } from '../../auth/authorizer.ts';
import { MAX_QUERY_NAMESPACES, listableNamespaces, nameNamespaces } from '../../auth/namespaces.ts';
import { isAllowed } from '../../auth/plugin.ts';
import { ProblemError } from '../../problem.ts';
import { NO_CONTROL_PATTERN, problemResponses } from '../../schemas.ts';
import { typed, type FromSchema } from '../../typed.ts';

/**
 * The audit log for auditors: `list` on the virtual resource `auditlogs` (group vault.service.dev)
 * in a namespace shows that namespace's rows; cluster-wide, every row (also those without a
 * namespace). The role `aibom-vault-auditor` grants it (docs/rbac.md). Authorised like the query
 * (auth/namespaces.ts): the cluster-wide question first, then at most MAX_QUERY_NAMESPACES more.
 */
export interface AuditRouteDeps {
  readonly vault: Vault;
  readonly authorizer: Authorizer;
  readonly listNamespaces: () => Promise<string[]>;
}

export const auditPageSchema = {
  $id: 'AuditPage',
  type: 'object',
  required: ['items', 'next_after'],
  properties: {
    items: {
      type: 'array',
      items: {
        type: 'object',
        required: ['id', 'at', 'actor', 'action', 'attestation_ids'],
        properties: {
          id: { type: 'integer' },
          at: { type: 'string', format: 'date-time' },
          actor: { type: 'string' },
          action: {
            type: 'string',
            description:
              'artifact.download, artifact.manifest, attestations.export[.artifact|.bundle|.aborted], artifact.evidence[...] (docs/export.md)',
          },
          namespace: { type: ['string', 'null'] },
          object: { type: ['string', 'null'] },
          manifest_digest: {
            type: ['string', 'null'],
            description: 'sha256 of the C2PA manifest that left with it',
          },
          attestation_ids: { type: 'array', items: { type: 'string' } },
          details: { type: 'object', additionalProperties: true },
        },
      },
    },
    next_after: { type: ['integer', 'null'], description: 'pass as `after` for the next page' },
  },
} as const;

const LABEL = '[a-z0-9]([-a-z0-9]*[a-z0-9])?';

const nameThem = nameNamespaces('read', 'auditlogs', '/querystring/namespace');

/**
 * The namespaces whose rows the caller may read; null for every row (a cluster-wide grant, no
 * namespace named). At most 1 + MAX_QUERY_NAMESPACES reviews: the cluster-wide question, then one
 * per namespace named (at most MAX_QUERY_NAMESPACES, by the schema) or, when none is, one per
 * namespace holding records, refused with 400 before any of them is reviewed when there are more.
 * Every namespace named must be allowed (403 otherwise, in fixed text: the request is not quoted).
 */
async function readableAudit(
  deps: AuditRouteDeps,
  req: FastifyRequest,
  named: readonly string[] | undefined,
): Promise<string[] | null> {
  const mayList = (namespace: string) =>
    isAllowed(deps.authorizer, req, { namespace, verb: 'list', resource: 'auditlogs' });
  if (named === undefined && (await mayList(''))) return null;
  const { allowed, excluded } = await listableNamespaces(mayList, named, deps.listNamespaces, nameThem);
  if (named !== undefined && excluded > 0) {
    throw new ProblemError(
      403,
      'FORBIDDEN',
      'reading the audit log of a namespace needs list on auditlogs there',
    );
  }
  if (allowed.length === 0)
    throw new ProblemError(403, 'FORBIDDEN', 'reading the audit log needs list on auditlogs');
  return allowed;
}

const auditQuerySchema = {
  type: 'object',
  additionalProperties: false,
  properties: {
    namespace: {
      type: 'string',
      maxLength: MAX_QUERY_NAMESPACES * 64,
      pattern: `^${LABEL}(,${LABEL}){0,${MAX_QUERY_NAMESPACES - 1}}$`,
      description: `comma-separated namespaces, at most ${MAX_QUERY_NAMESPACES}; default: every namespace the caller may read (a caller without a cluster-wide grant must name them once more than ${MAX_QUERY_NAMESPACES} namespaces hold records)`,
    },
    action: { type: 'string', minLength: 1, maxLength: 100, pattern: NO_CONTROL_PATTERN },
    from: { type: 'string', format: 'date-time' },
    to: { type: 'string', format: 'date-time' },
    // Query strings are not coerced (the app validates strictly): digits, checked below.
    after: {
      type: 'string',
      pattern: '^[0-9]{1,15}$',
      description: 'next_after of the previous page',
    },
    limit: { type: 'string', pattern: '^[0-9]{1,4}$', description: '1–1000, default 100' },
  },
} as const;

type AuditQuery = FromSchema<typeof auditQuerySchema>;

/** Input checks that need no review: the page size and the time window. */
function checkInput(q: AuditQuery): { limit: number; from?: Date; to?: Date } {
  const limit = q.limit !== undefined ? Number(q.limit) : 100;
  if (limit < 1 || limit > 1000) {
    throw new ProblemError(400, 'VALIDATION_FAILED', 'limit must be between 1 and 1000', {
      errors: [{ pointer: '/querystring/limit', message: 'must be between 1 and 1000' }],
    });
  }
  const from = q.from !== undefined ? new Date(q.from) : undefined;
  const to = q.to !== undefined ? new Date(q.to) : undefined;
  if (from && to && from.getTime() >= to.getTime()) {
    throw new ProblemError(400, 'INVALID_TIME_WINDOW', '`from` must be before `to`', {
      errors: [{ pointer: '/querystring/from', message: 'must be before /querystring/to' }],
    });
  }
  return { limit, ...(from ? { from } : {}), ...(to ? { to } : {}) };
}

export function auditRoutes(fastify: FastifyInstance, deps: AuditRouteDeps): void {
  const app = typed(fastify);
  app.get(
    '/v1/audit',
    {
      schema: {
        summary:
          'The audit log (downloads and exports, with manifest digests and attestation ids), for auditors',
        querystring: auditQuerySchema,
        response: { 200: { $ref: 'AuditPage#' }, ...problemResponses },
      },
    },
    async (req) => {
      const q = req.query;
      const { limit, from, to } = checkInput(q);
      const named = q.namespace !== undefined ? [...new Set(q.namespace.split(','))] : undefined;
      const namespaces = await readableAudit(deps, req, named);
      const rows = await deps.vault.audit.list({
        namespaces,
        limit,
        ...(q.after !== undefined ? { after: Number(q.after) } : {}),
        ...(q.action !== undefined ? { action: q.action } : {}),
        ...(from ? { from } : {}),
        ...(to ? { to } : {}),
      });
      return {
        items: rows.map((r) => ({
          id: r.id,
          at: r.at.toISOString(),
          actor: r.actor,
          action: r.action,
          namespace: r.namespace ?? null,
          object: r.object ?? null,
          manifest_digest: r.manifestDigest ?? null,
          attestation_ids: [...(r.attestationIds ?? [])],
          details: r.details ?? {},
        })),
        next_after: rows.length === limit ? rows.at(-1)!.id : null,
      };
    },
  );
}
