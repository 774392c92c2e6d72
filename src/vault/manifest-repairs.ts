import type pg from 'pg';
import { inTransaction } from './transaction.ts';
import { InvariantError } from '../errors.ts';

/**
 * Requests to re-sign an artifact's C2PA manifest (`manifest_repairs`, migration 0012). The API
 * opens one when a download finds the manifest missing or invalid; the controller, which holds the
 * runtime signer, serves it (a NOTIFY on {@link REPAIR_CHANNEL} wakes the leader) and records the new
 * manifest here. At most one request per artifact is open; a finished one never changes. Opening and
 * completing each write an `audit_log` entry in the same transaction: the manifest found wanting and
 * the one that replaced it, with the attestation ids they link.
 */

export type RepairState = 'queued' | 'done' | 'failed';
export type RepairReason = 'missing' | 'invalid';

/** NOTIFY channel of an opened request; the payload is the run's `<namespace>/<name>`. */
export const REPAIR_CHANNEL = 'aibom_vault_manifest_repair';

export interface ManifestRepair {
  readonly id: string;
  readonly runId: string;
  readonly kind: string;
  readonly reason: RepairReason;
  readonly detail: string;
  readonly replacesKey: string | null;
  readonly replacesDigest: string | null;
  readonly requestedBy: string;
  readonly state: RepairState;
  readonly attempts: number;
  readonly lastError: string | null;
  readonly nextAttemptAt: Date;
  readonly manifestKey: string | null;
  readonly manifestDigest: string | null;
  readonly manifestLabel: string | null;
  readonly requestedAt: Date;
  readonly completedAt: Date | null;
}

export interface RepairRequest {
  readonly runId: string;
  readonly kind: string;
  readonly namespace: string;
  readonly reason: RepairReason;
  readonly detail: string;
  readonly replacesKey: string | null;
  readonly replacesDigest: string | null;
  /** Who downloaded (audit actor). */
  readonly requestedBy: string;
  /** The object the manifest belongs to, and the attestation ids it links (audit). */
  readonly object: string;
  readonly attestationIds: readonly string[];
}

export interface RepairedManifest {
  readonly key: string;
  readonly digest: string;
  readonly label: string;
}

export interface ManifestRepairRepository {
  /**
   * Opens a request, or joins the one already open for the artifact (`created` false). An opened
   * request is recorded in audit_log (`manifest.repair.requested`, the digest of the manifest that
   * failed) in the same transaction.
   */
  request(input: RepairRequest): Promise<{ repair: ManifestRepair; created: boolean }>;
  /**
   * Records the new manifest and closes the request, with an audit_log entry
   * (`manifest.repair.completed`, the new digest); null when the request was not open any more.
   */
  complete(
    id: string,
    manifest: RepairedManifest,
    audit: { actor: string; namespace: string; object: string; attestationIds: readonly string[] },
  ): Promise<ManifestRepair | null>;
  /**
   * A failed attempt: the request stays open (retried after `delayMs`) or, when `final`, is closed
   * as failed (nothing can repair it). Null when it was not open.
   */
  fail(
    id: string,
    outcome: { error: string; final: boolean; delayMs: number },
  ): Promise<ManifestRepair | null>;
  /** `<namespace>/<name>` of the runs with an open request (the controller's resync). */
  openRunKeys(): Promise<string[]>;
}

export interface RepairRow {
  id: string;
  run_id: string;
  kind: string;
  reason: RepairReason;
  detail: string;
  replaces_key: string | null;
  replaces_digest: string | null;
  requested_by: string;
  state: RepairState;
  attempts: number;
  last_error: string | null;
  next_attempt_at: Date | string;
  manifest_key: string | null;
  manifest_digest: string | null;
  manifest_label: string | null;
  requested_at: Date | string;
  completed_at: Date | string | null;
}

export const REPAIR_COLUMNS =
  'id, run_id, kind, reason, detail, replaces_key, replaces_digest, requested_by, state, attempts, ' +
  'last_error, next_attempt_at, manifest_key, manifest_digest, manifest_label, requested_at, completed_at';

/** A row, or a row as `to_jsonb` renders it (artifacts.ts joins them that way: dates as strings). */
export function toRepair(r: RepairRow): ManifestRepair {
  const date = (v: Date | string): Date => (v instanceof Date ? v : new Date(v));
  return {
    id: r.id,
    runId: r.run_id,
    kind: r.kind,
    reason: r.reason,
    detail: r.detail,
    replacesKey: r.replaces_key,
    replacesDigest: r.replaces_digest,
    requestedBy: r.requested_by,
    state: r.state,
    attempts: r.attempts,
    lastError: r.last_error,
    nextAttemptAt: date(r.next_attempt_at),
    manifestKey: r.manifest_key,
    manifestDigest: r.manifest_digest,
    manifestLabel: r.manifest_label,
    requestedAt: date(r.requested_at),
    completedAt: r.completed_at === null ? null : date(r.completed_at),
  };
}

const AUDIT_INSERT =
  'INSERT INTO audit_log (actor, action, namespace, object, manifest_digest, attestation_ids, details) ' +
  'VALUES ($1, $2, $3, $4, $5, $6::text[], $7::jsonb)';

export function manifestRepairRepository(pool: pg.Pool): ManifestRepairRepository {
  const openOf = async (q: pg.Pool | pg.PoolClient, runId: string, kind: string) => {
    const { rows } = await q.query<RepairRow>({
      name: 'manifest_repairs_open',
      text: `SELECT ${REPAIR_COLUMNS} FROM manifest_repairs WHERE run_id = $1::uuid AND kind = $2 AND state = 'queued'`,
      values: [runId, kind],
    });
    return rows[0] === undefined ? null : toRepair(rows[0]);
  };
  /** The completed repair that replaced the manifest `digest` of (run, kind), if any. */
  const replacedBy = async (runId: string, kind: string, digest: string | null) => {
    if (digest === null) return null;
    const { rows } = await pool.query<RepairRow>({
      name: 'manifest_repairs_replaced_by',
      text:
        `SELECT ${REPAIR_COLUMNS} FROM manifest_repairs WHERE run_id = $1::uuid AND kind = $2 ` +
        `AND state = 'done' AND replaces_digest = $3 ORDER BY completed_at DESC LIMIT 1`,
      values: [runId, kind, digest],
    });
    return rows[0] === undefined ? null : toRepair(rows[0]);
  };

  return {
    async request(input) {
      // Cheap path first: most blocked downloads find the request already open.
      const open = await openOf(pool, input.runId, input.kind);
      if (open) return { repair: open, created: false };
      const inserted = await inTransaction(pool, async (client) => {
        const { rows } = await client.query<RepairRow>({
          name: 'manifest_repairs_insert',
          text:
            'INSERT INTO manifest_repairs (run_id, kind, reason, detail, replaces_key, replaces_digest, requested_by) ' +
            'SELECT $1::uuid, $2, $3, $4, $5, $6, $7 WHERE NOT EXISTS (' +
            `SELECT 1 FROM manifest_repairs WHERE run_id = $1::uuid AND kind = $2 AND state = 'done' ` +
            'AND replaces_digest = $6) ' +
            `ON CONFLICT (run_id, kind) WHERE state = 'queued' DO NOTHING RETURNING ${REPAIR_COLUMNS}`,
          values: [
            input.runId,
            input.kind,
            input.reason,
            input.detail.slice(0, 2000),
            input.replacesKey,
            input.replacesDigest,
            input.requestedBy,
          ],
        });
        const row = rows[0];
        if (row === undefined) return null;
        await client.query({
          name: 'manifest_repairs_audit_requested',
          text: AUDIT_INSERT,
          values: [
            input.requestedBy,
            'manifest.repair.requested',
            input.namespace,
            input.object,
            input.replacesDigest,
            [...input.attestationIds],
            JSON.stringify({
              repair_id: row.id,
              reason: input.reason,
              detail: input.detail.slice(0, 2000),
              manifest_key: input.replacesKey,
            }),
          ],
        });
        return toRepair(row);
      });
      if (inserted) return { repair: inserted, created: true };
      // Another download opened it between the two statements.
      const raced = await openOf(pool, input.runId, input.kind);
      if (raced) return { repair: raced, created: false };
      // Or the manifest it names was replaced already: the caller read the artifact before that
      // repair completed (a download racing the signer). A new request would re-sign once more,
      // for nothing, and put a second manifest in force; the completed repair is the answer.
      const replaced = await replacedBy(input.runId, input.kind, input.replacesDigest);
      if (replaced) return { repair: replaced, created: false };
      // Invariant: the insert opened a request or one was open or done (a plain Error, issue 23).
      throw new InvariantError(`manifest repair of ${input.runId}/${input.kind} neither opened nor open`);
    },

    complete(id, manifest, audit) {
      return inTransaction(pool, async (client) => {
        const { rows } = await client.query<RepairRow>({
          name: 'manifest_repairs_complete',
          // Through a function (migration 0012): the runtime role may not UPDATE requests.
          text: `SELECT ${REPAIR_COLUMNS} FROM manifest_repair_complete($1::uuid, $2, $3, $4)`,
          values: [id, manifest.key, manifest.digest, manifest.label],
        });
        const row = rows[0];
        if (row === undefined) return null;
        await client.query({
          name: 'manifest_repairs_audit_completed',
          text: AUDIT_INSERT,
          values: [
            audit.actor,
            'manifest.repair.completed',
            audit.namespace,
            audit.object,
            manifest.digest,
            [...audit.attestationIds],
            JSON.stringify({
              repair_id: id,
              manifest_key: manifest.key,
              replaces_digest: row.replaces_digest,
              reason: row.reason,
            }),
          ],
        });
        return toRepair(row);
      });
    },

    async fail(id, outcome) {
      const { rows } = await pool.query<RepairRow>({
        name: 'manifest_repairs_fail',
        text: `SELECT ${REPAIR_COLUMNS} FROM manifest_repair_fail($1::uuid, $2, $3, $4)`,
        values: [id, outcome.error.slice(0, 2000), outcome.final, outcome.delayMs],
      });
      return rows[0] === undefined ? null : toRepair(rows[0]);
    },

    async openRunKeys() {
      const { rows } = await pool.query<{ key: string }>({
        name: 'manifest_repairs_open_runs',
        text:
          "SELECT DISTINCT r.namespace || '/' || r.name AS key FROM manifest_repairs m " +
          "JOIN runs r ON r.id = m.run_id WHERE m.state = 'queued'",
      });
      return rows.map((r) => r.key);
    },
  };
}
