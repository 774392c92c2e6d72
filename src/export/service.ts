import { randomUUID } from 'node:crypto';
import { Readable, pipeline } from 'node:stream';
import { createGzip } from 'node:zlib';
import type { X509Certificate } from 'node:crypto';
import type { FastifyReply, FastifyRequest } from 'fastify';
import type { BlobStore } from '../blob/store.ts';
import { resolveCapabilityFilter } from '../capability/filter.ts';
import type { LogKey } from '../cose/key.ts';
import { audienceOf } from '../http/auth/audience.ts';
import type { Authorizer } from '../http/auth/authorizer.ts';
import { listableNamespaces } from '../http/auth/namespaces.ts';
import { isAllowed } from '../http/auth/plugin.ts';
import { ProblemError } from '../http/problem.ts';
import { toFilter } from '../http/routes/v1/attestations.ts';
import type { ExportBody } from '../http/routes/v1/export.ts';
import { visibleRun } from '../http/routes/v1/runs.ts';
import { signatureMetadata, type KeySigner } from '../signing/index.ts';
import type { AttestationFilter, AuditEntry, Vault } from '../vault/index.ts';
import { DEFAULT_CHUNK_SIZE, writeBundle, type FinalReport, type SegmentReport } from './bundle.ts';
import { guardStoredArtifact } from './guard.ts';
import { TAR_GZIP_MEDIA_TYPE, TAR_MEDIA_TYPE } from './layout.ts';
import { describeVerdict, ExportPace, paceHeader, type PaceLimits } from './pace.ts';
import type { ExportSlots } from './slots.ts';
import { exportSource } from './source.ts';
import { recordProofs } from '../witness/proofs.ts';

/**
 * The export service of the API (POST /v1/attestations/export, GET
 * /v1/runs/{id}/artifacts/{kind}/evidence and the UI's export dialog): who may export what, the
 * checks that can refuse an export before its first byte, the audit trail, and the bundle streamed
 * to the client under a slot and an idle watchdog. The routes (src/http/routes/v1/export.ts) only
 * declare the schemas and call these.
 */

export interface ExportDeps {
  readonly vault: Vault;
  readonly authorizer: Authorizer;
  readonly blobs: BlobStore;
  readonly listNamespaces: () => Promise<string[]>;
  readonly requireSignedExports: boolean;
  readonly trustAnchors: readonly X509Certificate[];
  /** Roots of trusted TSAs: a time-stamped manifest is judged at its time-stamp. */
  readonly tsaTrustAnchors?: readonly X509Certificate[];
  /** Signs each bundle's own C2PA manifest (the service signer); without it exports answer 503. */
  readonly signer?: KeySigner | (() => KeySigner);
  /** The transparency logs' keys (and chains) whose receipts a bundle may hold. */
  readonly logKeys: () => Promise<{ key: LogKey; chainPem?: string }[]>;
  /** Records the service's own keys in the key store before anything signed by them leaves. */
  readonly ensureServiceKeys: () => Promise<void>;
  /** Largest selection (attestations) one export may hold. */
  readonly exportLimit: number;
  /** Exports streaming at once (EXPORT_CONCURRENCY). */
  readonly exportSlots: ExportSlots;
  /** The pace a client must keep to hold its slot (src/export/pace.ts, docs/export.md). */
  readonly exportPace: PaceLimits;
  /** `name/version` of the service, recorded in every index and manifest. */
  readonly claimGenerator: string;
}

/** Default of {@link ExportDeps.exportLimit} (EXPORT_MAX_ATTESTATIONS). */
export const DEFAULT_EXPORT_LIMIT = 1_000_000;
/** Default idle limit of {@link ExportDeps.exportPace}: a minute without taking a byte. */
export const DEFAULT_EXPORT_IDLE_MS = 60_000;
/**
 * Namespaces the caller may export from: readable (`list` attestations) and `create` on
 * `attestations/export` there. Asked-for namespaces it may not use are only counted.
 */
async function exportableNamespaces(
  deps: ExportDeps,
  req: FastifyRequest,
  asked: readonly string[] | undefined,
): Promise<{ allowed: string[]; withheld: number }> {
  // The same bounded review cost as a query (auth/namespaces.ts): cluster-wide first, at most
  // MAX_QUERY_NAMESPACES one by one.
  const { allowed: readable, excluded } = await listableNamespaces(
    (namespace) => isAllowed(deps.authorizer, req, { namespace, verb: 'list', resource: 'attestations' }),
    asked,
    deps.listNamespaces,
  );
  const exportIn = (namespace: string) =>
    isAllowed(deps.authorizer, req, {
      namespace,
      verb: 'create',
      resource: 'attestations',
      subresource: 'export',
    });
  let allowed: string[];
  if (await exportIn('')) {
    allowed = readable;
  } else {
    const decisions = await Promise.all(readable.map(async (ns) => [ns, await exportIn(ns)] as const));
    allowed = decisions.filter(([, ok]) => ok).map(([ns]) => ns);
    if (allowed.length === 0 && readable.length > 0) {
      throw new ProblemError(403, 'FORBIDDEN', 'exporting needs create on attestations/export');
    }
  }
  return {
    allowed: [...allowed].sort(),
    withheld: (asked === undefined ? 0 : excluded) + readable.length - allowed.length,
  };
}

/**
 * `scitt: true` publishes records, which `POST /v1/attestations/scitt` allows only with `create` on
 * `attestations/scitt` in the record's namespace: an export may enqueue postings only where the
 * caller holds that too, in every namespace it exports (refused with 403 before any work
 * otherwise, naming no namespace). The reviews are bounded as the export's own: the cluster-wide
 * question first, then one per namespace exported (already bounded by listableNamespaces).
 */
async function requireScittIn(
  deps: ExportDeps,
  req: FastifyRequest,
  namespaces: readonly string[],
): Promise<void> {
  const scittIn = (namespace: string) =>
    isAllowed(deps.authorizer, req, {
      namespace,
      verb: 'create',
      resource: 'attestations',
      subresource: 'scitt',
    });
  if (await scittIn('')) return;
  const decisions = await Promise.all(namespaces.map(scittIn));
  if (decisions.some((ok) => !ok)) {
    throw new ProblemError(
      403,
      'FORBIDDEN',
      'scitt: true needs create on attestations/scitt in every namespace exported (name the namespaces to export, or leave scitt out)',
    );
  }
}

interface StreamPlan {
  readonly filter: AttestationFilter;
  readonly selection: Record<string, unknown>;
  readonly gzip: boolean;
  readonly scitt: boolean;
  /** Audit action of the rows this export writes. */
  readonly action: string;
  readonly object: string;
  readonly filename: string;
  readonly withheld: number;
}

/**
 * Everything that can refuse an export happens here, before the first byte: the signer, the size
 * of the selection (counted up to the limit), and the signed-export guard over every AIBOM in it.
 * Then the bundle streams; the audit log is written ahead of each segment, and an export the client
 * abandons is recorded as aborted.
 */
async function streamExport(
  deps: ExportDeps,
  req: FastifyRequest,
  reply: FastifyReply,
  plan: StreamPlan,
): Promise<FastifyReply> {
  // The signer of this moment (it may have been renewed since start), for the whole bundle.
  const configured = typeof deps.signer === 'function' ? deps.signer() : deps.signer;
  if (configured?.certificateChain === undefined) {
    throw new ProblemError(
      503,
      'UPSTREAM_UNAVAILABLE',
      'no service signer is configured to sign export bundles',
      {
        headers: { 'retry-after': '60' },
      },
    );
  }
  // A slot before any work, held until the response stream closes (below), however it ends.
  const release = deps.exportSlots.acquire(req.user?.username ?? 'unknown');
  try {
    return await planned(deps, req, reply, plan, configured, release);
  } catch (err) {
    release();
    throw err;
  }
}

async function planned(
  deps: ExportDeps,
  req: FastifyRequest,
  reply: FastifyReply,
  plan: StreamPlan,
  signer: KeySigner,
  release: () => void,
): Promise<FastifyReply> {
  const { count, until } = await deps.vault.attestations.selectionSize(plan.filter, deps.exportLimit);
  if (count === 0) {
    throw new ProblemError(
      422,
      'EMPTY_SELECTION',
      plan.withheld > 0
        ? `nothing to export: no record matches in the namespaces you may export (${plan.withheld} asked namespace(s) withheld)`
        : 'nothing to export: no record matches the selection',
    );
  }
  if (count > deps.exportLimit) {
    throw new ProblemError(
      413,
      'EXPORT_TOO_LARGE',
      `the selection holds more than ${deps.exportLimit} attestations (the export limit): narrow it, e.g. with from/to`,
    );
  }
  if (deps.requireSignedExports && (plan.filter.kind === undefined || plan.filter.kind === 'aibom')) {
    for await (const r of deps.vault.attestations.stream({ ...plan.filter, kind: 'aibom' }, { until })) {
      const artifact = r.runId !== null ? await deps.vault.artifacts.get(r.runId, 'aibom') : null;
      if (artifact === null) continue;
      await guardStoredArtifact(deps, artifact, req.user?.username ?? 'unknown', true);
    }
  }
  await deps.ensureServiceKeys();
  const logKeys = await deps.logKeys();
  const actor = req.user?.username ?? 'unknown';
  const audience = await audienceOf(deps.authorizer, req);
  // One checkpoint of the vault log for the whole export: the newest a witness cosigned (else the
  // newest); each record it covers carries its tlog-proof (src/witness/proofs.ts).
  const tlogProofs = await recordProofs(deps.vault);
  const tlogKeys = tlogProofs === null ? [] : await deps.vault.tlog.vkeys('vault');
  const source = exportSource(deps, plan.filter, {
    until,
    enqueueScitt: plan.scitt,
    actor,
    audience,
    ...(tlogProofs !== null ? { tlogProofs } : {}),
  });
  // Unique and meaningless: Fastify's request id is a per-process counter (traffic, repeats).
  const exportId = randomUUID();
  const log = req.log;
  const trail = auditTrail(deps.vault, plan, actor, exportId);
  /** Why the watchdog below cut the response, if it did (for the audit row). */
  let closedFor: string | undefined;
  async function* bytes(): AsyncGenerator<Buffer> {
    let finished = false;
    try {
      yield* writeBundle({
        segments: source.segments(),
        logKeys,
        ...(tlogProofs !== null
          ? {
              tlog: {
                vkeys: tlogKeys,
                checkpoint: {
                  origin: tlogProofs.note.origin,
                  tree_size: tlogProofs.note.treeSize,
                  cosigned_by: tlogProofs.note.cosignatures.map((c) => c.witness),
                },
              },
            }
          : {}),
        service: {
          name: deps.claimGenerator.split('/')[0],
          version: deps.claimGenerator.split('/')[1],
          signer: signatureMetadata(signer),
        },
        selection: plan.selection,
        signer: signer.deterministic(),
        claimGenerator: deps.claimGenerator,
        beforeSegment: trail.beforeSegment,
        beforeEnd: trail.beforeEnd,
      });
      finished = true;
    } finally {
      if (!finished) {
        log.warn({ exportId }, 'export ended before its last byte (client gone or failure)');
        await trail.aborted(closedFor, (err) => log.error({ err }, 'cannot record an aborted export'));
      }
    }
  }
  // One chunk is prepared while the previous one is being sent (bounded: one chunk per export).
  // A client that stops reading, or reads a trickle, would hold its slot (and its spool) for hours.
  // The watchdog closes the response when the client breaks the pace (src/export/pace.ts): no byte
  // taken for the idle time, or fewer bytes a second than the floor over a window of its waiting.
  // Time the service itself spends (a slow query) never counts.
  const pace = new ExportPace(deps.exportPace);
  async function* watched(): AsyncGenerator<Buffer> {
    for await (const chunk of bytes()) {
      pace.offered(chunk.length, Date.now());
      yield chunk;
      pace.tookOffered(Date.now());
    }
  }
  const tar = Readable.from(watched(), { objectMode: false, highWaterMark: DEFAULT_CHUNK_SIZE });
  const watchdog = setInterval(
    () => {
      const verdict = pace.verdict(Date.now());
      if (verdict === null) return;
      clearInterval(watchdog);
      closedFor = describeVerdict(verdict, deps.exportPace);
      log.warn({ exportId, reason: verdict.reason }, `export closed before its end: ${closedFor}`);
      reply.raw.destroy();
    },
    Math.max(100, Math.min(5_000, Math.floor(deps.exportPace.idleMs / 4))),
  );
  watchdog.unref();
  // 'close' comes after the last byte, a failure or the client going away (the stream is destroyed).
  tar.once('close', () => {
    clearInterval(watchdog);
    release();
  });
  const body = plan.gzip ? pipeline(tar, createGzip(), () => undefined) : tar;
  return reply
    .type(plan.gzip ? TAR_GZIP_MEDIA_TYPE : TAR_MEDIA_TYPE)
    .header('content-disposition', `attachment; filename="${plan.filename}${plan.gzip ? '.tar.gz' : '.tar'}"`)
    .header('cache-control', 'no-store')
    .header('x-export-attestations', String(count))
    .header('x-export-withheld-namespaces', String(plan.withheld))
    .header('x-export-min-rate', paceHeader(deps.exportPace))
    .send(body);
}

/**
 * The audit rows of one export (docs/export.md, "Audit log"). Each row names one namespace and only
 * what of that namespace left: a namespace's rows never carry another tenant's ids, manifest
 * digests or counts. Before a segment's bytes leave: per namespace, `<action>` with the ids of its
 * records in the segment and the digests of its AIBOMs' manifests; per AIBOM, `<action>.artifact`
 * with its manifest digest and the attestation ids the manifest links (the row a download writes).
 * Before the bundle's own manifest leaves: for each of those segment rows, `<action>.bundle` with
 * the same ids and the bundle manifest's digest (so every id is on a row with the manifest it left
 * under, in rows bounded by the segment size). `<action>.aborted` when it ends early.
 */
function auditTrail(
  vault: Pick<Vault, 'audit'>,
  plan: Pick<StreamPlan, 'action' | 'object'>,
  actor: string,
  exportId: string,
): {
  readonly beforeSegment: (s: SegmentReport) => Promise<void>;
  readonly beforeEnd: (f: FinalReport) => Promise<void>;
  readonly aborted: (reason: string | undefined, onError: (err: unknown) => void) => Promise<void>;
} {
  /** The namespaces of the records sent so far. */
  const namespaces = new Set<string>();
  /** Ids of the segment rows, restated with the bundle manifest at the end. */
  const segmentRows: number[] = [];
  return {
    beforeSegment: async (s) => {
      const byNamespace = new Map<string, { ids: string[]; manifests: string[] }>();
      const artifacts: AuditEntry[] = [];
      for (const item of s.items) {
        namespaces.add(item.namespace);
        let group = byNamespace.get(item.namespace);
        if (group === undefined) byNamespace.set(item.namespace, (group = { ids: [], manifests: [] }));
        group.ids.push(item.id);
        const a = item.aibom;
        if (a === undefined) continue;
        if (a.manifestDigest !== null) group.manifests.push(a.manifestDigest);
        artifacts.push({
          actor,
          action: `${plan.action}.artifact`,
          namespace: item.namespace,
          object: a.objectKey,
          manifestDigest: a.manifestDigest,
          attestationIds: a.attestationIds,
          details: { export_id: exportId, segment: s.segment, run_id: a.runId },
        });
      }
      const segments: AuditEntry[] = [...byNamespace].map(([namespace, g]) => ({
        actor,
        action: plan.action,
        namespace,
        object: plan.object,
        attestationIds: g.ids,
        details: { export_id: exportId, segment: s.segment, manifest_digests: g.manifests },
      }));
      const ids = await vault.audit.recordAll([...segments, ...artifacts]);
      segmentRows.push(...ids.slice(0, segments.length));
    },
    beforeEnd: async (f) => {
      await vault.audit.restate(segmentRows, {
        action: `${plan.action}.bundle`,
        manifestDigest: f.manifestDigest,
        details: { manifest_label: f.manifestLabel },
      });
    },
    aborted: async (reason, onError) => {
      for (const namespace of namespaces) {
        await vault.audit
          .record({
            actor,
            action: `${plan.action}.aborted`,
            namespace,
            object: plan.object,
            details: { export_id: exportId, ...(reason !== undefined ? { reason } : {}) },
          })
          .catch(onError);
      }
    },
  };
}

/**
 * An export of `body` (the query's filters and/or ids) for the caller of `req`: POST
 * /v1/attestations/export, and the UI's export dialog (src/http/ui/routes.ts), which must send
 * the same bytes under the same checks and audit.
 */
export async function exportSelection(
  deps: ExportDeps,
  req: FastifyRequest,
  reply: FastifyReply,
  body: ExportBody,
): Promise<FastifyReply> {
  const { allowed, withheld } = await exportableNamespaces(deps, req, body.namespaces);
  if (body.scitt === true) await requireScittIn(deps, req, allowed);
  // Ids are compared in lower case (UUIDs), once each: ids differing only in case are the same
  // record, and the same selection must give the same bytes (the index lists them).
  const ids =
    body.ids !== undefined ? [...new Set(body.ids.map((id) => id.toLowerCase()))].sort() : undefined;
  if (ids !== undefined) {
    // Existence is confirmed only inside namespaces the caller may export from.
    const found = await deps.vault.attestations.getMany(ids);
    const missing = ids.filter((id) => !allowed.includes(found.get(id)?.namespace ?? '\0'));
    if (missing.length > 0) {
      // Fixed text and a count: the ids are named only by their pointers into the request.
      throw new ProblemError(
        404,
        'NOT_FOUND',
        `${missing.length} attestation id(s) not found among the records you may export`,
        {
          errors: missing.slice(0, 20).map((id) => ({
            pointer: `/body/ids/${body.ids!.findIndex((x) => x.toLowerCase() === id)}`,
            message: 'not found',
          })),
        },
      );
    }
  }
  const { gzip = false, scitt = false, ids: _ids, ...query } = body;
  const capability =
    query.capability_token !== undefined
      ? await resolveCapabilityFilter(query.capability_token, allowed, deps.vault.capabilityGrants)
      : undefined;
  const filter: AttestationFilter = {
    ...toFilter(query, allowed, capability),
    ...(ids !== undefined ? { ids } : {}),
  };
  const { namespaces: _asked, ...criteria } = query;
  return streamExport(deps, req, reply, {
    filter,
    selection: {
      criteria,
      ...(ids !== undefined ? { ids } : {}),
      namespaces: allowed,
      withheld_namespaces: withheld,
      scitt,
    },
    gzip,
    scitt,
    action: 'attestations.export',
    object: 'attestations',
    filename: 'aibom-vault-export',
    withheld,
  });
}

/**
 * The evidence of one artifact of a run, as an export bundle: the artifact's attestation and the
 * run's capability chain (who approved what), for a caller who may get attestations there.
 */
export async function exportEvidence(
  deps: ExportDeps,
  req: FastifyRequest,
  reply: FastifyReply,
  evidence: { readonly runId: string; readonly kind: string; readonly gzip: boolean },
): Promise<FastifyReply> {
  const { runId, kind, gzip } = evidence;
  const run = await visibleRun(deps, req, runId);
  const ns = run.namespace;
  if (!(await isAllowed(deps.authorizer, req, { namespace: ns, verb: 'get', resource: 'attestations' }))) {
    throw new ProblemError(403, 'FORBIDDEN', `not allowed to get attestations in namespace ${ns}`);
  }
  const artifact = await deps.vault.artifacts.get(run.id, kind);
  const aibomId = (artifact?.metadata as { aibom_attestation_id?: unknown } | undefined)
    ?.aibom_attestation_id;
  if (artifact === null || typeof aibomId !== 'string') {
    throw new ProblemError(404, 'NOT_FOUND', `the run has no ${kind} yet`);
  }
  // The artifact's attestation, its standard views' records, and the run's capability chain (who
  // approved what).
  const views = Object.values(
    (artifact.metadata as { views?: Record<string, { attestation_id?: unknown }> }).views ?? {},
  )
    .map((v) => v.attestation_id)
    .filter((id): id is string => typeof id === 'string');
  const capabilities = (await deps.vault.attestations.ofRun(ns, run.id))
    .filter((a) => a.kind === 'capability')
    .map((a) => a.id);
  const ids = [aibomId, ...views, ...capabilities].sort();
  return streamExport(deps, req, reply, {
    filter: { namespaces: [ns], ids },
    selection: { run_id: run.id, artifact: kind, ids, namespaces: [ns] },
    gzip,
    scitt: false,
    action: 'artifact.evidence',
    object: artifact.objectKey,
    filename: `evidence-${run.id}-${kind}`,
    withheld: 0,
  });
}
