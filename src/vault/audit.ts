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

/** `audit_log`: append-only like the attestations (trigger + privileges). */
export interface AuditRepository {
  record(entry: AuditEntry): Promise<AuditRecord>;
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
