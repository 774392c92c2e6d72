import { createHash, type X509Certificate } from 'node:crypto';
import type { BlobStore } from '../blob/store.ts';
import { verifyManifest } from '../c2pa/index.ts';
import { currentMetadata } from '../recorder/index.ts';
import type {
  ArtifactRecord,
  ManifestRepair,
  ManifestRepairRepository,
  RepairReason,
} from '../vault/index.ts';
import { ProblemError } from '../http/problem.ts';

export interface GuardedArtifact {
  readonly bytes: Buffer;
  /** The sidecar manifest store, when there is one. */
  readonly manifest: Buffer | null;
  readonly manifestDigest: string | null;
  readonly attestationIds: string[];
  /**
   * The time the manifest's signer certificates were judged at, and why that time:
   * `<ISO time>; rfc3161 <TSA>` (its trusted time-stamp) or `<ISO time>; now` (none).
   */
  readonly validatedAt: string;
}

/** What is wrong with the manifest in force, as a repair request states it. */
export interface ManifestProblem {
  readonly reason: RepairReason;
  readonly detail: string;
  readonly key: string | null;
  readonly digest: string | null;
}

/**
 * Asks the signer for a new manifest (opens, or joins, a durable repair request); returns the
 * request, whose state and next attempt the answer reports.
 */
export type RequestRepair = (problem: ManifestProblem) => Promise<ManifestRepair>;

/** Added to a queued request's next attempt: about one reconcile of the controller. */
export const REPAIR_SERVICE_SECONDS = 2;

/**
 * Retry-After of a download blocked on `repair`: when the signer will next try (now for a new
 * request, later after failed attempts) plus the time one attempt takes; a second for a repair
 * already done (the download read the artifact just before it completed: asking again finds the
 * new manifest); null when the request failed for good (nothing will come).
 */
export function repairRetryAfter(repair: ManifestRepair, now = Date.now()): number | null {
  if (repair.state === 'done') return 1;
  if (repair.state !== 'queued') return null;
  const due = Math.max(0, Math.ceil((repair.nextAttemptAt.getTime() - now) / 1000));
  return due + REPAIR_SERVICE_SECONDS;
}

/**
 * The export rule of the spec: with SERVICE_REQUIRE_SIGNED_EXPORTS=1 an artifact only leaves the
 * service with a C2PA manifest that verifies (bound to these exact bytes, signed by a chain to the
 * service's trust anchors, judged at its trusted RFC 3161 time-stamp when it has one, so an
 * AIBOM still leaves after its signer certificate expired). Otherwise the download is blocked
 * (409 UNSIGNED_EXPORT_BLOCKED) until the signer produces one: a manifest that is missing or
 * invalid opens a repair request (`repair`; the controller, which holds the runtime signer,
 * re-signs the same bytes), and the 409 carries the request's id and a Retry-After from its next
 * attempt. `meta` is the metadata as it is now (recorder/metadata.ts): after a repair, the new
 * manifest's key.
 */
export async function loadGuardedArtifact(
  blobs: BlobStore,
  meta: { key: string; c2pa_manifest?: { key?: string; digest?: string } },
  opts: {
    required: boolean;
    trustAnchors: readonly X509Certificate[];
    /** Roots of trusted TSAs: a manifest time-stamped by one is judged at that time, not now. */
    tsaTrustAnchors?: readonly X509Certificate[];
    repair?: RequestRepair;
    /**
     * The digest the vault recorded for the bytes: bytes that are gone or differ (deleted or replaced
     * behind the service's back) never leave; a repair is asked for (the controller puts the recorded
     * bytes back when it can rebuild them from the vault) and the answer is 409
     * ARTIFACT_NOT_AS_RECORDED.
     */
    digest?: string;
  },
): Promise<GuardedArtifact> {
  const bytes = await blobs.get(meta.key);
  const manifestKey = meta.c2pa_manifest?.key;
  const found = bytes === null ? null : `sha256:${createHash('sha256').update(bytes).digest('hex')}`;
  if (bytes === null || (opts.digest !== undefined && found !== opts.digest)) {
    const why =
      bytes === null
        ? `the artifact's bytes (${meta.key}) are missing from the object store`
        : `the bytes at ${meta.key} hash to ${found}, not to the ${opts.digest} the vault recorded`;
    const repair = await opts.repair?.({
      reason: bytes === null ? 'missing' : 'invalid',
      detail: why,
      key: manifestKey ?? null,
      digest: meta.c2pa_manifest?.digest ?? null,
    });
    const retryAfter = repair !== undefined ? repairRetryAfter(repair) : null;
    const asked =
      repair === undefined
        ? ''
        : repair.state === 'failed'
          ? ` (repair ${repair.id} failed: ${repair.lastError ?? 'they cannot be restored'})`
          : ` (restoring them from the vault: repair ${repair.id})`;
    throw new ProblemError(
      409,
      'ARTIFACT_NOT_AS_RECORDED',
      `download refused: ${why}${asked}`,
      retryAfter !== null ? { headers: { 'retry-after': String(retryAfter) } } : {},
    );
  }
  const manifest = manifestKey ? await blobs.get(manifestKey) : null;
  let problems: string[] = manifest ? [] : ['no C2PA manifest is stored for it'];
  let attestationIds: string[] = [];
  let validatedAt = `${new Date().toISOString()}; now`;
  if (manifest) {
    const result = verifyManifest({
      store: manifest,
      asset: bytes,
      trustAnchors: [...opts.trustAnchors],
      tsaTrustAnchors: [...(opts.tsaTrustAnchors ?? [])],
    });
    problems = result.problems.map((p) => `${p.code}: ${p.message}`);
    attestationIds = result.attestationIds ?? [];
    const ts = result.timestamp;
    // A header value: the TSA's name is printable ASCII only.
    if (ts?.trusted === true) {
      validatedAt = `${ts.time.toISOString()}; rfc3161 ${ts.tsa ?? ''}`
        .replace(/[^\x20-\x7e]/g, '?')
        .trimEnd();
    }
  }
  if (problems.length === 0) {
    return {
      bytes,
      manifest,
      manifestDigest: meta.c2pa_manifest?.digest ?? null,
      attestationIds,
      validatedAt,
    };
  }
  // Asked for whether or not the guard blocks: an artifact should not stay without a valid manifest.
  const repair = await opts.repair?.({
    reason: manifest ? 'invalid' : 'missing',
    detail: problems.join('; '),
    key: manifestKey ?? null,
    digest: meta.c2pa_manifest?.digest ?? null,
  });
  if (opts.required) {
    const retryAfter = repair !== undefined ? repairRetryAfter(repair) : 30;
    const asked =
      repair === undefined
        ? ''
        : repair.state === 'queued'
          ? ` (re-signing requested: repair ${repair.id})`
          : repair.state === 'done'
            ? ` (re-signed meanwhile by repair ${repair.id}: ask again)`
            : ` (repair ${repair.id} failed: ${repair.lastError ?? 'the manifest cannot be re-signed'})`;
    throw new ProblemError(
      409,
      'UNSIGNED_EXPORT_BLOCKED',
      `download blocked until the signer produces a valid C2PA manifest: ${problems.join('; ')}${asked}`,
      retryAfter !== null ? { headers: { 'retry-after': String(retryAfter) } } : {},
    );
  }
  return {
    bytes,
    manifest,
    manifestDigest: manifest ? (meta.c2pa_manifest?.digest ?? null) : null,
    attestationIds,
    validatedAt,
  };
}

/** What guarding a stored artifact needs: the store, the repair queue and the trust of the guard. */
export interface ArtifactGuardDeps {
  readonly blobs: BlobStore;
  readonly vault: { readonly manifestRepairs: Pick<ManifestRepairRepository, 'request'> };
  /** SERVICE_REQUIRE_SIGNED_EXPORTS */
  readonly requireSignedExports: boolean;
  readonly trustAnchors: readonly X509Certificate[];
  readonly tsaTrustAnchors?: readonly X509Certificate[];
}

/**
 * The guard over an artifact as stored now, for every route it leaves by (download, evidence,
 * export): the manifest in force (the record's, or its latest repair's), judged with the TSA roots,
 * and a repair request opened (or joined) when it is missing or invalid. `required` defaults to the
 * deployment's SERVICE_REQUIRE_SIGNED_EXPORTS.
 */
export function guardStoredArtifact(
  deps: ArtifactGuardDeps,
  record: ArtifactRecord,
  actor: string,
  required: boolean = deps.requireSignedExports,
): Promise<GuardedArtifact> {
  const meta = currentMetadata(record) as {
    key: string;
    attestation_ids?: string[];
    c2pa_manifest?: { key?: string; digest?: string };
  };
  return loadGuardedArtifact(deps.blobs, meta, {
    required,
    digest: record.digest,
    trustAnchors: deps.trustAnchors,
    tsaTrustAnchors: deps.tsaTrustAnchors ?? [],
    repair: async (problem) => {
      // A request that failed for good over this same manifest is the answer; asking again
      // would fail again (the bytes no longer match the record).
      const last = record.repairs.at(-1);
      if (last?.state === 'failed' && last.replacesDigest === problem.digest) return last;
      const { repair } = await deps.vault.manifestRepairs.request({
        runId: record.runId,
        kind: record.kind,
        namespace: record.namespace,
        reason: problem.reason,
        detail: problem.detail,
        replacesKey: problem.key,
        replacesDigest: problem.digest,
        requestedBy: actor,
        object: record.objectKey,
        attestationIds: meta.attestation_ids ?? [],
      });
      return repair;
    },
  });
}
