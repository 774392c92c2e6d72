import type pg from 'pg';
import type { Run, RunSpec, RunStatus } from '../api/run.ts';

/** The mirror of a Run in PostgreSQL (what `service-ctl aibom generate` and GET /v1/runs read). */
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

/** The part of a Run's status the mirror keeps: the pipeline's fields, not the controller's. */
export function mirroredStatus(run: Run): RunStatus {
  return { phase: run.status?.phase, steps: run.status?.steps ?? [] } as RunStatus;
}

export interface RunRepository {
  /** Upserts the mirror of a Run (id = metadata.uid); a mirror already equal is left alone. */
  upsert(run: Run): Promise<void>;
  get(id: string): Promise<RunRecord | null>;
}

export function runRepository(pool: pg.Pool): RunRepository {
  return {
    async upsert(run) {
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
          mirroredStatus(run),
          run.status?.phase ?? null,
        ],
      });
    },

    async get(id) {
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
    },
  };
}
