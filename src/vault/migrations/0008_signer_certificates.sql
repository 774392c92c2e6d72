-- Every signing certificate the service has signed with, kept for as long as the vault: records
-- name their certificate by `cert_chain_ref` (`sha256:<hex>` of the leaf's DER) and their key by
-- `key_id` (`sha256:<hex>` of its SubjectPublicKeyInfo DER), so a record signed years ago, with a
-- key rotated away since, is still verified against the exact chain it was made with.
--
-- A row is written (once, by whichever process first holds the signer) before any record signed
-- with that certificate commits. Append-only like the records: a certificate that was used is
-- never forgotten; rotation order is `first_seen`.
CREATE TABLE signer_certificates (
  cert_chain_ref text PRIMARY KEY,
  key_id text NOT NULL,
  -- `service` (SIGNER_SECRET, the runtime trust signer) or `customer` (a tenant's
  -- CUSTOMER_SIGNER_SECRET); `namespace` is the tenant's for `customer`, NULL for `service`.
  scope text NOT NULL,
  namespace text,
  algorithm text NOT NULL,
  -- PEM: the leaf, then intermediates (tls.crt); the CA certificates of ca.crt.
  chain_pem text NOT NULL,
  ca_pem text NOT NULL DEFAULT '',
  not_before timestamptz NOT NULL,
  not_after timestamptz NOT NULL,
  first_seen timestamptz NOT NULL DEFAULT clock_timestamp(),
  CONSTRAINT signer_certificates_scope CHECK (
    (scope = 'service' AND namespace IS NULL) OR (scope = 'customer' AND namespace IS NOT NULL)),
  CONSTRAINT signer_certificates_ref CHECK (cert_chain_ref ~ '^sha256:[0-9a-f]{64}$'),
  CONSTRAINT signer_certificates_key CHECK (key_id ~ '^sha256:[0-9a-f]{64}$')
);
CREATE INDEX signer_certificates_key_id ON signer_certificates (key_id);
CREATE INDEX signer_certificates_scope_seen ON signer_certificates (scope, namespace, first_seen);

CREATE TRIGGER signer_certificates_append_only
  BEFORE UPDATE OR DELETE OR TRUNCATE ON signer_certificates
  FOR EACH STATEMENT EXECUTE FUNCTION vault_reject_change();

GRANT SELECT, INSERT ON signer_certificates TO vault_writer;
