import type { X509Certificate } from 'node:crypto';
import type { FastifyInstance, FastifyRequest } from 'fastify';
import type { BlobStore } from '../../../blob/store.ts';
import { C2PA_MEDIA_TYPE } from '../../../c2pa/index.ts';
import { loadGuardedArtifact } from '../../export-guard.ts';
import { transparencyView } from '../../../transparency/jobs.ts';
import type { RunRecord, Vault } from '../../../vault/index.ts';
import type { Authorizer } from '../../auth/authorizer.ts';
import { isAllowed } from '../../auth/plugin.ts';
import { ProblemError } from '../../problem.ts';
import { DNS_LABEL, DNS_SUBDOMAIN, problemResponses, UUID_PATTERN } from '../../schemas.ts';

export interface RunRouteDeps {
  readonly vault: Vault;
  readonly authorizer: Authorizer;
  readonly blobs: BlobStore;
  /** SERVICE_REQUIRE_SIGNED_EXPORTS */
  readonly requireSignedExports: boolean;
  /** CA certificates a C2PA manifest must chain to before an artifact may leave. */
  readonly trustAnchors: readonly X509Certificate[];
}

const free = { type: 'object', additionalProperties: true } as const;

export const runDetailSchema = {
  $id: 'RunDetail',
  type: 'object',
  required: ['id', 'namespace', 'name', 'phase', 'spec', 'steps', 'artifacts'],
  properties: {
    id: { type: 'string', description: 'run id (the Run resource UID)' },
    namespace: { type: 'string' },
    name: { type: 'string' },
    phase: { type: ['string', 'null'] },
    spec: free,
    steps: { type: 'array', items: free },
    artifacts: {
      type: 'object',
      description: 'artifact metadata records as stored with the objects; `aibom` is the AIBOM record',
      additionalProperties: free,
    },
    created_at: { type: 'string', format: 'date-time' },
    updated_at: { type: 'string', format: 'date-time' },
  },
} as const;

/**
 * Whether the caller may `get` the run `namespace/name`: yes, or 403 when it may only `list` runs
 * there, or `notFound` when it cannot even see them (so existence does not leak).
 */
async function authorizeRun(
  deps: RunRouteDeps,
  req: FastifyRequest,
  at: { namespace: string; name: string },
  notFound: ProblemError,
): Promise<void> {
  const attrs = { namespace: at.namespace, resource: 'runs' as const, name: at.name };
  if (await isAllowed(deps.authorizer, req, { ...attrs, verb: 'get' })) return;
  if (await isAllowed(deps.authorizer, req, { ...attrs, verb: 'list' })) {
    throw new ProblemError(403, 'FORBIDDEN', `not allowed to get runs in namespace ${at.namespace}`);
  }
  throw notFound;
}

/** The run, if the caller may `get` runs in its namespace; 404 when it cannot even see it. */
async function visibleRun(deps: RunRouteDeps, req: FastifyRequest, rawId: string): Promise<RunRecord> {
  const id = rawId.toLowerCase();
  const run = await deps.vault.runs.get(id);
  const notFound = new ProblemError(404, 'NOT_FOUND', `run ${id} not found`);
  if (!run) throw notFound;
  await authorizeRun(deps, req, run, notFound);
  return run;
}

const artifactParams = {
  type: 'object',
  required: ['id', 'kind'],
  properties: {
    id: { type: 'string', pattern: UUID_PATTERN },
    kind: { type: 'string', enum: ['aibom'] },
  },
} as const;

export function runRoutes(app: FastifyInstance, deps: RunRouteDeps): void {
  const artifactOf = async (req: FastifyRequest, params: { id: string; kind: string }) => {
    const run = await visibleRun(deps, req, params.id);
    const record = await deps.vault.artifacts.get(run.id, params.kind);
    if (!record) throw new ProblemError(404, 'NOT_FOUND', `run ${run.id} has no ${params.kind} yet`);
    const meta = record.metadata as { key: string; c2pa_manifest?: { key?: string; digest?: string } };
    const artifact = await loadGuardedArtifact(deps.blobs, meta, {
      required: deps.requireSignedExports,
      trustAnchors: deps.trustAnchors,
    });
    return { run, record, artifact };
  };

  app.get<{ Params: { id: string; kind: string } }>(
    '/v1/runs/:id/artifacts/:kind',
    {
      schema: {
        summary: 'Download an artifact (the AIBOM bytes); blocked without a valid signed C2PA manifest',
        params: artifactParams,
        response: problemResponses,
      },
    },
    async (req, reply) => {
      const { run, record, artifact } = await artifactOf(req, req.params);
      await deps.vault.audit.record({
        actor: req.user?.username ?? 'unknown',
        action: 'artifact.download',
        namespace: run.namespace,
        object: record.objectKey,
        manifestDigest: artifact.manifestDigest,
        attestationIds: artifact.attestationIds,
      });
      const manifestUrl = `/v1/runs/${run.id}/artifacts/${req.params.kind}/manifest`;
      return reply
        .type('application/json')
        .header('digest', `sha-256=${Buffer.from(record.digest.slice(7), 'hex').toString('base64')}`)
        .header('link', `<${manifestUrl}>; rel="c2pa-manifest"; type="${C2PA_MEDIA_TYPE}"`)
        .header('x-c2pa-manifest-digest', artifact.manifestDigest ?? '')
        .send(artifact.bytes);
    },
  );

  app.get<{ Params: { id: string; kind: string } }>(
    '/v1/runs/:id/artifacts/:kind/manifest',
    {
      schema: {
        summary: 'The C2PA v1.4 manifest store (sidecar) of an artifact',
        params: artifactParams,
        response: problemResponses,
      },
    },
    async (req, reply) => {
      const { artifact } = await artifactOf(req, req.params);
      if (!artifact.manifest)
        throw new ProblemError(404, 'NOT_FOUND', 'no C2PA manifest is stored for this artifact');
      return reply.type(C2PA_MEDIA_TYPE).send(artifact.manifest);
    },
  );

  app.get<{ Params: { id: string } }>(
    '/v1/runs/:id',
    {
      schema: {
        summary: 'A run with its steps and the top-level `artifacts` object (artifacts.aibom)',
        params: {
          type: 'object',
          required: ['id'],
          properties: { id: { type: 'string', pattern: UUID_PATTERN, description: 'run UUID' } },
        },
        response: { 200: { $ref: 'RunDetail#' }, ...problemResponses },
      },
    },
    async (req) => runDetail(deps, await visibleRun(deps, req, req.params.id)),
  );

  app.get<{ Params: { namespace: string; name: string } }>(
    '/v1/namespaces/:namespace/runs/:name',
    {
      schema: {
        summary:
          'The run named namespace/name (the most recent one of that name), as GET /v1/runs/{id} returns it',
        params: {
          type: 'object',
          required: ['namespace', 'name'],
          properties: {
            namespace: { type: 'string', pattern: DNS_LABEL, maxLength: 63 },
            name: { type: 'string', pattern: DNS_SUBDOMAIN, maxLength: 253 },
          },
        },
        response: { 200: { $ref: 'RunDetail#' }, ...problemResponses },
      },
    },
    async (req) => {
      const { namespace, name } = req.params;
      const notFound = new ProblemError(404, 'NOT_FOUND', `run ${namespace}/${name} not found`);
      // Authorised before the lookup: whether the name exists is not told to who may not see it.
      await authorizeRun(deps, req, { namespace, name }, notFound);
      const run = await deps.vault.runs.latest(namespace, name);
      if (!run) throw notFound;
      return runDetail(deps, run);
    },
  );
}

/** The run detail: the run, its steps, and `artifacts` (with the AIBOM's transparency state). */
async function runDetail(deps: RunRouteDeps, run: RunRecord): Promise<Record<string, unknown>> {
  const id = run.id;
  const artifacts: Record<string, Record<string, unknown>> = {};
  for (const a of await deps.vault.artifacts.list(id)) artifacts[a.kind] = { ...a.metadata };
  // The transparency entry changes (queued → published) while the record is immutable: joined here.
  const aibomAttestation = artifacts.aibom?.aibom_attestation_id;
  if (typeof aibomAttestation === 'string') {
    const job = await deps.vault.transparencyJobs.get({ attestationId: aibomAttestation });
    if (job) artifacts.aibom!.transparency = transparencyView(job);
  }
  const steps = (run.status.steps ?? []).map((s) => ({ ...s })) as Record<string, unknown>[];
  // The final step's output (or error) points at the BOM recorded for the run.
  const aibom = artifacts.aibom;
  const last = steps.at(-1);
  if (aibom && last) {
    last.artifacts = { aibom: { $ref: '#/artifacts/aibom', digest: aibom.digest, key: aibom.key } };
  }
  return {
    id: run.id,
    namespace: run.namespace,
    name: run.name,
    phase: run.phase,
    spec: run.spec,
    steps,
    artifacts,
    created_at: run.createdAt.toISOString(),
    updated_at: run.updatedAt.toISOString(),
  };
}
