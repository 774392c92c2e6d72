import type pg from 'pg';

/** An artifact's metadata record (the AIBOM's: the spec's object-store metadata table). */
export interface ArtifactRecord {
  readonly runId: string;
  readonly kind: string;
  readonly namespace: string;
  readonly objectKey: string;
  readonly digest: string;
  readonly metadata: Record<string, unknown>;
  readonly createdAt: Date;
}

export type NewArtifact = Omit<ArtifactRecord, 'createdAt'>;

export interface ArtifactRepository {
  get(runId: string, kind: string): Promise<ArtifactRecord | null>;
  list(runId: string): Promise<ArtifactRecord[]>;
}

interface ArtifactRow {
  run_id: string;
  kind: string;
  namespace: string;
  object_key: string;
  digest: string;
  metadata: Record<string, unknown>;
  created_at: Date;
}

const toRecord = (r: ArtifactRow): ArtifactRecord => ({
  runId: r.run_id,
  kind: r.kind,
  namespace: r.namespace,
  objectKey: r.object_key,
  digest: r.digest,
  metadata: r.metadata,
  createdAt: r.created_at,
});

/**
 * Inserts an artifact record inside the caller's transaction (insert-once per run and kind): it
 * commits atomically with the attestation that stands for it (claims.ts).
 */
export async function insertArtifact(client: pg.PoolClient, a: NewArtifact): Promise<void> {
  await client.query({
    name: 'artifacts_insert_tx',
    text: `INSERT INTO artifacts (run_id, kind, namespace, object_key, digest, metadata)
           VALUES ($1, $2, $3, $4, $5, $6) ON CONFLICT (run_id, kind) DO NOTHING`,
    values: [a.runId, a.kind, a.namespace, a.objectKey, a.digest, a.metadata],
  });
}

export function artifactRepository(pool: pg.Pool): ArtifactRepository {
  return {
    async get(runId, kind) {
      const { rows } = await pool.query<ArtifactRow>({
        name: 'artifacts_get',
        text: `SELECT run_id, kind, namespace, object_key, digest, metadata, created_at
           FROM artifacts WHERE run_id = $1::uuid AND kind = $2`,
        values: [runId, kind],
      });
      return rows[0] ? toRecord(rows[0]) : null;
    },

    async list(runId) {
      const { rows } = await pool.query<ArtifactRow>({
        name: 'artifacts_list',
        text: `SELECT run_id, kind, namespace, object_key, digest, metadata, created_at
           FROM artifacts WHERE run_id = $1::uuid ORDER BY kind`,
        values: [runId],
      });
      return rows.map(toRecord);
    },
  };
}
