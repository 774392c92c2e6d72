-- Transparency (SCITT): the service's own append-only RFC 9162 Merkle log (the `local` backend and
-- the log served over SCRAPI), and the job queue that publishes every new attestation.
-- See src/transparency/ and docs/transparency.md.

-- One row per registered signed statement, in log order. `idx` is the RFC 9162 leaf index,
-- gapless from 0 (assigned under the head lock); `leaf_hash` = SHA-256(0x00 || statement) where
-- `statement` is the entry (COSE_Sign1 with an empty unprotected header); `entry_id` is the hex of
-- `leaf_hash` (content-addressed: the same statement is one entry, never two). `receipt` is the
-- receipt issued at registration (inclusion in the tree of idx + 1 leaves) and never changes.
CREATE TABLE scitt_log_entries (
  idx bigint PRIMARY KEY,
  entry_id text NOT NULL,
  statement bytea NOT NULL,
  leaf_hash bytea NOT NULL,
  receipt bytea NOT NULL,
  created_at timestamptz NOT NULL DEFAULT date_trunc('milliseconds', clock_timestamp()),
  CONSTRAINT scitt_log_entries_entry_id_key UNIQUE (entry_id),
  CONSTRAINT scitt_log_entries_leaf_hash_key UNIQUE (leaf_hash),
  CONSTRAINT scitt_log_entries_idx_nonnegative CHECK (idx >= 0),
  CONSTRAINT scitt_log_entries_leaf_hash_size CHECK (length(leaf_hash) = 32),
  CONSTRAINT scitt_log_entries_entry_id_is_leaf CHECK (entry_id = encode(leaf_hash, 'hex'))
);

-- Hashes of the perfect subtrees (2^level leaves starting at idx * 2^level, level >= 1; level 0 is
-- scitt_log_entries.leaf_hash). A perfect subtree never changes once complete, so each is written
-- once, by the append that completes it (amortised one row per append). Any root, inclusion proof
-- or consistency proof for any tree size needs O(log n) of these rows, fetched by primary key.
CREATE TABLE scitt_log_nodes (
  level smallint NOT NULL,
  idx bigint NOT NULL,
  hash bytea NOT NULL,
  PRIMARY KEY (level, idx),
  CONSTRAINT scitt_log_nodes_level_range CHECK (level BETWEEN 1 AND 62),
  CONSTRAINT scitt_log_nodes_idx_nonnegative CHECK (idx >= 0),
  CONSTRAINT scitt_log_nodes_hash_size CHECK (length(hash) = 32)
);

-- The tree head: one row, locked FOR UPDATE by every append (serializes appenders and gives them
-- the size), holding the MTH of the whole log.
CREATE TABLE scitt_log_head (
  singleton boolean PRIMARY KEY DEFAULT true CHECK (singleton),
  tree_size bigint NOT NULL CHECK (tree_size >= 0),
  root_hash bytea NOT NULL CHECK (length(root_hash) = 32),
  updated_at timestamptz
);
INSERT INTO scitt_log_head (tree_size, root_hash) VALUES (0, sha256(''::bytea));

-- The log is append-only for every role, the owner included (same function as 0001).
CREATE TRIGGER scitt_log_entries_append_only
  BEFORE UPDATE OR DELETE OR TRUNCATE ON scitt_log_entries
  FOR EACH STATEMENT EXECUTE FUNCTION vault_reject_change();
CREATE TRIGGER scitt_log_nodes_append_only
  BEFORE UPDATE OR DELETE OR TRUNCATE ON scitt_log_nodes
  FOR EACH STATEMENT EXECUTE FUNCTION vault_reject_change();
CREATE TRIGGER scitt_log_head_fixed
  BEFORE INSERT OR DELETE OR TRUNCATE ON scitt_log_head
  FOR EACH STATEMENT EXECUTE FUNCTION vault_reject_change();

-- The head only grows, and only onto a stored entry.
CREATE FUNCTION scitt_log_head_advance() RETURNS trigger
LANGUAGE plpgsql SET search_path FROM CURRENT AS $$
BEGIN
  IF NEW.tree_size < OLD.tree_size THEN
    RAISE EXCEPTION 'the SCITT log cannot shrink (% -> %)', OLD.tree_size, NEW.tree_size
      USING ERRCODE = 'restrict_violation';
  END IF;
  IF NEW.tree_size <> OLD.tree_size AND NOT EXISTS (
    SELECT FROM scitt_log_entries e WHERE e.idx = NEW.tree_size - 1
  ) THEN
    RAISE EXCEPTION 'the SCITT log head must point at a stored entry (size %)', NEW.tree_size
      USING ERRCODE = 'restrict_violation';
  END IF;
  RETURN NEW;
END
$$;

CREATE TRIGGER scitt_log_head_advance
  BEFORE UPDATE ON scitt_log_head
  FOR EACH ROW EXECUTE FUNCTION scitt_log_head_advance();

-- The publication queue: one job per attestation (enqueued in the vault append transaction).
-- Mutable, as a queue is, with two rules enforced below: a published job (its receipt, entry id,
-- log position and backend) never changes and is never deleted, and the signed statement, once
-- chosen, stays the one that is (re)submitted, which makes at-least-once submission idempotent.
-- A claim is a lease: `next_attempt_at` moves to the lease end and `lease_token` names the holder;
-- a worker that dies leaves the job claimable again when the lease ends.
CREATE TABLE transparency_jobs (
  id uuid PRIMARY KEY DEFAULT gen_random_uuid(),
  -- References attestations(id), checked by transparency_jobs_reference below rather than by a
  -- declarative FOREIGN KEY: attestations are never updated or deleted, so an insert-time check is
  -- the same guarantee, and a foreign key would make `TRUNCATE attestations` fail with 0A000
  -- before the vault's append-only trigger can refuse it with 23001.
  attestation_id uuid NOT NULL,
  state text NOT NULL DEFAULT 'queued',
  attempts integer NOT NULL DEFAULT 0,
  last_error text,
  next_attempt_at timestamptz NOT NULL DEFAULT clock_timestamp(),
  lease_token uuid,
  statement bytea,
  entry_id text,
  log_index bigint,
  receipt bytea,
  backend text,
  published_at timestamptz,
  created_at timestamptz NOT NULL DEFAULT clock_timestamp(),
  updated_at timestamptz NOT NULL DEFAULT clock_timestamp(),
  CONSTRAINT transparency_jobs_attestation_id_key UNIQUE (attestation_id),
  CONSTRAINT transparency_jobs_state_known CHECK (state IN ('queued', 'published', 'failed')),
  CONSTRAINT transparency_jobs_attempts_nonnegative CHECK (attempts >= 0),
  CONSTRAINT transparency_jobs_backend_known CHECK (backend IS NULL OR backend IN ('local', 'scrapi')),
  CONSTRAINT transparency_jobs_published_complete CHECK (
    state <> 'published'
    OR (receipt IS NOT NULL AND entry_id IS NOT NULL AND backend IS NOT NULL AND statement IS NOT NULL
        AND published_at IS NOT NULL)
  )
);
-- The claim query: due queued jobs in due order.
CREATE INDEX transparency_jobs_due ON transparency_jobs (next_attempt_at, id) WHERE state = 'queued';

CREATE FUNCTION transparency_jobs_reference() RETURNS trigger
LANGUAGE plpgsql SET search_path FROM CURRENT AS $$
BEGIN
  IF NOT EXISTS (SELECT FROM attestations a WHERE a.id = NEW.attestation_id) THEN
    RAISE EXCEPTION 'attestation % does not exist', NEW.attestation_id
      USING ERRCODE = 'foreign_key_violation';
  END IF;
  RETURN NEW;
END
$$;

CREATE TRIGGER transparency_jobs_reference
  BEFORE INSERT ON transparency_jobs
  FOR EACH ROW EXECUTE FUNCTION transparency_jobs_reference();

CREATE FUNCTION transparency_jobs_guard() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
  IF TG_OP = 'DELETE' THEN
    IF OLD.state = 'published' THEN
      RAISE EXCEPTION 'transparency job % is published: its receipt is kept forever', OLD.id
        USING ERRCODE = 'restrict_violation';
    END IF;
    RETURN OLD;
  END IF;
  IF OLD.state = 'published' THEN
    RAISE EXCEPTION 'transparency job % is published and immutable', OLD.id
      USING ERRCODE = 'restrict_violation';
  END IF;
  IF NEW.id <> OLD.id OR NEW.attestation_id <> OLD.attestation_id OR NEW.created_at <> OLD.created_at THEN
    RAISE EXCEPTION 'transparency job identity cannot change' USING ERRCODE = 'restrict_violation';
  END IF;
  IF OLD.statement IS NOT NULL AND NEW.statement IS DISTINCT FROM OLD.statement THEN
    RAISE EXCEPTION 'transparency job %: the signed statement is fixed once chosen', OLD.id
      USING ERRCODE = 'restrict_violation';
  END IF;
  RETURN NEW;
END
$$;

CREATE TRIGGER transparency_jobs_guard
  BEFORE UPDATE OR DELETE ON transparency_jobs
  FOR EACH ROW EXECUTE FUNCTION transparency_jobs_guard();
CREATE TRIGGER transparency_jobs_no_truncate
  BEFORE TRUNCATE ON transparency_jobs
  FOR EACH STATEMENT EXECUTE FUNCTION vault_reject_change();

-- Runtime privileges: append to the log, move the head, work the queue; never delete.
REVOKE ALL ON scitt_log_entries, scitt_log_nodes, scitt_log_head, transparency_jobs FROM PUBLIC;
GRANT SELECT, INSERT ON scitt_log_entries, scitt_log_nodes TO vault_writer;
GRANT SELECT, UPDATE (tree_size, root_hash, updated_at) ON scitt_log_head TO vault_writer;
GRANT SELECT, INSERT ON transparency_jobs TO vault_writer;
GRANT UPDATE (state, attempts, last_error, next_attempt_at, lease_token, statement, entry_id, log_index,
  receipt, backend, published_at, updated_at) ON transparency_jobs TO vault_writer;
