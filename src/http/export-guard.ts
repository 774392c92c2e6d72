import type { X509Certificate } from 'node:crypto';
import type { BlobStore } from '../blob/store.ts';
import { verifyManifest } from '../c2pa/index.ts';
import type { ManifestRepair, RepairReason } from '../vault/index.ts';
import { ProblemError } from './problem.ts';

export interface GuardedArtifact {
  readonly bytes: Buffer;
  /** The sidecar manifest store, when there is one. */
  readonly manifest: Buffer | null;
  readonly manifestDigest: string | null;
  readonly attestationIds: string[];
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
 * request, later after failed attempts) plus the time one attempt takes; null when the request
 * failed for good (nothing will come).
 */
export function repairRetryAfter(repair: ManifestRepair, now = Date.now()): number | null {
  if (repair.state !== 'queued') return null;
  const due = Math.max(0, Math.ceil((repair.nextAttemptAt.getTime() - now) / 1000));
  return due + REPAIR_SERVICE_SECONDS;
}

/**
 * The export rule of the spec: with SERVICE_REQUIRE_SIGNED_EXPORTS=1 an artifact only leaves the
 * service with a C2PA manifest that verifies (bound to these exact bytes, signed by a chain to the
 * service's trust anchors). Otherwise the download is blocked (409 UNSIGNED_EXPORT_BLOCKED) until
 * the signer produces one: a manifest that is missing or invalid opens a repair request
 * (`repair`; the controller, which holds the runtime signer, re-signs the same bytes), and the 409
 * carries the request's id and a Retry-After from its next attempt. `meta` is the metadata as it is
 * now (recorder/metadata.ts): after a repair, the new manifest's key.
 */
export async function loadGuardedArtifact(
  blobs: BlobStore,
  meta: { key: string; c2pa_manifest?: { key?: string; digest?: string } },
  opts: { required: boolean; trustAnchors: readonly X509Certificate[]; repair?: RequestRepair },
): Promise<GuardedArtifact> {
  const bytes = await blobs.get(meta.key);
  if (!bytes) throw new ProblemError(404, 'NOT_FOUND', `object ${meta.key} is missing from the object store`);
  const manifestKey = meta.c2pa_manifest?.key;
  const manifest = manifestKey ? await blobs.get(manifestKey) : null;
  let problems: string[] = manifest ? [] : ['no C2PA manifest is stored for it'];
  let attestationIds: string[] = [];
  if (manifest) {
    const result = verifyManifest({ store: manifest, asset: bytes, trustAnchors: [...opts.trustAnchors] });
    problems = result.problems.map((p) => `${p.code}: ${p.message}`);
    attestationIds = result.attestationIds ?? [];
  }
  if (problems.length === 0) {
    return { bytes, manifest, manifestDigest: meta.c2pa_manifest?.digest ?? null, attestationIds };
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
  };
}
