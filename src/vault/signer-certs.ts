import type pg from 'pg';

/** One signing identity as the key-distribution endpoint serves it (see 0010_export.sql). */
export interface SignerCertificate {
  /** `sha256:<hex>` of the leaf DER (`signature.cert_chain_ref`); the key id for a bare key. */
  readonly certRef: string;
  /** `sha256:<hex>` of the SubjectPublicKeyInfo DER (`signature.key_id`). */
  readonly keyId: string;
  /** '' for the service's own keys; else the tenant namespace of a customer-supplied key. */
  readonly namespace: string;
  readonly role: 'signer' | 'log';
  /** Leaf first, then intermediates; or one PUBLIC KEY block. */
  readonly chainPem: string;
  readonly caPem: string;
  readonly notBefore: Date | null;
  readonly notAfter: Date | null;
  readonly firstUsedAt: Date;
}

export type NewSignerCertificate = Omit<SignerCertificate, 'firstUsedAt'>;

/** `signer_certificates`: insert-once, append-only. */
export interface SignerCertificateRepository {
  /** Stores it unless the same (ref, namespace, role) is stored already; idempotent. */
  record(entry: NewSignerCertificate): Promise<void>;
  /**
   * Entries whose `cert_ref` or `key_id` is `ref`, limited to `namespaces` ('' = the service's).
   * Oldest first.
   */
  resolve(ref: string, namespaces: readonly string[]): Promise<SignerCertificate[]>;
  /** Every entry of `namespaces` ('' = the service's), oldest first. */
  list(namespaces: readonly string[]): Promise<SignerCertificate[]>;
  /** Every namespace holding customer keys (for callers allowed cluster-wide). */
  namespaces(): Promise<string[]>;
}

interface Row {
  cert_ref: string;
  key_id: string;
  namespace: string;
  role: 'signer' | 'log';
  chain_pem: string;
  ca_pem: string;
  not_before: Date | null;
  not_after: Date | null;
  first_used_at: Date;
}

const COLUMNS = 'cert_ref, key_id, namespace, role, chain_pem, ca_pem, not_before, not_after, first_used_at';

const toEntry = (r: Row): SignerCertificate => ({
  certRef: r.cert_ref,
  keyId: r.key_id,
  namespace: r.namespace,
  role: r.role,
  chainPem: r.chain_pem,
  caPem: r.ca_pem,
  notBefore: r.not_before,
  notAfter: r.not_after,
  firstUsedAt: r.first_used_at,
});

export function signerCertificateRepository(pool: pg.Pool): SignerCertificateRepository {
  return {
    async record(e) {
      await pool.query({
        name: 'vault_signer_cert_insert',
        text:
          `INSERT INTO signer_certificates (cert_ref, key_id, namespace, role, chain_pem, ca_pem, not_before, not_after) ` +
          `VALUES ($1, $2, $3, $4, $5, $6, $7, $8) ON CONFLICT DO NOTHING`,
        values: [e.certRef, e.keyId, e.namespace, e.role, e.chainPem, e.caPem, e.notBefore, e.notAfter],
      });
    },
    async resolve(ref, namespaces) {
      const { rows } = await pool.query<Row>({
        name: 'vault_signer_cert_resolve',
        text:
          `SELECT ${COLUMNS} FROM signer_certificates WHERE (cert_ref = $1 OR key_id = $1) ` +
          `AND namespace = ANY($2::text[]) ORDER BY first_used_at, cert_ref, namespace, role`,
        values: [ref, [...namespaces]],
      });
      return rows.map(toEntry);
    },
    async list(namespaces) {
      const { rows } = await pool.query<Row>({
        name: 'vault_signer_cert_list',
        text:
          `SELECT ${COLUMNS} FROM signer_certificates WHERE namespace = ANY($1::text[]) ` +
          `ORDER BY first_used_at, cert_ref, namespace, role`,
        values: [[...namespaces]],
      });
      return rows.map(toEntry);
    },
    async namespaces() {
      const { rows } = await pool.query<{ namespace: string }>({
        name: 'vault_signer_cert_namespaces',
        text: `SELECT DISTINCT namespace FROM signer_certificates WHERE namespace <> '' ORDER BY namespace`,
      });
      return rows.map((r) => r.namespace);
    },
  };
}
