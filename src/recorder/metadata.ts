import type { TransparencyView } from '../transparency/jobs.ts';
import type { ArtifactRecord, ManifestRepair } from '../vault/index.ts';

/**
 * The AIBOM metadata as readers see it now. The record (`artifacts` row) is immutable; two things
 * about the artifact change later and live elsewhere: the manifest in force (after a repair,
 * `manifest_repairs`) and the SCITT `transparency` entry (`transparency_jobs`). Every place that
 * shows the metadata — `aibom.meta.json` beside the blob, the API's `artifacts.aibom`, the Run's
 * `status.artifacts.aibom` — goes through here, so they cannot disagree.
 */

/** A manifest that was replaced by a repair (kept in the bucket, listed here). */
export interface ReplacedManifest {
  readonly key: string | null;
  readonly digest: string | null;
  /** Why it was replaced. */
  readonly reason: 'missing' | 'invalid';
  /** The repair that replaced it. */
  readonly repair_id: string;
  readonly replaced_at: string;
}

/** The last completed repair, if any: its manifest is the one in force. */
export function latestRepair(record: Pick<ArtifactRecord, 'repairs'>): ManifestRepair | undefined {
  return record.repairs.filter((r) => r.state === 'done').at(-1);
}

/** The open (queued) or last failed request, when it is the latest one: what the Run shows. */
export function pendingRepair(record: Pick<ArtifactRecord, 'repairs'>): ManifestRepair | undefined {
  const last = record.repairs.at(-1);
  return last !== undefined && last.state !== 'done' ? last : undefined;
}

/**
 * The record's metadata with the manifest in force as `c2pa_manifest` (and the ones it replaced
 * in `c2pa_manifest_history`, oldest first), and `transparency` when given.
 */
export function currentMetadata(
  record: Pick<ArtifactRecord, 'metadata' | 'repairs'>,
  transparency?: TransparencyView | null,
): Record<string, unknown> {
  const out: Record<string, unknown> = { ...record.metadata };
  const done = record.repairs.filter((r) => r.state === 'done');
  const last = done.at(-1);
  if (last !== undefined) {
    const original = (record.metadata.c2pa_manifest ?? {}) as Record<string, unknown>;
    out.c2pa_manifest = {
      ...original,
      key: last.manifestKey,
      digest: last.manifestDigest,
      ...(last.manifestLabel !== null ? { label: last.manifestLabel } : {}),
    };
    out.c2pa_manifest_history = done.map((r): ReplacedManifest => ({
      key: r.replacesKey,
      digest: r.replacesDigest,
      reason: r.reason,
      repair_id: r.id,
      replaced_at: (r.completedAt ?? r.requestedAt).toISOString(),
    }));
  }
  if (transparency) out.transparency = transparency;
  return out;
}
