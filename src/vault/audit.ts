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

/** `audit_log`: append-only like the attestations (trigger + privileges). */
export interface AuditRepository {
  record(entry: AuditEntry): Promise<AuditRecord>;
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
  };
}
