-- Run mirror, artifact metadata records and record claims.

-- Mirror of Run custom resources (spec and pipeline status), written by the controller so the API
-- and `service-ctl aibom generate` can read a run without the Kubernetes API. Mutable: it follows
-- the Run; the attestations are the immutable record.
CREATE TABLE runs (
  id uuid PRIMARY KEY,
  namespace text NOT NULL,
  name text NOT NULL,
  spec jsonb NOT NULL,
  status jsonb NOT NULL DEFAULT '{}',
  phase text,
  created_at timestamptz NOT NULL DEFAULT clock_timestamp(),
  updated_at timestamptz NOT NULL DEFAULT clock_timestamp(),
  CONSTRAINT runs_spec_object CHECK (jsonb_typeof(spec) = 'object')
);
CREATE INDEX runs_namespace_name ON runs (namespace, name);

-- Logical keys of records already made (`step:<run>:<step>`, `aibom:<run>`, …), inserted in the
-- same transaction as the attestations they stand for. Signatures are randomised (ECDSA), so the
-- envelope digest cannot deduplicate a retried reconcile; this key does: a second writer's insert
-- conflicts and its whole append rolls back.
CREATE TABLE attestation_claims (
  key text PRIMARY KEY,
  attestation_ids uuid[] NOT NULL,
  created_at timestamptz NOT NULL DEFAULT clock_timestamp()
);

-- Artifact metadata records (the spec's object-store metadata table), one per run and kind:
-- exactly one AIBOM per run. Immutable; the transparency state that changes later lives in the
-- transparency tables and is joined at read time.
CREATE TABLE artifacts (
  run_id uuid NOT NULL,
  kind text NOT NULL,
  namespace text NOT NULL,
  object_key text NOT NULL,
  digest text NOT NULL,
  metadata jsonb NOT NULL,
  created_at timestamptz NOT NULL DEFAULT clock_timestamp(),
  PRIMARY KEY (run_id, kind),
  CONSTRAINT artifacts_metadata_object CHECK (jsonb_typeof(metadata) = 'object')
);

CREATE TRIGGER attestation_claims_append_only
  BEFORE UPDATE OR DELETE OR TRUNCATE ON attestation_claims
  FOR EACH STATEMENT EXECUTE FUNCTION vault_reject_change();
CREATE TRIGGER artifacts_append_only
  BEFORE UPDATE OR DELETE OR TRUNCATE ON artifacts
  FOR EACH STATEMENT EXECUTE FUNCTION vault_reject_change();

GRANT SELECT, INSERT, UPDATE ON runs TO vault_writer;
GRANT SELECT, INSERT ON attestation_claims, artifacts TO vault_writer;
