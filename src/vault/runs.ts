import type pg from 'pg';
import type { Run, RunSpec, RunStatus } from '../crd/run.ts';

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
  /**
   * The most recent run mirrored under `namespace/name` (a Run deleted and created again under the
   * same name is another run, with another id; the vault keeps both).
   */
  latest(namespace: string, name: string): Promise<RunRecord | null>;
}

const COLUMNS = 'id, namespace, name, spec, status, phase, created_at, updated_at';

function toRecord(r: RunRow): RunRecord {
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
        text: `SELECT ${COLUMNS} FROM runs WHERE id = $1::uuid`,
        values: [id],
      });
      return rows[0] ? toRecord(rows[0]) : null;
    },

    async latest(namespace, name) {
      // runs_namespace_name (namespace, name) finds the few rows of that name.
      const { rows } = await pool.query<RunRow>({
        name: 'runs_latest',
        text: `SELECT ${COLUMNS} FROM runs WHERE namespace = $1 AND name = $2 ORDER BY created_at DESC, id DESC LIMIT 1`,
        values: [namespace, name],
      });
      return rows[0] ? toRecord(rows[0]) : null;
    },
  };
}
