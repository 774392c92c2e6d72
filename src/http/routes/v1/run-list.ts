import type { FastifyInstance } from 'fastify';
import { isTerminal } from '../../../crd/run.ts';
import { summaryOfCounts } from '../../../transparency/summary.ts';
import { resolveRunPack } from '../../../policy/index.ts';
import {
  RUN_LIST_DEFAULT_LIMIT,
  RUN_LIST_MAX_LIMIT,
  type RunSummary,
  type Vault,
  VaultError,
} from '../../../vault/index.ts';
import type { Authorizer } from '../../auth/authorizer.ts';
import { MAX_QUERY_NAMESPACES, listableNamespaces, nameNamespaces } from '../../auth/namespaces.ts';
import { isAllowed } from '../../auth/plugin.ts';
import { ProblemError } from '../../problem.ts';
import { NO_CONTROL_PATTERN, problemResponses } from '../../schemas.ts';
import { typed } from '../../typed.ts';

/**
 * GET /v1/runs: the runs of the namespaces the caller may list, newest first, in keyset pages, with
 * what a list shows of each (phase, AIBOM, record count, transparency). Authorised like the query
 * (`list` on runs, per namespace, at most 1 + 16 reviews: auth/namespaces.ts); namespaces the
 * caller may not list are counted, never named. Kept apart from runs.ts (the single-run routes).
 */
export interface RunListRouteDeps {
  readonly vault: Vault;
  readonly authorizer: Authorizer;
}

const LABEL = '[a-z0-9]([-a-z0-9]*[a-z0-9])?';

export const runListSchemas = [
  {
    $id: 'RunListItem',
    type: 'object',
    required: [
      'id',
      'namespace',
      'name',
      'phase',
      'policy_pack',
      'aibom',
      'attestation_count',
      'transparency',
      'created_at',
      'updated_at',
    ],
    properties: {
      id: { type: 'string', description: 'run id (the Run resource UID)' },
      namespace: { type: 'string' },
      name: { type: 'string' },
      phase: { type: ['string', 'null'] },
      policy_pack: {
        type: ['object', 'null'],
        required: ['name', 'version'],
        properties: { name: { type: 'string' }, version: { type: 'string' } },
      },
      aibom: {
        type: 'object',
        required: ['state', 'digest'],
        properties: {
          state: {
            type: 'string',
            enum: ['ready', 'pending', 'none'],
            description:
              'ready: stored and signed; pending: the run is terminal, its AIBOM not stored yet; none: the run is not terminal',
          },
          digest: { type: ['string', 'null'] },
        },
      },
      attestation_count: { type: 'integer', description: 'vault records of the run' },
      transparency: {
        type: ['object', 'null'],
        description: 'null when no record of the run has a transparency job',
        required: ['state', 'mode', 'queued', 'published', 'retrying', 'not_queued'],
        properties: {
          state: {
            type: 'string',
            enum: ['queued', 'published'],
            description: 'published once every record of the run is, else queued',
          },
          mode: {
            type: ['string', 'null'],
            enum: ['dry_run', 'published', 'mixed', null],
            description:
              "where the published records went: dry_run (this deployment's own log), published, mixed",
          },
          queued: { type: 'integer', description: 'records whose SCITT job waits' },
          published: { type: 'integer', description: 'records in a transparency log' },
          retrying: { type: 'integer', description: 'queued records whose last attempt failed' },
          not_queued: {
            type: 'integer',
            description: 'records without a SCITT job (stored while the writer was off)',
          },
        },
      },
      created_at: { type: 'string', format: 'date-time' },
      updated_at: { type: 'string', format: 'date-time' },
    },
  },
  {
    $id: 'RunList',
    type: 'object',
    required: ['items', 'next_cursor', 'excluded_namespace_count'],
    properties: {
      items: { type: 'array', items: { $ref: 'RunListItem#' } },
      next_cursor: { type: ['string', 'null'] },
      excluded_namespace_count: {
        type: 'integer',
        minimum: 0,
        description: 'namespaces named (or holding runs) the caller may not list: counted, never named',
      },
    },
  },
] as const;

/** One list row as the API shows it. */
export function runListItem(r: RunSummary) {
  let pack: { name: string; version: string } | null;
  try {
    pack = resolveRunPack(r.spec);
  } catch {
    pack = null; // a spec admission would refuse today (mirrored before a rule existed)
  }
  const t = r.transparency;
  const any = t.queued + t.published > 0;
  // Against the run's record count: records without a job keep the run from `published`.
  const summary = any ? summaryOfCounts({ ...t, records: r.attestations }) : undefined;
  return {
    id: r.id,
    namespace: r.namespace,
    name: r.name,
    phase: r.phase,
    policy_pack: pack,
    aibom: {
      state: r.aibomDigest !== null ? 'ready' : isTerminal(r.phase) ? 'pending' : 'none',
      digest: r.aibomDigest,
    },
    attestation_count: r.attestations,
    transparency:
      summary === undefined
        ? null
        : {
            state: summary.state,
            mode: summary.mode ?? null,
            queued: summary.queued,
            published: summary.published,
            retrying: summary.retrying,
            not_queued: summary.notQueued,
          },
    created_at: r.createdAt.toISOString(),
    updated_at: r.updatedAt.toISOString(),
  };
}

export function runListRoutes(fastify: FastifyInstance, deps: RunListRouteDeps): void {
  const app = typed(fastify);
  app.get(
    '/v1/runs',
    {
      schema: {
        summary: 'Runs of the namespaces the caller may list, newest first, in keyset pages',
        querystring: {
          type: 'object',
          additionalProperties: false,
          properties: {
            namespace: {
              type: 'string',
              maxLength: MAX_QUERY_NAMESPACES * 64,
              pattern: `^${LABEL}(,${LABEL}){0,${MAX_QUERY_NAMESPACES - 1}}$`,
              description: `comma-separated namespaces, at most ${MAX_QUERY_NAMESPACES}; default: every namespace the caller may list`,
            },
            phase: { type: 'string', enum: ['Pending', 'Running', 'Succeeded', 'Failed'] },
            name_prefix: {
              type: 'string',
              minLength: 1,
              maxLength: 253,
              pattern: NO_CONTROL_PATTERN,
              description: 'runs whose name starts with this',
            },
            // Query strings are not coerced (the app validates strictly): digits, checked below.
            limit: {
              type: 'string',
              pattern: '^[0-9]{1,3}$',
              description: `page size, 1–${RUN_LIST_MAX_LIMIT}, default ${RUN_LIST_DEFAULT_LIMIT}`,
            },
            cursor: {
              type: 'string',
              minLength: 1,
              maxLength: 2048,
              pattern: NO_CONTROL_PATTERN,
              description: 'next_cursor of the previous page (same filters)',
            },
          },
        },
        response: { 200: { $ref: 'RunList#' }, ...problemResponses },
      },
    },
    async (req) => {
      const q = req.query;
      const limit = q.limit !== undefined ? Number(q.limit) : RUN_LIST_DEFAULT_LIMIT;
      if (limit < 1 || limit > RUN_LIST_MAX_LIMIT) {
        throw new ProblemError(
          400,
          'VALIDATION_FAILED',
          `limit must be between 1 and ${RUN_LIST_MAX_LIMIT}`,
          {
            errors: [
              { pointer: '/querystring/limit', message: `must be between 1 and ${RUN_LIST_MAX_LIMIT}` },
            ],
          },
        );
      }
      const named = q.namespace !== undefined ? [...new Set(q.namespace.split(','))] : undefined;
      const mayList = (namespace: string) =>
        isAllowed(deps.authorizer, req, { namespace, verb: 'list', resource: 'runs' });
      // A caller allowed cluster-wide who names no namespace reads the newest runs of all of them
      // (one index scan); everyone else, the namespaces it may list (bounded reviews).
      let namespaces: readonly string[] | 'all';
      let excluded = 0;
      if (named === undefined && (await mayList(''))) {
        namespaces = 'all';
      } else {
        const listable = await listableNamespaces(
          mayList,
          named,
          () => deps.vault.runs.namespaces(),
          nameNamespaces('list', 'runs', '/querystring/namespace'),
        );
        namespaces = listable.allowed;
        excluded = listable.excluded;
      }
      const page = await deps.vault.runs
        .list(
          {
            namespaces,
            ...(q.phase !== undefined ? { phase: q.phase } : {}),
            ...(q.name_prefix !== undefined ? { namePrefix: q.name_prefix } : {}),
          },
          { limit, ...(q.cursor !== undefined ? { cursor: q.cursor } : {}) },
        )
        .catch((err: unknown) => {
          if (!(err instanceof VaultError && err.code === 'CURSOR_INVALID')) throw err;
          throw new ProblemError(400, 'CURSOR_INVALID', err.message, {
            errors: [{ pointer: '/querystring/cursor', message: err.message }],
          });
        });
      return {
        items: page.items.map(runListItem),
        next_cursor: page.nextCursor,
        excluded_namespace_count: excluded,
      };
    },
  );
}
