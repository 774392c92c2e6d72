import type { X509Certificate } from 'node:crypto';
import type { BlobStore } from '../blob/store.ts';
import type { Logger } from '../log/index.ts';
import type { StoredCheckpoint } from '../vault/index.ts';
import { verifyCheckpoint, type Checkpoint } from './statement.ts';

/**
 * The newest signed checkpoint, kept outside the database: in the object store, beside the
 * artifacts. A database that loses acknowledged writes (an asynchronous standby promoted without the
 * last transactions, a restore) loses the checkpoints signed over them too, and would go on to sign
 * a different tree of the same size: a second history contradicting what clients, the transparency
 * log and witnesses hold. The copy here lets the checkpointer see that before it signs anything
 * (tree.ts, HISTORY_LOST), at the cost of one GET per round. It is evidence only when it verifies
 * against the service's CA: a copy that does not is ignored, with a warning.
 */
export interface CheckpointWitness {
  /** The kept checkpoint (verified), or null when none is kept or it does not verify. */
  latest(): Promise<(Checkpoint & { readonly statement: Buffer }) | null>;
  /** Keeps `checkpoint` as the newest. */
  keep(checkpoint: StoredCheckpoint): Promise<void>;
}

/**
 * The object key of a vault's kept checkpoint: `vault/<id>/checkpoint.cose`, where `id` names the
 * vault database (a key derived from its shared secret, which a standby and a restore carry along),
 * so deployments sharing a bucket never read each other's checkpoint.
 */
export const witnessKey = (vaultId: string): string => `vault/${vaultId}/checkpoint.cose`;

export function bucketWitness(
  blobs: BlobStore,
  trustAnchors: () => readonly X509Certificate[],
  logger: Logger,
  key: string,
): CheckpointWitness {
  return {
    async latest() {
      const statement = await blobs.get(key);
      if (statement === null) return null;
      try {
        return { ...verifyCheckpoint(statement, { trustAnchors: [...trustAnchors()] }), statement };
      } catch (err) {
        logger.warn({ err, key }, 'the checkpoint kept in the object store does not verify: ignored');
        return null;
      }
    },
    async keep(c) {
      await blobs.put(key, c.statement, 'application/cose', {
        kind: 'vault-checkpoint',
        'tree-size': String(c.treeSize),
        'root-hash': c.rootHash.toString('hex'),
      });
    },
  };
}
