import { Readable } from 'node:stream';
import type { FastifyInstance, FastifyRequest } from 'fastify';
import type { AttestationFilter, Vault } from '../../../vault/index.ts';
import { StreamDigest } from '../../../attest/index.ts';
import { isAllowed, requireVisible } from '../../auth/plugin.ts';
import type { Authorizer } from '../../auth/authorizer.ts';
import { listableNamespaces } from '../../auth/namespaces.ts';
import {
  attestationPage,
  checkedStatement,
  ndjsonLine,
  sendBody,
  withJob,
  type ApiEnvelope,
  TENANT,
  type Audience,
} from '../../views/envelope.ts';
import { audienceOf } from '../../auth/audience.ts';
import type { Transparency } from '../../../transparency/setup.ts';
import { transparencyView, type TransparencyJob } from '../../../transparency/jobs.ts';
import type { StoredAttestation } from '../../../vault/index.ts';
import { createBatchLoader } from '../../../vault/batch-loader.ts';
import { resolveCapabilityFilter } from '../../../capability/filter.ts';
import { ProblemError } from '../../problem.ts';
import { retiredRecordNote } from './retired.ts';
import {
  envelopeSchema,
  problemResponses,
  queryBodySchema,
  queryPageSchema,
  UUID_V7_PATTERN,
} from '../../schemas.ts';
import { typed, type FromSchema, type TypedApp } from '../../typed.ts';

export interface AttestationRouteDeps {
  readonly vault: Vault;
  readonly authorizer: Authorizer;
  readonly transparency?: Transparency;
  /** Distinct namespaces holding records (for callers allowed cluster-wide). */
  readonly listNamespaces: () => Promise<string[]>;
}

/** The body of POST /v1/attestations/query, as its schema (queryBodySchema) admits it. */
export type QueryBody = FromSchema<typeof queryBodySchema>;

/**
 * The vault filter of a query body. `capability` is the capability filter already resolved by
 * resolveCapabilityFilter (a token is checked against the keys of the namespaces the caller reads).
 */
export function toFilter(body: QueryBody, namespaces: string[], capability?: string): AttestationFilter {
  const from = body.from !== undefined ? new Date(body.from) : undefined;
  const to = body.to !== undefined ? new Date(body.to) : undefined;
  if (from && to && from.getTime() >= to.getTime()) {
    throw new ProblemError(400, 'INVALID_TIME_WINDOW', '`from` must be before `to`', {
      errors: [{ pointer: '/body/from', message: 'must be before /body/to' }],
    });
  }
  return {
    namespaces,
    ...(body.subject !== undefined ? { subject: body.subject } : {}),
    ...(body.run_id !== undefined ? { runId: body.run_id.toLowerCase() } : {}),
    ...(body.step_id !== undefined ? { stepId: body.step_id } : {}),
    ...(body.artifact_digest !== undefined ? { artifactDigest: body.artifact_digest } : {}),
    ...(body.policy_pack !== undefined ? { policyPack: body.policy_pack.name } : {}),
    ...(body.policy_pack?.version !== undefined ? { policyVersion: body.policy_pack.version } : {}),
    ...(capability !== undefined ? { capabilityTokenId: capability } : {}),
    ...(body.kind !== undefined ? { kind: body.kind } : {}),
    ...(from ? { from } : {}),
    ...(to ? { to } : {}),
  };
}

function wantsNdjson(req: FastifyRequest): boolean {
  return (req.headers.accept ?? '').split(',').some((t) => t.trim().startsWith('application/x-ndjson'));
}

/** Envelopes with their `transparency` field: the SCITT job id while queued, the receipt once published. */
async function withTransparency(
  deps: AttestationRouteDeps,
  records: readonly StoredAttestation[],
  audience: Audience,
): Promise<ApiEnvelope[]> {
  const jobs = await deps.vault.transparencyJobs.getByAttestation(records.map((r) => r.id));
  return records.map((r) => withJob(r, jobs.get(r.id), audience));
}

/** A record with its transparency job (if any), as GET /v1/attestations/{id} serves it. */
interface LoadedRecord {
  readonly record: StoredAttestation;
  readonly job: TransparencyJob | undefined;
}

const UUID_V7 = new RegExp(UUID_V7_PATTERN);

export function attestationRoutes(fastify: FastifyInstance, deps: AttestationRouteDeps): void {
  const app = typed(fastify);
  // Concurrent GETs share their reads: one query for the records, one for their jobs, per batch.
  const records = createBatchLoader<LoadedRecord>(async (ids) => {
    // Both by the requested ids (the route's schema admits UUIDv7 only), so the two queries run
    // side by side on two connections.
    const [found, jobs] = await Promise.all([
      deps.vault.attestations.getMany(ids),
      deps.vault.transparencyJobs.getByAttestation(ids.filter((id) => UUID_V7.test(id))),
    ]);
    // The body is built per request, after authorisation: a record that fails its label check
    // (RECORD_TAMPERED) fails only the requests allowed to see it, not the whole batch.
    return new Map([...found].map(([id, record]) => [id, { record, job: jobs.get(id) }]));
  });

  const retiredNote = retiredRecordNote(deps.vault.partitions);

  app.get(
    '/v1/attestations/:id',
    {
      schema: {
        summary: 'One attestation envelope',
        params: {
          type: 'object',
          required: ['id'],
          properties: { id: { type: 'string', pattern: UUID_V7_PATTERN, description: 'attestation UUIDv7' } },
        },
        response: { 200: { $ref: 'AttestationEnvelope#' }, ...problemResponses },
      },
    },
    async (req, reply) => {
      const id = req.params.id.toLowerCase();
      const stored = await records.load(id);
      // Hidden and unknown ids take the same path (visibilityOf): same reviews, same 404.
      let loaded: LoadedRecord;
      try {
        loaded = await requireVisible(
          deps.authorizer,
          req,
          stored?.record.namespace,
          { verb: 'get', resource: 'attestations', name: id },
          'attestation',
          stored,
        );
      } catch (err) {
        // Not in the live vault: an id of a retired month says where such records went (the same
        // words for every id of that month, existing or not: retired.ts).
        const note =
          stored === undefined && err instanceof ProblemError && err.status === 404
            ? await retiredNote(id)
            : undefined;
        if (note !== undefined) throw new ProblemError(404, 'NOT_FOUND', `attestation not found: ${note}`);
        throw err;
      }
      return sendBody(reply, withJob(loaded.record, loaded.job, await audienceOf(deps.authorizer, req)));
    },
  );

  queryRoute(app, deps);
  scittRoute(app, deps);
}

/** POST /v1/attestations/query: the records matching a filter, in keyset pages (or NDJSON). */
function queryRoute(app: TypedApp, deps: AttestationRouteDeps): void {
  app.post(
    '/v1/attestations/query',
    {
      schema: {
        summary: 'Filter attestations; keyset pages, or NDJSON with Accept: application/x-ndjson',
        body: { $ref: 'AttestationQuery#' },
        response: { 200: { $ref: 'AttestationPage#' }, ...problemResponses },
      },
    },
    async (req, reply) => {
      const body = req.body ?? {};
      const { allowed, excluded } = await listableNamespaces(
        (namespace) => isAllowed(deps.authorizer, req, { namespace, verb: 'list', resource: 'attestations' }),
        body.namespaces,
        deps.listNamespaces,
      );
      // A token is checked against the keys of the namespaces the caller can read (src/capability/filter.ts).
      const capability =
        body.capability_token !== undefined
          ? await resolveCapabilityFilter(body.capability_token, allowed, deps.vault.capabilityGrants)
          : undefined;
      const filter = toFilter(body, allowed, capability);
      // Whether the caller sees positions: asked once there is a record to show (an empty answer
      // or a refusal costs no review for it).
      let audience: Audience | undefined;
      const audienceNow = async (): Promise<Audience> =>
        (audience ??= await audienceOf(deps.authorizer, req));
      reply.header('x-excluded-namespace-count', String(excluded));
      if (wantsNdjson(req)) {
        if (body.cursor !== undefined || body.limit !== undefined) {
          throw new ProblemError(
            400,
            'VALIDATION_FAILED',
            'NDJSON streams the whole result: omit limit and cursor',
            {
              errors: [
                {
                  pointer: body.cursor !== undefined ? '/body/cursor' : '/body/limit',
                  message: 'not with NDJSON',
                },
              ],
            },
          );
        }
        const records = deps.vault.attestations.stream(filter);
        // Transparency state is joined per batch of 500 records: one query each, memory stays flat.
        // The trailer (count and digest of the lines) is written only after the last record: a
        // stream that fails or is cut midway ends without it (src/attest/stream.ts).
        async function* lines(): AsyncGenerator<string> {
          const digest = new StreamDigest();
          let batch: StoredAttestation[] = [];
          const flush = async () => {
            const text = (await withTransparency(deps, batch, await audienceNow())).map(ndjsonLine).join('');
            digest.add(text, batch.length);
            return text;
          };
          for await (const r of records) {
            batch.push(r);
            if (batch.length === 500) {
              yield await flush();
              batch = [];
            }
          }
          if (batch.length > 0) yield await flush();
          yield digest.trailer();
        }
        return reply.type('application/x-ndjson').send(Readable.from(lines(), { objectMode: false }));
      }
      // The page's transparency jobs come in the page query itself (one round trip, not two).
      const page = await deps.vault.attestations.query(filter, {
        ...(body.limit !== undefined ? { limit: body.limit } : {}),
        ...(body.cursor !== undefined ? { cursor: body.cursor } : {}),
        withTransparencyJobs: true,
      });
      const jobs = page.jobs ?? [];
      const seen = page.items.length > 0 ? await audienceNow() : TENANT;
      return sendBody(
        reply,
        attestationPage(
          page.items.map((record, i) => withJob(record, jobs[i], seen)),
          page.nextCursor,
          excluded,
        ),
      );
    },
  );
}

/** POST /v1/attestations/scitt: one record pushed to the transparency backend now. */
function scittRoute(app: TypedApp, deps: AttestationRouteDeps): void {
  app.post(
    '/v1/attestations/scitt',
    {
      schema: {
        summary: 'Push one envelope to the configured SCITT backend; returns the receipt and log position',
        body: {
          type: 'object',
          additionalProperties: false,
          required: ['id'],
          properties: { id: { type: 'string', pattern: UUID_V7_PATTERN, description: 'attestation UUIDv7' } },
        },
        response: {
          200: { $ref: 'ScittResult#' },
          202: { $ref: 'ScittResult#' },
          ...problemResponses,
        },
      },
    },
    async (req, reply) => {
      const id = req.body.id.toLowerCase();
      const stored = await deps.vault.attestations.get(id);
      const record = await requireVisible(
        deps.authorizer,
        req,
        stored?.namespace,
        { verb: 'create', resource: 'attestations', subresource: 'scitt', name: id },
        'attestation',
        stored,
      );
      // Authorised by the stored namespace: the record must be signed with it (RECORD_TAMPERED).
      checkedStatement(record);
      if (!deps.transparency) {
        throw new ProblemError(503, 'UPSTREAM_UNAVAILABLE', 'no transparency backend is configured', {
          headers: { 'retry-after': '60' },
        });
      }
      const job = await deps.transparency.publisher.publishNow(record.id);
      const view = transparencyView(job, { position: true });
      // The spec's common fields are in every answer of the attestation endpoints, this one too.
      const envelope = withJob(record, job, await audienceOf(deps.authorizer, req));
      return reply.code(job.state === 'published' ? 200 : 202).send({
        attestation_id: record.id,
        status: job.state,
        ...(job.entryId !== null ? { entry_id: job.entryId } : {}),
        ...(job.logIndex !== null ? { log_index: job.logIndex } : {}),
        ...(view.receipt !== undefined ? { receipt: view.receipt } : {}),
        predicate_type: envelope.predicate_type,
        predicate: envelope.predicate,
        ...(envelope.capability_tokens !== undefined
          ? { capability_tokens: envelope.capability_tokens }
          : {}),
        c2pa_manifest_ref: envelope.c2pa_manifest_ref,
        transparency: envelope.transparency,
      });
    },
  );
}

const scittResultSchema = {
  $id: 'ScittResult',
  type: 'object',
  required: ['attestation_id', 'status', 'predicate_type', 'predicate', 'c2pa_manifest_ref', 'transparency'],
  properties: {
    attestation_id: { type: 'string' },
    status: { type: 'string', enum: ['queued', 'published'] },
    entry_id: { type: 'string' },
    log_index: { type: 'integer', description: 'position of the entry in the log' },
    receipt: { type: 'string', description: 'COSE receipt (base64), RFC9162_SHA256 inclusion proof' },
    // The spec's common fields, as GET /v1/attestations/{id} has them.
    predicate_type: envelopeSchema.properties.predicate_type,
    predicate: envelopeSchema.properties.predicate,
    capability_tokens: envelopeSchema.properties.capability_tokens,
    c2pa_manifest_ref: envelopeSchema.properties.c2pa_manifest_ref,
    transparency: { $ref: 'TransparencyView#' },
  },
} as const;

export const attestationSchemas = [envelopeSchema, queryBodySchema, queryPageSchema, scittResultSchema];
