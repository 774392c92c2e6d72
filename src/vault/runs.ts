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
  /**
   * Upserts the mirror of a Run (id = metadata.uid); a mirror already equal is left alone. The spec,
   * namespace and name never change once mirrored (PostgreSQL refuses, SQLSTATE 23001: the Run's
   * spec is immutable, docs/runs.md), and the status stays as it was when the Run became terminal.
   */
  upsert(run: Run): Promise<void>;
  get(id: string): Promise<RunRecord | null>;
}

export function runRepository(pool: pg.Pool): RunRepository {
  return {
    async upsert(run) {
      await pool.query({
        name: 'runs_upsert',
        // Through a function (migration 0008): the runtime role has no INSERT/UPDATE on runs.
        text: 'SELECT runs_upsert($1::uuid, $2::text, $3::text, $4::jsonb, $5::jsonb, $6::text)',
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
