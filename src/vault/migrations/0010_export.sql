-- Export and key distribution (docs/export.md, docs/api.md "Keys"): every certificate chain (or bare
-- public key) that ever signed a record, a C2PA manifest or a SCITT receipt, recorded the first
-- time it is used, so the key-distribution endpoint can resolve `cert_chain_ref` and key ids of
-- records signed before a rotation (issue 15 builds timestamps and rotation on this table).

CREATE TABLE signer_certificates (
  -- `sha256:<hex>` of the leaf certificate's DER (the records' `signature.cert_chain_ref`); for a
  -- bare key, its key id.
  cert_ref text NOT NULL,
  -- `sha256:<hex>` of the leaf's SubjectPublicKeyInfo DER (the records' `signature.key_id`).
  key_id text NOT NULL,
  -- '' for the service's own keys (readable by every authenticated caller); otherwise the tenant
  -- namespace whose customer-supplied key it is (readable by callers who may read that namespace).
  namespace text NOT NULL DEFAULT '',
  -- `signer` (envelopes, AIBOMs, C2PA manifests, SCITT statements) or `log` (SCITT receipts).
  role text NOT NULL,
  -- PEM: leaf first, then intermediates; or one PUBLIC KEY block for a bare key.
  chain_pem text NOT NULL,
  -- PEM of the CA certificates the signer was loaded with (its `ca.crt`); may be empty.
  ca_pem text NOT NULL DEFAULT '',
  not_before timestamptz,
  not_after timestamptz,
  first_used_at timestamptz NOT NULL DEFAULT date_trunc('milliseconds', clock_timestamp()),
  PRIMARY KEY (cert_ref, namespace, role),
  CONSTRAINT signer_certificates_ref_format CHECK (cert_ref ~ '^sha256:[0-9a-f]{64}$'),
  CONSTRAINT signer_certificates_key_id_format CHECK (key_id ~ '^sha256:[0-9a-f]{64}$'),
  CONSTRAINT signer_certificates_role_known CHECK (role IN ('signer', 'log'))
);
CREATE INDEX signer_certificates_key_id ON signer_certificates (key_id);

CREATE TRIGGER signer_certificates_append_only
  BEFORE UPDATE OR DELETE OR TRUNCATE ON signer_certificates
  FOR EACH STATEMENT EXECUTE FUNCTION vault_reject_change();

-- Auditors page through the audit log by namespace in id order.
CREATE INDEX audit_log_namespace_id ON audit_log (namespace, id);

REVOKE ALL ON signer_certificates FROM PUBLIC;
GRANT SELECT, INSERT ON signer_certificates TO vault_writer;
