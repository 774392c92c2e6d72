import { createHash } from 'node:crypto';
import canonicalize from 'canonicalize';
import type pg from 'pg';

/**
 * What the vault lost (`vault_losses`, migration 0016): a database that fails over to a standby
 * without the last transactions (asynchronous replication), or is restored from an older backup,
 * forgets writes it had acknowledged. The world outside still shows them: a Run's status (counts and
 * ids of its records, its AIBOM), an AIBOM and its metadata in the bucket, a signed checkpoint kept
 * beside the bucket's artifacts. Whoever finds such a difference records it here before anything is
 * recorded again in its place: the vault itself says that its history was cut and where, and the
 * second history is never made silently. One loss is one row (by fingerprint), however often and by
 * however many replicas it is seen.
 */

export type LossScope = 'run' | 'checkpoint';

export interface NewLoss {
  readonly scope: LossScope;
  /** The Run (scope `run`). */
  readonly namespace?: string;
  readonly runId?: string;
  /** Attestation ids named outside the vault that it does not hold (lower-case UUIDs). */
  readonly missingIds: readonly string[];
  /** What was found: the claim as it was seen outside, and what the vault held. JSON. */
  readonly details: Record<string, unknown>;
  /**
   * What identifies this loss (JSON; typically the claim, without the vault's side, which changes
   * as the loss is repaired): its SHA-256 over RFC 8785 canonical JSON is the row's fingerprint.
   */
  readonly identity: unknown;
  /** Who found it (`controller/<identity>`, `checkpointer`). */
  readonly detectedBy: string;
}

export interface Loss {
  readonly id: string;
  readonly scope: LossScope;
  readonly fingerprint: string;
  readonly namespace: string | null;
  readonly runId: string | null;
  readonly missingIds: readonly string[];
  readonly details: Record<string, unknown>;
  readonly detectedBy: string;
  readonly detectedAt: Date;
}

export interface LossRepository {
  /** Records `loss` once (by fingerprint): the stored row, and whether this call wrote it. */
  record(loss: NewLoss): Promise<{ loss: Loss; created: boolean }>;
  /** Losses of one Run, oldest first. */
  ofRun(runId: string): Promise<Loss[]>;
  /** Every loss of a scope (or all), oldest first, at most `limit`. */
  list(scope?: LossScope, limit?: number): Promise<Loss[]>;
  /**
   * The number of records the vault holds for each run id (absent: none). One index scan per chunk:
   * what the controller compares with the counts the Runs' statuses show after a reconnect.
   */
  recordCounts(runIds: readonly string[]): Promise<Map<string, number>>;
}

export function lossFingerprint(identity: unknown): string {
  const text = canonicalize(identity);
  if (text === undefined) throw new TypeError('a loss identity must be JSON');
  return `sha256:${createHash('sha256').update(text).digest('hex')}`;
}

interface LossRow {
  id: string;
  scope: LossScope;
  fingerprint: string;
  namespace: string | null;
  run_id: string | null;
  missing_ids: string[];
  details: Record<string, unknown>;
  detected_by: string;
  detected_at: Date;
}

const COLUMNS =
  'id, scope, fingerprint, namespace, run_id, missing_ids::text[] AS missing_ids, details, detected_by, detected_at';

const toLoss = (r: LossRow): Loss => ({
  id: r.id,
  scope: r.scope,
  fingerprint: r.fingerprint,
  namespace: r.namespace,
  runId: r.run_id,
  missingIds: r.missing_ids,
  details: r.details,
  detectedBy: r.detected_by,
  detectedAt: r.detected_at,
});

/** Run ids per count query: bounded statements however many Runs the controller watches. */
const COUNT_CHUNK = 1000;

export function lossRepository(pool: pg.Pool): LossRepository {
  return {
    async record(loss) {
      const fingerprint = lossFingerprint(loss.identity);
      const inserted = await pool.query<LossRow>({
        name: 'vault_losses_insert',
        text: `INSERT INTO vault_losses (scope, fingerprint, namespace, run_id, missing_ids, details, detected_by)
               VALUES ($1, $2, $3, $4::uuid, $5::uuid[], $6, $7)
               ON CONFLICT (fingerprint) DO NOTHING RETURNING ${COLUMNS}`,
        values: [
          loss.scope,
          fingerprint,
          loss.namespace ?? null,
          loss.runId ?? null,
          [...loss.missingIds],
          loss.details,
          loss.detectedBy,
        ],
      });
      if (inserted.rows[0]) return { loss: toLoss(inserted.rows[0]), created: true };
      const { rows } = await pool.query<LossRow>({
        name: 'vault_losses_by_fingerprint',
        text: `SELECT ${COLUMNS} FROM vault_losses WHERE fingerprint = $1`,
        values: [fingerprint],
      });
      return { loss: toLoss(rows[0]!), created: false };
    },

    async ofRun(runId) {
      const { rows } = await pool.query<LossRow>({
        name: 'vault_losses_of_run',
        text: `SELECT ${COLUMNS} FROM vault_losses WHERE run_id = $1::uuid ORDER BY detected_at, id`,
        values: [runId],
      });
      return rows.map(toLoss);
    },

    async list(scope, limit = 1000) {
      const { rows } = await pool.query<LossRow>({
        name: 'vault_losses_list',
        text: `SELECT ${COLUMNS} FROM vault_losses WHERE $1::text IS NULL OR scope = $1
               ORDER BY detected_at, id LIMIT $2`,
        values: [scope ?? null, limit],
      });
      return rows.map(toLoss);
    },

    async recordCounts(runIds) {
      const out = new Map<string, number>();
      for (let i = 0; i < runIds.length; i += COUNT_CHUNK) {
        const { rows } = await pool.query<{ run_id: string; n: string }>({
          name: 'vault_losses_record_counts',
          text: `SELECT run_id::text AS run_id, count(*) AS n FROM attestations
                 WHERE run_id = ANY($1::uuid[]) GROUP BY run_id`,
          values: [runIds.slice(i, i + COUNT_CHUNK)],
        });
        for (const r of rows) out.set(r.run_id, Number(r.n));
      }
      return out;
    },
  };
}
