import type pg from 'pg';

export interface ArtifactRecord {
  readonly runId: string;
  readonly kind: string;
  readonly namespace: string;
  readonly objectKey: string;
  readonly digest: string;
  readonly metadata: Record<string, unknown>;
  readonly createdAt: Date;
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
 * Records an artifact's metadata once per (run, kind). Returns the stored record, which is the
 * earlier one when another writer got there first: callers must use what this returns.
 */
export async function recordArtifact(
  pool: pg.Pool,
  a: Omit<ArtifactRecord, 'createdAt'>,
): Promise<{ record: ArtifactRecord; created: boolean }> {
  const ins = await pool.query<ArtifactRow>({
    name: 'artifacts_insert',
    text: `INSERT INTO artifacts (run_id, kind, namespace, object_key, digest, metadata)
           VALUES ($1, $2, $3, $4, $5, $6) ON CONFLICT (run_id, kind) DO NOTHING
           RETURNING run_id, kind, namespace, object_key, digest, metadata, created_at`,
    values: [a.runId, a.kind, a.namespace, a.objectKey, a.digest, a.metadata],
  });
  if (ins.rows[0]) return { record: toRecord(ins.rows[0]), created: true };
  const existing = await getArtifact(pool, a.runId, a.kind);
  if (!existing) throw new Error(`artifact ${a.kind} of run ${a.runId} conflicted but is not readable`);
  return { record: existing, created: false };
}

export async function getArtifact(
  pool: pg.Pool,
  runId: string,
  kind: string,
): Promise<ArtifactRecord | null> {
  const { rows } = await pool.query<ArtifactRow>({
    name: 'artifacts_get',
    text: `SELECT run_id, kind, namespace, object_key, digest, metadata, created_at
           FROM artifacts WHERE run_id = $1::uuid AND kind = $2`,
    values: [runId, kind],
  });
  return rows[0] ? toRecord(rows[0]) : null;
}

export async function listArtifacts(pool: pg.Pool, runId: string): Promise<ArtifactRecord[]> {
  const { rows } = await pool.query<ArtifactRow>({
    name: 'artifacts_list',
    text: `SELECT run_id, kind, namespace, object_key, digest, metadata, created_at
           FROM artifacts WHERE run_id = $1::uuid ORDER BY kind`,
    values: [runId],
  });
  return rows.map(toRecord);
}
