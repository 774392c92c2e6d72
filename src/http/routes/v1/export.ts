import type { FastifyInstance } from 'fastify';
import { TAR_MEDIA_TYPE } from '../../../export/layout.ts';
import { exportEvidence, exportSelection, type ExportDeps } from '../../../export/service.ts';
import { problemResponses, queryBodySchema, UUID_PATTERN } from '../../schemas.ts';
import { typed, type FromSchema } from '../../typed.ts';

/**
 * The export routes: their schemas and registration. What an export does (who may export what,
 * the checks, the audit trail, the streamed bundle) is src/export/service.ts.
 */

/** Explicit ids one request may name. */
export const MAX_EXPORT_IDS = 1000;

const { limit: _limit, cursor: _cursor, ...filterProperties } = queryBodySchema.properties;

export const exportBodySchema = {
  $id: 'ExportRequest',
  type: 'object',
  additionalProperties: false,
  description:
    'The query filters (ANDed, as in POST /v1/attestations/query) and/or explicit ids; the bundle holds every matching record the caller may export, with what it references.',
  properties: {
    ...filterProperties,
    ids: {
      type: 'array',
      minItems: 1,
      maxItems: MAX_EXPORT_IDS,
      uniqueItems: true,
      items: { type: 'string', pattern: UUID_PATTERN },
      description: 'only these attestations (each must exist in a namespace the caller may export)',
    },
    gzip: { type: 'boolean', description: 'answer application/gzip (the same tar, compressed)' },
    scitt: {
      type: 'boolean',
      description:
        'enqueue a SCITT posting for every selected record that has none yet; the job ids are in the segment indexes and in each envelope.json',
    },
  },
} as const;

/** The body of POST /v1/attestations/export, as its schema admits it. */
export type ExportBody = FromSchema<typeof exportBodySchema>;

const tarResponse = {
  200: {
    description:
      'the bundle (application/x-tar, or application/gzip with gzip: true); layout in docs/export.md',
    content: { [TAR_MEDIA_TYPE]: { schema: { type: 'string', format: 'binary' } } },
  },
} as const;

export function exportRoutes(fastify: FastifyInstance, deps: ExportDeps): void {
  const app = typed(fastify);
  app.post(
    '/v1/attestations/export',
    {
      schema: {
        summary:
          'Export a bundle (tar) of attestations and everything they reference, for offline verification',
        body: { $ref: 'ExportRequest#' },
        response: {
          ...tarResponse,
          ...problemResponses,
          409: { $ref: 'Problem#' },
          413: { $ref: 'Problem#' },
          429: { $ref: 'Problem#' },
          422: { $ref: 'Problem#' },
        },
      },
    },
    async (req, reply) => exportSelection(deps, req, reply, req.body ?? {}),
  );

  app.get(
    '/v1/runs/:id/artifacts/:kind/evidence',
    {
      schema: {
        summary:
          'Evidence of one artifact (service-ctl audit export, the UI "Export with receipts" button): the artifact, its C2PA manifest, its attestation with receipts, the capability chain, as an export bundle',
        params: {
          type: 'object',
          required: ['id', 'kind'],
          properties: {
            id: { type: 'string', pattern: UUID_PATTERN },
            kind: { type: 'string', enum: ['aibom'] },
          },
        },
        querystring: {
          type: 'object',
          additionalProperties: false,
          properties: { gzip: { type: 'string', enum: ['true', 'false'] } },
        },
        response: {
          ...tarResponse,
          ...problemResponses,
          409: { $ref: 'Problem#' },
          429: { $ref: 'Problem#' },
        },
      },
    },
    async (req, reply) =>
      exportEvidence(deps, req, reply, {
        runId: req.params.id,
        kind: req.params.kind,
        gzip: req.query.gzip === 'true',
      }),
  );
}
