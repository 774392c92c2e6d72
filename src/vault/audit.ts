import type pg from 'pg';
import type { JsonObject } from './types.ts';

export interface AuditEntry {
  /** Authenticated user or service account. */
  readonly actor: string;
  /** e.g. `attestations.export`, `artifact.download`. */
  readonly action: string;
  readonly namespace?: string | null;
  /** What left the service (object key, run id). */
  readonly object?: string | null;
  /** `sha256:<hex>` of the C2PA manifest that accompanied it. */
  readonly manifestDigest?: string | null;
  readonly attestationIds?: readonly string[];
  readonly details?: JsonObject;
}

export interface AuditRecord extends AuditEntry {
  readonly id: number;
  readonly at: Date;
}

export interface AuditListRequest {
  /** Namespaces the caller may read; null = every row (cluster-wide readers), rows without a namespace included. */
  readonly namespaces: readonly string[] | null;
  /** Rows with id greater than this (keyset paging); default from the start. */
  readonly after?: number;
  readonly action?: string;
  /** Half-open window on `at`. */
  readonly from?: Date;
  readonly to?: Date;
  /** 1..1000. */
  readonly limit: number;
}

/** The follow-up rows {@link AuditRepository.restate} writes. */
export interface AuditRestatement {
  readonly action: string;
  readonly manifestDigest: string | null;
  /** Merged over `{export_id, segment, attestations}` of each source row. */
  readonly details: JsonObject;
}

/** `audit_log`: append-only like the attestations (trigger + privileges). */
export interface AuditRepository {
  record(entry: AuditEntry): Promise<AuditRecord>;
  /** Several rows in one statement, in order; returns their ids. */
  recordAll(entries: readonly AuditEntry[]): Promise<number[]>;
  /**
   * For each row of `ids` (in id order), a new row with its actor, namespace, object and
   * attestation ids, and `change`'s action, manifest digest and details (plus the source row's
   * `export_id` and `segment` and `attestations`: the number of its ids). An export states, once
   * its bundle manifest is signed, that the records its earlier rows named left with that manifest,
   * without holding every id in memory (rows stay bounded by the segment size).
   */
  restate(ids: readonly number[], change: AuditRestatement): Promise<number>;
  /** Rows in id order, for auditors (GET /v1/audit). */
  list(request: AuditListRequest): Promise<AuditRecord[]>;
}

interface AuditRow {
  id: string;
  at: Date;
  actor: string;
  action: string;
  namespace: string | null;
  object: string | null;
  manifest_digest: string | null;
  attestation_ids: string[];
  details: JsonObject;
}

export function auditRepository(pool: pg.Pool): AuditRepository {
  return {
    async record(entry) {
      const { rows } = await pool.query<{ id: string; at: Date }>({
        name: 'vault_audit_insert',
        text:
          'INSERT INTO audit_log (actor, action, namespace, object, manifest_digest, attestation_ids, details) ' +
          'VALUES ($1, $2, $3, $4, $5, $6::text[], $7::jsonb) RETURNING id, at',
        values: [
          entry.actor,
          entry.action,
          entry.namespace ?? null,
          entry.object ?? null,
          entry.manifestDigest ?? null,
          [...(entry.attestationIds ?? [])],
          JSON.stringify(entry.details ?? {}),
        ],
      });
      const row = rows[0]!;
      return { ...entry, id: Number(row.id), at: row.at };
    },
    async recordAll(entries) {
      if (entries.length === 0) return [];
      // One row per entry; the id arrays travel as JSON (text[][] cannot be ragged).
      const { rows } = await pool.query<{ id: string }>({
        name: 'vault_audit_insert_all',
        text:
          'INSERT INTO audit_log (actor, action, namespace, object, manifest_digest, attestation_ids, details) ' +
          'SELECT e.actor, e.action, e.namespace, e.object, e.manifest_digest, ' +
          'ARRAY(SELECT jsonb_array_elements_text(e.ids)), e.details FROM jsonb_to_recordset($1::jsonb) ' +
          'AS e(actor text, action text, namespace text, object text, manifest_digest text, ids jsonb, details jsonb, ord int) ' +
          'ORDER BY e.ord RETURNING id',
        values: [
          JSON.stringify(
            entries.map((e, i) => ({
              actor: e.actor,
              action: e.action,
              namespace: e.namespace ?? null,
              object: e.object ?? null,
              manifest_digest: e.manifestDigest ?? null,
              ids: [...(e.attestationIds ?? [])],
              details: e.details ?? {},
              ord: i,
            })),
          ),
        ],
      });
      return rows.map((r) => Number(r.id)).sort((a, b) => a - b);
    },
    async restate(ids, change) {
      if (ids.length === 0) return 0;
      const { rowCount } = await pool.query({
        name: 'vault_audit_restate',
        text:
          'INSERT INTO audit_log (actor, action, namespace, object, manifest_digest, attestation_ids, details) ' +
          'SELECT actor, $2::text, namespace, object, $3::text, attestation_ids, ' +
          "jsonb_strip_nulls(jsonb_build_object('export_id', details->'export_id', 'segment', details->'segment', " +
          "'attestations', cardinality(attestation_ids))) || $4::jsonb " +
          'FROM audit_log WHERE id = ANY($1::bigint[]) ORDER BY id',
        values: [[...ids], change.action, change.manifestDigest, JSON.stringify(change.details)],
      });
      return rowCount ?? 0;
    },
    async list(req) {
      const values: unknown[] = [];
      const where: string[] = [];
      const add = (clause: (p: string) => string, value: unknown): void => {
        values.push(value);
        where.push(clause(`$${values.length}`));
      };
      if (req.namespaces !== null) add((p) => `namespace = ANY(${p}::text[])`, [...req.namespaces]);
      add((p) => `id > ${p}::bigint`, req.after ?? 0);
      if (req.action !== undefined) add((p) => `action = ${p}::text`, req.action);
      if (req.from !== undefined) add((p) => `at >= ${p}::timestamptz`, req.from);
      if (req.to !== undefined) add((p) => `at < ${p}::timestamptz`, req.to);
      values.push(req.limit);
      const { rows } = await pool.query<AuditRow>({
        text:
          'SELECT id, at, actor, action, namespace, object, manifest_digest, attestation_ids, details ' +
          `FROM audit_log WHERE ${where.join(' AND ')} ORDER BY id LIMIT $${values.length}`,
        values,
      });
      return rows.map((r) => ({
        id: Number(r.id),
        at: r.at,
        actor: r.actor,
        action: r.action,
        namespace: r.namespace,
        object: r.object,
        manifestDigest: r.manifest_digest,
        attestationIds: r.attestation_ids,
        details: r.details,
      }));
    },
  };
}
