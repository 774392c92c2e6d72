import type { FastifyInstance, FastifyRequest } from 'fastify';
import type { Vault } from '../../../vault/index.ts';
import type { Authorizer } from '../../auth/authorizer.ts';
import { isAllowed } from '../../auth/plugin.ts';
import { ProblemError } from '../../problem.ts';
import { problemResponses } from '../../schemas.ts';

/**
 * The audit log for auditors: `list` on the virtual resource `auditlogs` (group vault.service.dev)
 * in a namespace shows that namespace's rows; cluster-wide, every row (also those without a
 * namespace). The role `aibom-vault-auditor` grants it (docs/rbac.md).
 */
export interface AuditRouteDeps {
  readonly vault: Vault;
  readonly authorizer: Authorizer;
  readonly listNamespaces: () => Promise<string[]>;
}

interface AuditQuery {
  namespace?: string;
  action?: string;
  from?: string;
  to?: string;
  after?: string;
  limit?: string;
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
            description: 'artifact.download, attestations.export[.bundle|.aborted], artifact.evidence[...]',
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

async function readableAudit(
  deps: AuditRouteDeps,
  req: FastifyRequest,
  asked: string | undefined,
): Promise<string[] | null> {
  const list = (namespace: string) =>
    isAllowed(deps.authorizer, req, { namespace, verb: 'list', resource: 'auditlogs' });
  if (asked !== undefined) {
    if (await list(asked)) return [asked];
    throw new ProblemError(
      403,
      'FORBIDDEN',
      `reading the audit log of ${asked} needs list on auditlogs there`,
    );
  }
  if (await list('')) return null;
  const candidates = await deps.listNamespaces();
  const ok = (await Promise.all(candidates.map(async (ns) => ((await list(ns)) ? ns : null)))).filter(
    (ns): ns is string => ns !== null,
  );
  if (ok.length === 0)
    throw new ProblemError(403, 'FORBIDDEN', 'reading the audit log needs list on auditlogs');
  return ok;
}

export function auditRoutes(app: FastifyInstance, deps: AuditRouteDeps): void {
  app.get<{ Querystring: AuditQuery }>(
    '/v1/audit',
    {
      schema: {
        summary:
          'The audit log (downloads and exports, with manifest digests and attestation ids), for auditors',
        querystring: {
          type: 'object',
          additionalProperties: false,
          properties: {
            namespace: { type: 'string', minLength: 1, maxLength: 63 },
            action: { type: 'string', minLength: 1, maxLength: 100 },
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
        },
        response: { 200: { $ref: 'AuditPage#' }, ...problemResponses },
      },
    },
    async (req) => {
      const q = req.query;
      const namespaces = await readableAudit(deps, req, q.namespace);
      const limit = q.limit !== undefined ? Number(q.limit) : 100;
      if (limit < 1 || limit > 1000) {
        throw new ProblemError(400, 'VALIDATION_FAILED', 'limit must be between 1 and 1000', {
          errors: [{ pointer: '/querystring/limit', message: 'must be between 1 and 1000' }],
        });
      }
      const rows = await deps.vault.audit.list({
        namespaces,
        limit,
        ...(q.after !== undefined ? { after: Number(q.after) } : {}),
        ...(q.action !== undefined ? { action: q.action } : {}),
        ...(q.from !== undefined ? { from: new Date(q.from) } : {}),
        ...(q.to !== undefined ? { to: new Date(q.to) } : {}),
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
