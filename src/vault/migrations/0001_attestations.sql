-- Attestation vault, system of record: append-only attestations with a hash chain, the chain
-- head that serializes appends, the append-only audit log, and the runtime role.
-- 0002 and later are free for the runs/artifacts mirror and the transparency queue.

-- Runtime role. The service's pool connects with `-c role=vault_writer` (startup option), so even
-- an owner login runs with only these privileges. Roles are cluster-wide: several vault databases
-- in one cluster share it, and concurrent migrations may race to create it.
DO $$
BEGIN
  IF NOT EXISTS (SELECT FROM pg_catalog.pg_roles WHERE rolname = 'vault_writer') THEN
    CREATE ROLE vault_writer NOLOGIN;
  END IF;
EXCEPTION WHEN duplicate_object OR unique_violation THEN
  NULL;
END
$$;

DO $$
BEGIN
  EXECUTE format('GRANT USAGE ON SCHEMA %I TO vault_writer', current_schema());
END
$$;

-- One row per attestation. `id` (UUIDv7), `seq` and `prev_digest` are assigned under the chain-head
-- lock, so id order = seq order = commit order, and `created_at` never decreases along seq (the
-- time-window query relies on that to turn [from, to) into an id range).
CREATE TABLE attestations (
  id uuid PRIMARY KEY,
  seq bigint NOT NULL,
  namespace text NOT NULL,
  run_id uuid,
  step_id text,
  kind text NOT NULL,
  subjects text[] NOT NULL,
  artifact_digests text[] NOT NULL DEFAULT '{}',
  predicate_type text NOT NULL,
  policy_pack text,
  policy_version text,
  capability_token_ids text[] NOT NULL DEFAULT '{}',
  envelope jsonb NOT NULL,
  digest text NOT NULL,
  prev_digest text NOT NULL,
  signature jsonb NOT NULL,
  c2pa_manifest_ref text,
  created_at timestamptz NOT NULL DEFAULT date_trunc('milliseconds', clock_timestamp()),
  CONSTRAINT attestations_seq_key UNIQUE (seq),
  -- An envelope is stored once: a retried append returns the stored row (idempotency).
  CONSTRAINT attestations_digest_key UNIQUE (digest),
  CONSTRAINT attestations_seq_positive CHECK (seq > 0),
  CONSTRAINT attestations_id_v7 CHECK (substr(id::text, 15, 1) = '7'),
  CONSTRAINT attestations_namespace_nonempty CHECK (namespace <> ''),
  CONSTRAINT attestations_kind_known
    CHECK (kind IN ('run', 'step', 'artifact', 'policy', 'capability', 'aibom')),
  -- `[0-9a-f]+` plus a length test: a bounded repeat `{64}` costs PostgreSQL's regex engine ~7 µs a
  -- row, which alone took a third of bulk-insert throughput.
  CONSTRAINT attestations_digest_format CHECK (length(digest) = 71 AND digest ~ '^sha256:[0-9a-f]+$'),
  CONSTRAINT attestations_prev_digest_format
    CHECK (length(prev_digest) = 71 AND prev_digest ~ '^sha256:[0-9a-f]+$'),
  CONSTRAINT attestations_step_needs_run CHECK (step_id IS NULL OR run_id IS NOT NULL),
  CONSTRAINT attestations_version_needs_pack CHECK (policy_version IS NULL OR policy_pack IS NOT NULL),
  CONSTRAINT attestations_envelope_object CHECK (jsonb_typeof(envelope) = 'object'),
  CONSTRAINT attestations_signature_object CHECK (jsonb_typeof(signature) = 'object')
);

-- Every query orders by id and pages with `id > $after`; each filter has an index that either
-- yields id order directly (btree ending in id) or a small candidate set (GIN on the arrays).
CREATE INDEX attestations_namespace_id ON attestations (namespace, id);
CREATE INDEX attestations_run_id ON attestations (run_id, id) WHERE run_id IS NOT NULL;
CREATE INDEX attestations_policy_id ON attestations (policy_pack, policy_version, id)
  WHERE policy_pack IS NOT NULL;
CREATE INDEX attestations_subjects ON attestations USING gin (subjects);
CREATE INDEX attestations_artifact_digests ON attestations USING gin (artifact_digests);
CREATE INDEX attestations_capability_token_ids ON attestations USING gin (capability_token_ids);
CREATE INDEX attestations_created_at_id ON attestations (created_at, id);

-- The chain head: one row, locked FOR UPDATE by every append, which serializes writers and gives
-- them the previous digest, the id floor and the time floor.
CREATE TABLE vault_head (
  singleton boolean PRIMARY KEY DEFAULT true CHECK (singleton),
  last_seq bigint NOT NULL,
  last_id uuid,
  last_digest text NOT NULL,
  last_created_at timestamptz
);
INSERT INTO vault_head (last_seq, last_digest)
VALUES (0, 'sha256:0000000000000000000000000000000000000000000000000000000000000000');

-- Append-only audit trail of everything that leaves the service (exports, downloads).
CREATE TABLE audit_log (
  id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
  at timestamptz NOT NULL DEFAULT clock_timestamp(),
  actor text NOT NULL,
  action text NOT NULL,
  namespace text,
  object text,
  manifest_digest text,
  attestation_ids text[] NOT NULL DEFAULT '{}',
  details jsonb NOT NULL DEFAULT '{}'
);
CREATE INDEX audit_log_namespace_at ON audit_log (namespace, at);

-- Key of the pagination-cursor MAC, shared by all replicas (a cursor from one sidecar replica is
-- valid on the next). 244 random bits from gen_random_uuid (pg_strong_random).
CREATE TABLE vault_cursor_key (
  singleton boolean PRIMARY KEY DEFAULT true CHECK (singleton),
  key bytea NOT NULL CHECK (length(key) >= 32)
);
INSERT INTO vault_cursor_key (key)
VALUES (decode(replace(gen_random_uuid()::text || gen_random_uuid()::text, '-', ''), 'hex'));

-- Append-only, enforced by the database for every role including the owner (a superuser can still
-- disable triggers; the hash chain makes that detectable). Statement-level, so the check costs
-- nothing per row and fires even when no row matches.
CREATE FUNCTION vault_reject_change() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
  RAISE EXCEPTION '% on % is not allowed: the table is append-only', TG_OP, TG_TABLE_NAME
    USING ERRCODE = 'restrict_violation';
END
$$;

CREATE TRIGGER attestations_append_only
  BEFORE UPDATE OR DELETE OR TRUNCATE ON attestations
  FOR EACH STATEMENT EXECUTE FUNCTION vault_reject_change();
CREATE TRIGGER audit_log_append_only
  BEFORE UPDATE OR DELETE OR TRUNCATE ON audit_log
  FOR EACH STATEMENT EXECUTE FUNCTION vault_reject_change();
CREATE TRIGGER vault_head_fixed
  BEFORE INSERT OR DELETE OR TRUNCATE ON vault_head
  FOR EACH STATEMENT EXECUTE FUNCTION vault_reject_change();
CREATE TRIGGER vault_cursor_key_fixed
  BEFORE INSERT OR DELETE OR TRUNCATE ON vault_cursor_key
  FOR EACH STATEMENT EXECUTE FUNCTION vault_reject_change();

-- The head only moves forward, and only onto a stored row: a buggy or hostile writer cannot point
-- it elsewhere (one index probe per appended batch).
CREATE FUNCTION vault_head_advance() RETURNS trigger
LANGUAGE plpgsql SET search_path FROM CURRENT AS $$
BEGIN
  IF NEW.last_seq < OLD.last_seq THEN
    RAISE EXCEPTION 'vault head cannot move backwards (% -> %)', OLD.last_seq, NEW.last_seq
      USING ERRCODE = 'restrict_violation';
  END IF;
  IF NEW.last_seq <> OLD.last_seq AND NOT EXISTS (
    SELECT FROM attestations a
    WHERE a.seq = NEW.last_seq AND a.id = NEW.last_id AND a.digest = NEW.last_digest
      AND a.created_at = NEW.last_created_at
  ) THEN
    RAISE EXCEPTION 'vault head must point at the stored attestation with seq %', NEW.last_seq
      USING ERRCODE = 'restrict_violation';
  END IF;
  RETURN NEW;
END
$$;

CREATE TRIGGER vault_head_advance
  BEFORE UPDATE ON vault_head
  FOR EACH ROW EXECUTE FUNCTION vault_head_advance();

-- Runtime privileges: read and append, never rewrite. FOR UPDATE on the head needs its UPDATE
-- privilege; the key column `singleton` stays read-only.
REVOKE ALL ON attestations, vault_head, audit_log, vault_cursor_key FROM PUBLIC;
GRANT SELECT, INSERT ON attestations, audit_log TO vault_writer;
GRANT USAGE ON SEQUENCE audit_log_id_seq TO vault_writer;
GRANT SELECT, UPDATE (last_seq, last_id, last_digest, last_created_at) ON vault_head TO vault_writer;
GRANT SELECT ON vault_cursor_key TO vault_writer;
GRANT SELECT ON schema_migrations TO vault_writer;
