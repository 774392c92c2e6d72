import type pg from 'pg';

/** Who a signing certificate belongs to: the service's runtime signer, or one tenant's own key. */
export type SignerScope = { scope: 'service' } | { scope: 'customer'; namespace: string };

/** One signing certificate the service has signed with (`signer_certificates`). */
export interface SignerCertificate {
  /** `sha256:<hex>` of the leaf's DER: what records carry as `cert_chain_ref`. */
  readonly certChainRef: string;
  /** `sha256:<hex>` of the key's SubjectPublicKeyInfo DER: the records' `key_id`. */
  readonly keyId: string;
  readonly owner: SignerScope;
  readonly algorithm: string;
  /** PEM, leaf first, then intermediates. */
  readonly chainPem: string;
  /** PEM of the CA certificates the chain was loaded with (may be empty). */
  readonly caPem: string;
  readonly notBefore: Date;
  readonly notAfter: Date;
  /** When a process of this service first held it (rotation order). */
  readonly firstSeen: Date;
}

export type NewSignerCertificate = Omit<SignerCertificate, 'firstSeen'>;

export interface SignerCertificateRepository {
  /** Inserts once per certificate; true when this call inserted it. */
  record(cert: NewSignerCertificate): Promise<boolean>;
  get(certChainRef: string): Promise<SignerCertificate | null>;
  /** Every certificate of one owner (or of all owners), oldest `firstSeen` first. */
  list(owner?: SignerScope): Promise<SignerCertificate[]>;
}

interface Row {
  cert_chain_ref: string;
  key_id: string;
  scope: 'service' | 'customer';
  namespace: string | null;
  algorithm: string;
  chain_pem: string;
  ca_pem: string;
  not_before: Date;
  not_after: Date;
  first_seen: Date;
}

const COLUMNS =
  'cert_chain_ref, key_id, scope, namespace, algorithm, chain_pem, ca_pem, not_before, not_after, first_seen';

const toCert = (r: Row): SignerCertificate => ({
  certChainRef: r.cert_chain_ref,
  keyId: r.key_id,
  owner: r.scope === 'customer' ? { scope: 'customer', namespace: r.namespace ?? '' } : { scope: 'service' },
  algorithm: r.algorithm,
  chainPem: r.chain_pem,
  caPem: r.ca_pem,
  notBefore: r.not_before,
  notAfter: r.not_after,
  firstSeen: r.first_seen,
});

export function signerCertificateRepository(pool: pg.Pool): SignerCertificateRepository {
  return {
    async record(c) {
      const { rowCount } = await pool.query({
        name: 'signer_certificates_insert',
        text: `INSERT INTO signer_certificates
                 (cert_chain_ref, key_id, scope, namespace, algorithm, chain_pem, ca_pem, not_before, not_after)
               VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9) ON CONFLICT (cert_chain_ref) DO NOTHING`,
        values: [
          c.certChainRef,
          c.keyId,
          c.owner.scope,
          c.owner.scope === 'customer' ? c.owner.namespace : null,
          c.algorithm,
          c.chainPem,
          c.caPem,
          c.notBefore,
          c.notAfter,
        ],
      });
      return rowCount === 1;
    },

    async get(ref) {
      const { rows } = await pool.query<Row>({
        name: 'signer_certificates_get',
        text: `SELECT ${COLUMNS} FROM signer_certificates WHERE cert_chain_ref = $1`,
        values: [ref],
      });
      return rows[0] ? toCert(rows[0]) : null;
    },

    async list(owner) {
      const { rows } =
        owner === undefined
          ? await pool.query<Row>({
              name: 'signer_certificates_all',
              text: `SELECT ${COLUMNS} FROM signer_certificates ORDER BY first_seen, cert_chain_ref`,
            })
          : await pool.query<Row>({
              name: 'signer_certificates_of',
              text: `SELECT ${COLUMNS} FROM signer_certificates
                     WHERE scope = $1 AND namespace IS NOT DISTINCT FROM $2
                     ORDER BY first_seen, cert_chain_ref`,
              values: [owner.scope, owner.scope === 'customer' ? owner.namespace : null],
            });
      return rows.map(toCert);
    },
  };
}
