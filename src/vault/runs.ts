import type pg from 'pg';
import type { Run, RunSpec, RunStatus } from '../api/run.ts';

export interface RunRecord {
  readonly id: string;
  readonly namespace: string;
  readonly name: string;
  readonly spec: RunSpec;
  readonly status: RunStatus;
  readonly phase: string | null;
  readonly createdAt: Date;
  readonly updatedAt: Date;
}

interface RunRow {
  id: string;
  namespace: string;
  name: string;
  spec: RunSpec;
  status: RunStatus;
  phase: string | null;
  created_at: Date;
  updated_at: Date;
}

/** Upserts the mirror of a Run (id = metadata.uid). The controller's own status fields are left out. */
export async function upsertRun(pool: pg.Pool, run: Run): Promise<void> {
  const status = { phase: run.status?.phase, steps: run.status?.steps ?? [] };
  await pool.query({
    name: 'runs_upsert',
    text: `INSERT INTO runs (id, namespace, name, spec, status, phase) VALUES ($1, $2, $3, $4, $5, $6)
           ON CONFLICT (id) DO UPDATE SET spec = EXCLUDED.spec, status = EXCLUDED.status,
             phase = EXCLUDED.phase, updated_at = clock_timestamp()
           WHERE runs.spec IS DISTINCT FROM EXCLUDED.spec OR runs.status IS DISTINCT FROM EXCLUDED.status`,
    values: [
      run.metadata.uid,
      run.metadata.namespace,
      run.metadata.name,
      run.spec,
      status,
      run.status?.phase ?? null,
    ],
  });
}

export async function getRun(pool: pg.Pool, id: string): Promise<RunRecord | null> {
  const { rows } = await pool.query<RunRow>({
    name: 'runs_get',
    text: 'SELECT id, namespace, name, spec, status, phase, created_at, updated_at FROM runs WHERE id = $1::uuid',
    values: [id],
  });
  const r = rows[0];
  if (!r) return null;
  return {
    id: r.id,
    namespace: r.namespace,
    name: r.name,
    spec: r.spec,
    status: r.status,
    phase: r.phase,
    createdAt: r.created_at,
    updatedAt: r.updated_at,
  };
}

/**
 * Ids of the attestations a run's AIBOM lists, in insert order: every record of the run made before
 * its AIBOM attestation (all of them while there is none yet), the AIBOM's own excluded. The
 * controller and `service-ctl aibom generate` both use this, so both list the same ids.
 */
export async function aibomAttestationIds(pool: pg.Pool, runId: string): Promise<string[]> {
  const { rows } = await pool.query<{ id: string }>({
    name: 'runs_aibom_attestation_ids',
    text: `SELECT id FROM attestations
           WHERE run_id = $1::uuid AND kind <> 'aibom'
             AND seq < coalesce((SELECT min(seq) FROM attestations WHERE run_id = $1::uuid AND kind = 'aibom'),
                                9223372036854775807)
           ORDER BY seq`,
    values: [runId],
  });
  return rows.map((r) => r.id);
}
