-- Losses the service found after the database lost writes it had acknowledged (an asynchronous
-- standby promoted without the last transactions, a restore from an older backup): what the world
-- outside the vault still shows (a Run's status, an AIBOM in the bucket, a signed checkpoint kept
-- in the bucket) and the vault no longer holds. A loss is written here before anything is recorded
-- again in its place, so a second history is never made without the vault saying so; it is kept
-- for as long as the vault (append-only, for every role). See src/vault/losses.ts and
-- docs/failover.md.

CREATE TABLE vault_losses (
  id uuid PRIMARY KEY DEFAULT gen_random_uuid(),
  -- `run`: records of one Run (and its AIBOM); `checkpoint`: a signed checkpoint the vault's tree
  -- no longer matches.
  scope text NOT NULL,
  -- SHA-256 of what was found: one loss is recorded once, however often (and by whom) it is seen.
  fingerprint text NOT NULL UNIQUE,
  namespace text,
  run_id uuid,
  -- Attestation ids named outside the vault that it does not hold (dangling references).
  missing_ids uuid[] NOT NULL DEFAULT '{}',
  -- What was claimed (the Run's status fields, the AIBOM's metadata, the checkpoint) and what the
  -- vault held when it was found.
  details jsonb NOT NULL,
  detected_by text NOT NULL,
  detected_at timestamptz NOT NULL DEFAULT clock_timestamp(),
  CONSTRAINT vault_losses_scope CHECK (scope IN ('run', 'checkpoint')),
  CONSTRAINT vault_losses_run CHECK ((scope = 'run') = (run_id IS NOT NULL AND namespace IS NOT NULL)),
  CONSTRAINT vault_losses_fingerprint CHECK (length(fingerprint) = 71 AND fingerprint ~ '^sha256:[0-9a-f]+$')
);

CREATE INDEX vault_losses_by_run ON vault_losses (run_id, detected_at) WHERE run_id IS NOT NULL;

CREATE TRIGGER vault_losses_append_only
  BEFORE UPDATE OR DELETE OR TRUNCATE ON vault_losses
  FOR EACH STATEMENT EXECUTE FUNCTION vault_reject_change();

REVOKE ALL ON vault_losses FROM PUBLIC;
GRANT SELECT, INSERT ON vault_losses TO vault_writer;
