import type pg from 'pg';
import { REPAIR_COLUMNS, toRepair, type ManifestRepair, type RepairRow } from './manifest-repairs.ts';

/** An artifact's metadata record (the AIBOM's: the spec's object-store metadata table). */
export interface ArtifactRecord {
  readonly runId: string;
  readonly kind: string;
  readonly namespace: string;
  readonly objectKey: string;
  readonly digest: string;
  readonly metadata: Record<string, unknown>;
  readonly createdAt: Date;
  /**
   * Requests to re-sign the artifact's C2PA manifest, oldest first (manifest-repairs.ts). The record
   * itself never changes: the manifest in force is that of the latest completed repair, if any.
   */
  readonly repairs: readonly ManifestRepair[];
}

export type NewArtifact = Omit<ArtifactRecord, 'createdAt' | 'repairs'>;

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
  repairs: RepairRow[] | null;
}

const toRecord = (r: ArtifactRow): ArtifactRecord => ({
  runId: r.run_id,
  kind: r.kind,
  namespace: r.namespace,
  objectKey: r.object_key,
  digest: r.digest,
  metadata: r.metadata,
  createdAt: r.created_at,
  repairs: (r.repairs ?? []).map(toRepair),
});

/**
 * The artifact columns with its repair requests aggregated in the same statement: the Run
 * reconciler's gather stays one read for the AIBOM (a converged Run costs four reads).
 */
const SELECT_ARTIFACT =
  'SELECT a.run_id, a.kind, a.namespace, a.object_key, a.digest, a.metadata, a.created_at, ' +
  `(SELECT jsonb_agg(to_jsonb(m) ORDER BY m.requested_at, m.id) FROM (SELECT ${REPAIR_COLUMNS} FROM manifest_repairs ` +
  '  WHERE run_id = a.run_id AND kind = a.kind) m) AS repairs ' +
  'FROM artifacts a';

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
        text: `${SELECT_ARTIFACT} WHERE a.run_id = $1::uuid AND a.kind = $2`,
        values: [runId, kind],
      });
      return rows[0] ? toRecord(rows[0]) : null;
    },

    async list(runId) {
      const { rows } = await pool.query<ArtifactRow>({
        name: 'artifacts_list',
        text: `${SELECT_ARTIFACT} WHERE a.run_id = $1::uuid ORDER BY a.kind`,
        values: [runId],
      });
      return rows.map(toRecord);
    },
  };
}
