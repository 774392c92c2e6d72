import type { BlobStore } from '../blob/store.ts';
import type { Logger } from '../log/index.ts';

/** What the sweep needs to know of the AIBOM just recorded (or lost to another writer). */
export interface SidecarSweep {
  /** `runs/<namespace>/<run>/`: where the run's AIBOM objects live (recorder/aibom.ts aibomKeys). */
  readonly prefix: string;
  /** `sha256:` of the AIBOM bytes: the sidecars this sweep may touch are the ones made for them. */
  readonly aibomDigest: string;
  /** The sidecar this writer put. */
  readonly ownKey: string;
  /** The sidecar the stored record names (the manifest in force). */
  readonly namedKey: string;
  /** This writer's record is the one stored (else it lost to another writer, or adopted). */
  readonly created: boolean;
}

/**
 * Removes the C2PA sidecars of an AIBOM that no record names, right after its record is stored.
 * They come from writers that signed the same bytes but never got their record in: a controller
 * killed between its puts and its commit (the sidecar key is content-addressed, so the next
 * leader's manifest goes beside it, never over it), or a replica that lost the race. Nothing reads
 * them, but an auditor listing the bucket would find two manifests for one AIBOM.
 *
 * Invariants: the sidecar the record names is never touched; neither is one made for other bytes
 * (a superseded AIBOM's, which its kept metadata copy names) nor a repair's (`repair-id`; none can
 * exist before the record anyway, and repairs of one Run are serialised with this reconcile). The
 * writer whose record was stored sweeps the prefix; a loser removes only its own sidecar. Best
 * effort: a store that refuses deletes keeps the orphans, and says so in the log.
 */
export async function removeOrphanSidecars(
  blobs: Pick<BlobStore, 'list' | 'stat' | 'delete'>,
  sweep: SidecarSweep,
  logger: Logger,
): Promise<string[]> {
  try {
    if (!sweep.created) {
      if (sweep.ownKey === sweep.namedKey) return [];
      await blobs.delete(sweep.ownKey);
      return [sweep.ownKey];
    }
    const removed: string[] = [];
    for (const key of await blobs.list(`${sweep.prefix}aibom.`)) {
      if (!key.endsWith('.c2pa') || key === sweep.namedKey) continue;
      const head = await blobs.stat(key);
      if (head === null || head.metadata.digest !== sweep.aibomDigest || 'repair-id' in head.metadata)
        continue;
      await blobs.delete(key);
      removed.push(key);
    }
    if (removed.length > 0)
      logger.info(
        { removed },
        'removed C2PA sidecars of this AIBOM that no record names (an earlier writer died)',
      );
    return removed;
  } catch (err) {
    logger.warn({ err, prefix: sweep.prefix }, 'could not remove orphaned C2PA sidecars; they stay, unread');
    return [];
  }
}
