import type { X509Certificate } from 'node:crypto';
import type { FastifyInstance, FastifyRequest } from 'fastify';
import type { BlobStore } from '../../../blob/store.ts';
import { C2PA_MEDIA_TYPE } from '../../../c2pa/index.ts';
import { currentMetadata } from '../../../recorder/index.ts';
import { guardStoredArtifact } from '../../../export/guard.ts';
import { transparencyView } from '../../../transparency/jobs.ts';
import type { RunRecord, Vault } from '../../../vault/index.ts';
import type { Authorizer } from '../../auth/authorizer.ts';
import { requireVisible } from '../../auth/plugin.ts';
import { ProblemError } from '../../problem.ts';
import { DNS_LABEL, DNS_SUBDOMAIN, problemResponses, UUID_PATTERN } from '../../schemas.ts';
import { runPolicyPack } from '../../../policy/index.ts';
import { isViewFormat, VIEW_FORMAT_NAMES } from '../../../aibom/views/index.ts';
import { recordedView } from '../../views/aibom-views.ts';
import type { PolicyPackSource } from '../../sources/policy-packs.ts';
import { typed } from '../../typed.ts';

export interface RunRouteDeps {
  readonly vault: Vault;
  readonly authorizer: Authorizer;
  readonly blobs: BlobStore;
  /** SERVICE_REQUIRE_SIGNED_EXPORTS */
  readonly requireSignedExports: boolean;
  /** CA certificates a C2PA manifest must chain to before an artifact may leave. */
  readonly trustAnchors: readonly X509Certificate[];
  /** Roots of trusted TSAs: a time-stamped manifest is judged at its time-stamp. */
  readonly tsaTrustAnchors?: readonly X509Certificate[];
  /** The PolicyPack resources the run's pack is resolved against (`policy_pack`). */
  readonly policyPacks?: PolicyPackSource;
  /**
   * SERVICE_TRANSPARENCY_WRITER=1: `artifacts.aibom.transparency` is shown (the spec: present only
   * then), as `aibom.meta.json` and the Run's status show it; off, never, even for an AIBOM record a
   * push or an export gave a job.
   */
  readonly transparencyWriter?: boolean;
}

const free = { type: 'object', additionalProperties: true } as const;

export const runDetailSchema = {
  $id: 'RunDetail',
  type: 'object',
  required: ['id', 'namespace', 'name', 'phase', 'spec', 'steps', 'artifacts', 'policy_pack'],
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
    policy_pack: { $ref: 'RunPolicyPack#' },
    created_at: { type: 'string', format: 'date-time' },
    updated_at: { type: 'string', format: 'date-time' },
  },
} as const;

const strings = { type: 'array', items: { type: 'string' } } as const;

/** `policy_pack` of a run: its pack and the PolicyPack resource describing it (docs/policy-packs.md). */
export const runPolicyPackSchema = {
  $id: 'RunPolicyPack',
  type: 'object',
  required: ['name', 'version', 'status', 'declared_guardrails', 'resource', 'missing_guardrails'],
  properties: {
    name: { type: 'string', description: 'the run pack as its records name it (metadata.policy_pack)' },
    version: { type: 'string', description: 'its version (metadata.policy_pack_version)' },
    status: {
      type: 'string',
      enum: ['resolved', 'not_found', 'unavailable'],
      description:
        'resolved: a PolicyPack describes the pack; not_found: none does; unavailable: the PolicyPacks could not be read',
    },
    declared_guardrails: {
      ...strings,
      description: 'guardrails the run declares for its pack, as its AIBOM records them',
    },
    resource: {
      anyOf: [
        {
          type: 'object',
          required: [
            'name',
            'pack',
            'version',
            'description',
            'guardrails',
            'minimum_retention',
            'minimum_retention_text',
            'notice',
            'conflicting',
          ],
          properties: {
            name: { type: 'string', description: 'metadata.name of the PolicyPack' },
            pack: { type: 'string' },
            version: {
              type: ['string', 'null'],
              description: 'null: every version without a resource of its own',
            },
            description: { type: ['string', 'null'] },
            guardrails: { ...strings, description: 'guardrails the pack requires' },
            minimum_retention: { type: 'string', description: 'ISO 8601 duration (P1Y)' },
            minimum_retention_text: { type: 'string', description: 'the same in words' },
            notice: { type: 'string', description: 'the retention notice shown to exporters (plain text)' },
            conflicting: { ...strings, description: 'other PolicyPacks claiming the same pack@version' },
          },
        },
        { type: 'null' },
      ],
    },
    missing_guardrails: { ...strings, description: "the pack's guardrails the run does not declare" },
  },
} as const;

/**
 * The run, if the caller may `get` it; 403 when it may only list runs in its namespace; 404 when
 * it cannot see the namespace, the same 404 (after the same reviews) as for an unknown id.
 *
 * The questions are asked under a cache scope of the id asked for (`run:<id>`): a hidden run and an
 * unknown id both cost two fresh reviews (get, then list), and no answer is reused from, or for,
 * another id or the by-name route. Without the scope, the question about a hidden run (its real
 * namespace and name) was the by-name route's own, so warming `/v1/namespaces/<ns>/runs/<name>`
 * made this route a cache hit for that run's id (a timing oracle telling that the id exists), and
 * the other way round told a run's namespace and name from its id. RBAC still judges the Run's name.
 */
export async function visibleRun(deps: RunRouteDeps, req: FastifyRequest, rawId: string): Promise<RunRecord> {
  const id = rawId.toLowerCase();
  const run = await deps.vault.runs.get(id);
  return requireVisible(
    deps.authorizer,
    req,
    run?.namespace,
    { verb: 'get', resource: 'runs', name: run?.name ?? id, cacheScope: `run:${id}` },
    'run',
    run,
  );
}

/**
 * The run `namespace/name` (the most recent of that name), on the same rule as visibleRun:
 * authorised before the lookup, so whether the name exists is not told to who may not see it.
 */
async function visibleRunByName(
  deps: RunRouteDeps,
  req: FastifyRequest,
  namespace: string,
  name: string,
): Promise<RunRecord> {
  await requireVisible(deps.authorizer, req, namespace, { verb: 'get', resource: 'runs', name }, 'run', true);
  const run = await deps.vault.runs.latest(namespace, name);
  if (!run) throw new ProblemError(404, 'NOT_FOUND', 'run not found');
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

/** The formats an artifact download offers: `aibom` (the stored bytes) and the standard views. */
const FORMATS = ['aibom', ...VIEW_FORMAT_NAMES] as const;

const downloadQuery = {
  type: 'object',
  additionalProperties: false,
  properties: {
    format: {
      type: 'string',
      enum: FORMATS,
      description:
        'aibom (default): the stored AIBOM payload; cyclonedx-1.7 or spdx-3.0.1: its standard view, as recorded (a signed record of its own, docs/aibom.md)',
    },
  },
} as const;

export function runRoutes(fastify: FastifyInstance, deps: RunRouteDeps): void {
  const app = typed(fastify);
  const artifactOf = async (req: FastifyRequest, params: { id: string; kind: string }) => {
    const run = await visibleRun(deps, req, params.id);
    const record = await deps.vault.artifacts.get(run.id, params.kind);
    if (!record) throw new ProblemError(404, 'NOT_FOUND', 'the run has no such artifact yet');
    const artifact = await guardStoredArtifact(deps, record, req.user?.username ?? 'unknown');
    return { run, record, artifact };
  };

  app.get(
    '/v1/runs/:id/artifacts/:kind',
    {
      schema: {
        summary:
          'Download an artifact: the AIBOM bytes, or (format) one of its standard views; blocked without a valid signed C2PA manifest',
        params: artifactParams,
        querystring: downloadQuery,
        response: problemResponses,
      },
    },
    async (req, reply) => {
      // The guard is the AIBOM's, whichever form leaves: a view never leaves when the AIBOM may not.
      const { run, record, artifact } = await artifactOf(req, req.params);
      const format = req.query.format ?? 'aibom';
      if (isViewFormat(format)) {
        const view = await recordedView(deps.vault, currentMetadata(record), format);
        await deps.vault.audit.record({
          actor: req.user?.username ?? 'unknown',
          action: 'artifact.download',
          namespace: run.namespace,
          object: `${record.objectKey}?format=${format}`,
          manifestDigest: artifact.manifestDigest,
          attestationIds: [...artifact.attestationIds, view.attestationId],
        });
        return reply
          .type(view.mediaType)
          .header('digest', `sha-256=${Buffer.from(view.digest.slice(7), 'hex').toString('base64')}`)
          .header('link', `</v1/attestations/${view.attestationId}>; rel="attestation"`)
          .header('x-attestation-id', view.attestationId)
          .header('x-c2pa-manifest-digest', artifact.manifestDigest ?? '')
          .header('x-c2pa-validated-at', artifact.validatedAt)
          .send(view.bytes);
      }
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
        .header('x-c2pa-validated-at', artifact.validatedAt)
        .send(artifact.bytes);
    },
  );

  app.get(
    '/v1/runs/:id/artifacts/:kind/manifest',
    {
      schema: {
        summary: 'The C2PA v1.4 manifest store (sidecar) of an artifact',
        params: artifactParams,
        response: problemResponses,
      },
    },
    async (req, reply) => {
      const { run, record, artifact } = await artifactOf(req, req.params);
      if (!artifact.manifest)
        throw new ProblemError(404, 'NOT_FOUND', 'no C2PA manifest is stored for this artifact');
      // The manifest leaves the service too: audited like the bytes, before it is sent.
      await deps.vault.audit.record({
        actor: req.user?.username ?? 'unknown',
        action: 'artifact.manifest',
        namespace: run.namespace,
        object: record.objectKey,
        manifestDigest: artifact.manifestDigest,
        attestationIds: artifact.attestationIds,
      });
      return reply
        .type(C2PA_MEDIA_TYPE)
        .header('x-c2pa-manifest-digest', artifact.manifestDigest ?? '')
        .send(artifact.manifest);
    },
  );

  app.get(
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

  app.get(
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
    async (req) => runDetail(deps, await visibleRunByName(deps, req, req.params.namespace, req.params.name)),
  );
}

/**
 * The final step of a run: the last to finish in its DAG. Among the finished steps of `status`
 * (Succeeded or Failed), the one with the latest `finishedAt` (by instant: RFC 3339 admits any
 * offset); on a tie, or without times, the one later in spec order, which is a topological order
 * of the DAG (a step may only depend on steps listed before it), so a step never precedes one it
 * depends on. Returns its index in `status`, or -1 when no step finished.
 */
export function finalStepIndex(
  spec: readonly { readonly id: string }[],
  status: readonly { readonly id: string; readonly phase?: string; readonly finishedAt?: string }[],
): number {
  const order = new Map(spec.map((s, i) => [s.id, i]));
  let best = -1;
  let bestKey: [number, number] = [-Infinity, -Infinity];
  status.forEach((s, i) => {
    if (s.phase !== 'Succeeded' && s.phase !== 'Failed') return;
    const at = s.finishedAt !== undefined ? Date.parse(s.finishedAt) : Number.NaN;
    const key: [number, number] = [Number.isNaN(at) ? -Infinity : at, order.get(s.id) ?? -1];
    if (key[0] > bestKey[0] || (key[0] === bestKey[0] && key[1] > bestKey[1])) {
      best = i;
      bestKey = key;
    }
  });
  return best;
}

/** The run detail: the run, its steps, and `artifacts` (with the AIBOM's transparency state). */
async function runDetail(deps: RunRouteDeps, run: RunRecord): Promise<Record<string, unknown>> {
  const id = run.id;
  const artifacts: Record<string, Record<string, unknown>> = {};
  for (const a of await deps.vault.artifacts.list(id)) artifacts[a.kind] = currentMetadata(a);
  // The transparency entry changes (queued → published) while the record is immutable: joined here,
  // only with the writer on (what the controller writes beside the blob and on the Run, too).
  const aibomAttestation = artifacts.aibom?.aibom_attestation_id;
  if (deps.transparencyWriter === true && typeof aibomAttestation === 'string') {
    const job = await deps.vault.transparencyJobs.get({ attestationId: aibomAttestation });
    // The same entry the controller writes on the Run and beside the blob (issue 22 item 2: the
    // three agree), so without the shared log's position, whoever reads: a chain reader finds
    // `log_index` on the AIBOM's record (src/http/views/envelope.ts).
    if (job) artifacts.aibom!.transparency = transparencyView(job, { position: false });
  }
  const steps = (run.status.steps ?? []).map((s) => ({ ...s })) as Record<string, unknown>[];
  // The final step's output (or error) references the BOM recorded for the run (spec).
  const aibom = artifacts.aibom;
  const final = aibom !== undefined ? finalStepIndex(run.spec.steps, run.status.steps ?? []) : -1;
  if (aibom !== undefined && final >= 0) {
    const step = steps[final]!;
    const ref = { aibom: { $ref: '#/artifacts/aibom', digest: aibom.digest, key: aibom.key } };
    if (step.phase === 'Failed') step.error = { message: step.error ?? null, artifacts: ref };
    else step.output = { value: step.output ?? null, artifacts: ref };
  }
  return {
    id: run.id,
    namespace: run.namespace,
    name: run.name,
    phase: run.phase,
    spec: run.spec,
    steps,
    artifacts,
    policy_pack: runPolicyPack(run.spec, await deps.policyPacks?.list()),
    created_at: run.createdAt.toISOString(),
    updated_at: run.updatedAt.toISOString(),
  };
}
