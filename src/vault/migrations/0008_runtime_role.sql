-- Roles that hold (docs/vault.md "Roles"). The runtime role `vault_writer` keeps INSERT on the
-- append-only tables and SELECT where it reads, and loses every UPDATE: the heads, the run mirror
-- and the transparency queue move only through the functions below, which run as the owner
-- (SECURITY DEFINER, fixed search_path) and check what they are asked to do.
--
-- Before: vault_writer could UPDATE vault_head.last_id/last_digest without moving last_seq (the
-- head trigger only checked a moving seq; one such UPDATE made every later append fail),
-- scitt_log_head.root_hash likewise, every column of a run's mirror (spec included) and every
-- state column of a transparency job.

-- Every function below resolves names in the vault's schema, then pg_temp last: a temporary object
-- the caller creates cannot shadow a table a SECURITY DEFINER function uses.
DO $$
BEGIN
  EXECUTE format('SET LOCAL search_path = %I, pg_temp', current_schema());
END
$$;

-- The runtime role creates nothing (PostgreSQL 15+ already revokes this from PUBLIC; older
-- clusters did not).
DO $$
BEGIN
  EXECUTE format('REVOKE CREATE ON SCHEMA %I FROM PUBLIC', current_schema());
EXCEPTION WHEN insufficient_privilege THEN
  RAISE WARNING 'could not revoke CREATE on schema % from PUBLIC: do it as its owner', current_schema();
END
$$;

-- ---------------------------------------------------------------------------------------------
-- The vault chain head.

-- The head locked for an append: the only way the runtime reads it FOR UPDATE (which needs UPDATE
-- privilege, now revoked).
CREATE FUNCTION vault_lock_head()
RETURNS TABLE (last_seq bigint, last_id uuid, last_digest text, last_created_at timestamptz)
LANGUAGE sql SECURITY DEFINER SET search_path FROM CURRENT AS $$
  SELECT h.last_seq, h.last_id, h.last_digest, h.last_created_at FROM vault_head h FOR UPDATE
$$;

-- Inserted rows must continue the chain at the head, and the head follows them. One statement per
-- append (COPY included): seq head+1, head+2, … with no gap, each prev_digest the digest before it,
-- ids strictly increasing above the head's, created_at never decreasing. A row that does not fit
-- fails the whole insert, so the runtime cannot plant a row that breaks every later append (a
-- stray seq) or move the head anywhere but onto the rows it just appended.
CREATE FUNCTION vault_chain_extend() RETURNS trigger
LANGUAGE plpgsql SECURITY DEFINER SET search_path FROM CURRENT AS $$
DECLARE
  h vault_head%ROWTYPE;
  bad bigint;
  last_row record;
BEGIN
  SELECT * INTO h FROM vault_head FOR UPDATE;
  WITH r AS (
    SELECT n.seq, n.id, n.digest, n.prev_digest, n.created_at,
           row_number() OVER w AS k,
           lag(n.id) OVER w AS p_id, lag(n.digest) OVER w AS p_digest, lag(n.created_at) OVER w AS p_at
    FROM new_rows n WINDOW w AS (ORDER BY n.seq)
  )
  SELECT r.seq INTO bad FROM r
  WHERE r.seq <> h.last_seq + r.k
     OR r.prev_digest <> coalesce(r.p_digest, h.last_digest)
     OR r.id <= coalesce(r.p_id, h.last_id, '00000000-0000-0000-0000-000000000000'::uuid)
     OR r.created_at < coalesce(r.p_at, h.last_created_at, '-infinity'::timestamptz)
  ORDER BY r.seq LIMIT 1;
  IF bad IS NOT NULL THEN
    RAISE EXCEPTION 'attestation seq % does not continue the chain at its head (seq %)', bad, h.last_seq
      USING ERRCODE = 'restrict_violation';
  END IF;
  SELECT n.seq, n.id, n.digest, n.created_at INTO last_row FROM new_rows n ORDER BY n.seq DESC LIMIT 1;
  IF FOUND THEN
    UPDATE vault_head SET last_seq = last_row.seq, last_id = last_row.id, last_digest = last_row.digest,
                          last_created_at = last_row.created_at;
  END IF;
  RETURN NULL;
END
$$;

CREATE TRIGGER attestations_chain_extend
  AFTER INSERT ON attestations REFERENCING NEW TABLE AS new_rows
  FOR EACH STATEMENT EXECUTE FUNCTION vault_chain_extend();

-- The head's own guard, for every role (the owner too): an update that does not move the seq may
-- change nothing (0001 let last_id/last_digest change under an unchanged seq).
CREATE OR REPLACE FUNCTION vault_head_advance() RETURNS trigger
LANGUAGE plpgsql SET search_path FROM CURRENT AS $$
BEGIN
  IF NEW.last_seq < OLD.last_seq THEN
    RAISE EXCEPTION 'vault head cannot move backwards (% -> %)', OLD.last_seq, NEW.last_seq
      USING ERRCODE = 'restrict_violation';
  END IF;
  IF NEW.last_seq = OLD.last_seq THEN
    IF NEW IS DISTINCT FROM OLD THEN
      RAISE EXCEPTION 'vault head at seq % cannot change without moving forward', OLD.last_seq
        USING ERRCODE = 'restrict_violation';
    END IF;
    RETURN NEW;
  END IF;
  IF NOT EXISTS (
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

REVOKE UPDATE ON vault_head FROM vault_writer;

-- ---------------------------------------------------------------------------------------------
-- The local SCITT log head.

-- RFC 9162 MTH of a node from its perfect subtrees' hashes, concatenated left to right (largest
-- first): the right fold SHA-256(0x01 || h0 || SHA-256(0x01 || h1 || … h(k-1))).
CREATE FUNCTION merkle_fold_right(hashes bytea) RETURNS bytea
LANGUAGE plpgsql IMMUTABLE STRICT SET search_path FROM CURRENT AS $$
DECLARE
  n int := length(hashes) / 32;
  acc bytea;
  i int;
BEGIN
  IF n = 0 OR length(hashes) % 32 <> 0 THEN
    RAISE EXCEPTION 'merkle_fold_right: % bytes is not a list of hashes', length(hashes);
  END IF;
  acc := substring(hashes FROM (n - 1) * 32 + 1 FOR 32);
  FOR i IN REVERSE (n - 1)..1 LOOP
    acc := sha256('\x01'::bytea || substring(hashes FROM (i - 1) * 32 + 1 FOR 32) || acc);
  END LOOP;
  RETURN acc;
END
$$;

CREATE FUNCTION scitt_log_lock_head() RETURNS TABLE (tree_size bigint, root_hash bytea)
LANGUAGE sql SECURITY DEFINER SET search_path FROM CURRENT AS $$
  SELECT h.tree_size, h.root_hash FROM scitt_log_head h FOR UPDATE
$$;

-- Stores a commit batch's new perfect subtrees and moves the head to `new_size` (strictly larger;
-- the head trigger checks the entry at new_size - 1 is stored). Each new subtree must hash from its
-- two stored children, and the root must be the fold of the stored perfect subtrees of [0, new_size)
-- (RFC 9162: SHA-256(0x01 || left || right); level 0 is an entry's leaf hash), so the runtime can
-- neither rewrite the root at a size nor store a subtree that does not match the entries.
CREATE FUNCTION scitt_log_advance(new_size bigint, new_root bytea, at timestamptz,
                                  levels smallint[], idxs bigint[], hashes bytea[])
RETURNS void
LANGUAGE plpgsql SECURITY DEFINER SET search_path FROM CURRENT AS $$
DECLARE
  old_size bigint;
  bad text;
  acc bytea;
  node bytea;
  start bigint := 0;
  k int;
BEGIN
  SELECT h.tree_size INTO old_size FROM scitt_log_head h FOR UPDATE;
  IF new_size <= old_size THEN
    RAISE EXCEPTION 'the SCITT log head only moves forward (% -> %)', old_size, new_size
      USING ERRCODE = 'restrict_violation';
  END IF;
  INSERT INTO scitt_log_nodes (level, idx, hash) SELECT * FROM unnest(levels, idxs, hashes);
  SELECT format('%s/%s', n.level, n.idx) INTO bad
  FROM unnest(levels, idxs, hashes) AS n(level, idx, hash)
  WHERE n.hash IS DISTINCT FROM sha256('\x01'::bytea
          || CASE WHEN n.level = 1
                  THEN (SELECT e.leaf_hash FROM scitt_log_entries e WHERE e.idx = 2 * n.idx)
                  ELSE (SELECT c.hash FROM scitt_log_nodes c WHERE c.level = n.level - 1 AND c.idx = 2 * n.idx) END
          || CASE WHEN n.level = 1
                  THEN (SELECT e.leaf_hash FROM scitt_log_entries e WHERE e.idx = 2 * n.idx + 1)
                  ELSE (SELECT c.hash FROM scitt_log_nodes c WHERE c.level = n.level - 1 AND c.idx = 2 * n.idx + 1) END)
  LIMIT 1;
  IF bad IS NOT NULL THEN
    RAISE EXCEPTION 'SCITT log subtree % does not hash from its children', bad USING ERRCODE = 'restrict_violation';
  END IF;
  -- The root of [0, new_size): its perfect subtrees left to right (largest first), folded from the right.
  FOR k IN REVERSE 62..0 LOOP
    IF (new_size >> k) & 1 = 1 THEN
      IF k = 0 THEN
        SELECT e.leaf_hash INTO node FROM scitt_log_entries e WHERE e.idx = start;
      ELSE
        SELECT c.hash INTO node FROM scitt_log_nodes c WHERE c.level = k AND c.idx = start >> k;
      END IF;
      IF node IS NULL THEN
        RAISE EXCEPTION 'SCITT log subtree %/% is missing', k, start >> k USING ERRCODE = 'restrict_violation';
      END IF;
      -- Collected left to right; folded below.
      acc := coalesce(acc, ''::bytea) || node;
      start := start + (1::bigint << k);
    END IF;
  END LOOP;
  IF merkle_fold_right(acc) IS DISTINCT FROM new_root THEN
    RAISE EXCEPTION 'SCITT log root at size % does not match its subtrees', new_size
      USING ERRCODE = 'restrict_violation';
  END IF;
  UPDATE scitt_log_head SET tree_size = new_size, root_hash = new_root, updated_at = at;
END
$$;

-- Same rule as the vault head, for every role: a head that does not grow does not change.
CREATE OR REPLACE FUNCTION scitt_log_head_advance() RETURNS trigger
LANGUAGE plpgsql SET search_path FROM CURRENT AS $$
BEGIN
  IF NEW.tree_size < OLD.tree_size THEN
    RAISE EXCEPTION 'the SCITT log cannot shrink (% -> %)', OLD.tree_size, NEW.tree_size
      USING ERRCODE = 'restrict_violation';
  END IF;
  IF NEW.tree_size = OLD.tree_size THEN
    IF NEW IS DISTINCT FROM OLD THEN
      RAISE EXCEPTION 'the SCITT log head at size % cannot change without growing', OLD.tree_size
        USING ERRCODE = 'restrict_violation';
    END IF;
    RETURN NEW;
  END IF;
  IF NOT EXISTS (SELECT FROM scitt_log_entries e WHERE e.idx = NEW.tree_size - 1) THEN
    RAISE EXCEPTION 'the SCITT log head must point at a stored entry (size %)', NEW.tree_size
      USING ERRCODE = 'restrict_violation';
  END IF;
  RETURN NEW;
END
$$;

REVOKE UPDATE ON scitt_log_head FROM vault_writer;
REVOKE INSERT ON scitt_log_nodes FROM vault_writer;

-- ---------------------------------------------------------------------------------------------
-- The run mirror: what the controller saw of each Run. The spec is immutable from creation (the
-- Run CRD's rule, docs/runs.md), so the mirror's spec, namespace and name are fixed once written;
-- the status follows the Run until it is terminal and stays as it was then (what the AIBOM was
-- built from, and what `service-ctl aibom generate` reproduces it from).
CREATE FUNCTION runs_upsert(run_id uuid, run_namespace text, run_name text, run_spec jsonb,
                            run_status jsonb, run_phase text)
RETURNS boolean
LANGUAGE plpgsql SECURITY DEFINER SET search_path FROM CURRENT AS $$
DECLARE
  cur runs%ROWTYPE;
BEGIN
  INSERT INTO runs (id, namespace, name, spec, status, phase)
  VALUES (run_id, run_namespace, run_name, run_spec, run_status, run_phase)
  ON CONFLICT (id) DO NOTHING;
  IF FOUND THEN
    RETURN true;
  END IF;
  SELECT * INTO cur FROM runs WHERE id = run_id FOR UPDATE;
  IF cur.spec IS DISTINCT FROM run_spec OR cur.namespace <> run_namespace OR cur.name <> run_name THEN
    RAISE EXCEPTION 'run %: its spec, namespace and name are immutable once mirrored', run_id
      USING ERRCODE = 'restrict_violation';
  END IF;
  IF cur.phase IN ('Succeeded', 'Failed') OR cur.status IS NOT DISTINCT FROM run_status THEN
    RETURN false;
  END IF;
  UPDATE runs SET status = run_status, phase = run_phase, updated_at = clock_timestamp() WHERE id = run_id;
  RETURN true;
END
$$;

REVOKE INSERT, UPDATE ON runs FROM vault_writer;

-- The mirror is never deleted or truncated (a Run's deletion keeps its evidence), by any role.
CREATE TRIGGER runs_keep
  BEFORE DELETE OR TRUNCATE ON runs
  FOR EACH STATEMENT EXECUTE FUNCTION vault_reject_change();

-- ---------------------------------------------------------------------------------------------
-- The transparency queue: jobs are inserted in the append transaction (INSERT stays granted); every
-- change of a job goes through these functions, and a job's outcome only through the holder of its
-- lease (a claim's random token).

-- Marks failed the due jobs whose attempt budget ran out with a lease that expired (their worker
-- died on the last attempt), then claims up to `max_jobs` due ones.
CREATE FUNCTION transparency_jobs_claim(max_jobs integer, max_attempts integer, lease_ms bigint,
                                        only_ids uuid[], skip_backoff boolean)
RETURNS SETOF transparency_jobs
LANGUAGE plpgsql SECURITY DEFINER SET search_path FROM CURRENT AS $$
BEGIN
  IF max_jobs < 1 OR max_attempts < 1 OR lease_ms < 1 THEN
    RAISE EXCEPTION 'claim needs max_jobs, max_attempts and lease_ms >= 1' USING ERRCODE = 'invalid_parameter_value';
  END IF;
  UPDATE transparency_jobs SET state = 'failed', lease_token = NULL, updated_at = now(),
         last_error = concat_ws('; ', last_error, 'attempt cap reached: the last attempt''s lease expired')
  WHERE state = 'queued' AND next_attempt_at <= now() AND attempts >= max_attempts
    AND (only_ids IS NULL OR id = ANY(only_ids));
  RETURN QUERY
  WITH due AS (
    SELECT j.id FROM transparency_jobs j WHERE j.state = 'queued'
      AND (j.next_attempt_at <= now() OR (only_ids IS NOT NULL AND skip_backoff AND j.lease_token IS NULL))
      AND j.attempts < max_attempts AND (only_ids IS NULL OR j.id = ANY(only_ids))
    ORDER BY j.next_attempt_at, j.id LIMIT max_jobs FOR UPDATE SKIP LOCKED)
  UPDATE transparency_jobs j SET attempts = j.attempts + 1, lease_token = gen_random_uuid(),
         next_attempt_at = now() + lease_ms * interval '1 millisecond', updated_at = now()
  FROM due WHERE j.id = due.id RETURNING j.*;
END
$$;

CREATE FUNCTION transparency_jobs_renew(job_id uuid, token uuid, lease_ms bigint) RETURNS boolean
LANGUAGE sql SECURITY DEFINER SET search_path FROM CURRENT AS $$
  WITH u AS (
    UPDATE transparency_jobs SET next_attempt_at = now() + greatest(lease_ms, 1) * interval '1 millisecond',
           updated_at = now()
    WHERE id = job_id AND lease_token = token AND state = 'queued' RETURNING 1)
  SELECT EXISTS (SELECT FROM u)
$$;

-- Fixes the job's statement (the first stored wins, the guard trigger keeps it); returns the stored
-- one, or NULL when the caller does not hold the lease.
CREATE FUNCTION transparency_jobs_set_statement(job_id uuid, token uuid, new_statement bytea) RETURNS bytea
LANGUAGE plpgsql SECURITY DEFINER SET search_path FROM CURRENT AS $$
DECLARE
  stored bytea;
BEGIN
  UPDATE transparency_jobs SET statement = coalesce(statement, new_statement), updated_at = now()
  WHERE id = job_id AND lease_token = token AND state = 'queued'
  RETURNING statement INTO stored;
  RETURN stored;
END
$$;

CREATE FUNCTION transparency_jobs_complete(job_id uuid, token uuid, job_backend text, job_entry_id text,
                                           job_log_index bigint, job_receipt bytea)
RETURNS SETOF transparency_jobs
LANGUAGE sql SECURITY DEFINER SET search_path FROM CURRENT AS $$
  UPDATE transparency_jobs SET state = 'published', backend = job_backend, entry_id = job_entry_id,
         log_index = job_log_index, receipt = job_receipt, last_error = NULL, lease_token = NULL,
         published_at = now(), updated_at = now()
  WHERE id = job_id AND lease_token = token AND state = 'queued'
  RETURNING *
$$;

CREATE FUNCTION transparency_jobs_fail(job_id uuid, token uuid, next_state text, error text, delay_ms bigint)
RETURNS SETOF transparency_jobs
LANGUAGE sql SECURITY DEFINER SET search_path FROM CURRENT AS $$
  UPDATE transparency_jobs SET state = next_state, last_error = left(error, 2000), lease_token = NULL,
         next_attempt_at = now() + greatest(delay_ms, 0) * interval '1 millisecond', updated_at = now()
  WHERE id = job_id AND lease_token = token AND state = 'queued' AND next_state IN ('queued', 'failed')
  RETURNING *
$$;

-- An operator's retry of a failed job: back in the queue with a fresh attempt budget.
CREATE FUNCTION transparency_jobs_requeue(job_id uuid) RETURNS SETOF transparency_jobs
LANGUAGE sql SECURITY DEFINER SET search_path FROM CURRENT AS $$
  UPDATE transparency_jobs SET state = 'queued', attempts = 0, lease_token = NULL, next_attempt_at = now(),
         updated_at = now()
  WHERE id = job_id AND state = 'failed'
  RETURNING *
$$;

REVOKE UPDATE ON transparency_jobs FROM vault_writer;

-- ---------------------------------------------------------------------------------------------
-- Functions are executable by PUBLIC by default: only the runtime role may call these.
REVOKE ALL ON FUNCTION vault_lock_head(), scitt_log_lock_head(),
  scitt_log_advance(bigint, bytea, timestamptz, smallint[], bigint[], bytea[]),
  runs_upsert(uuid, text, text, jsonb, jsonb, text),
  transparency_jobs_claim(integer, integer, bigint, uuid[], boolean),
  transparency_jobs_renew(uuid, uuid, bigint),
  transparency_jobs_set_statement(uuid, uuid, bytea),
  transparency_jobs_complete(uuid, uuid, text, text, bigint, bytea),
  transparency_jobs_fail(uuid, uuid, text, text, bigint),
  transparency_jobs_requeue(uuid)
FROM PUBLIC;
GRANT EXECUTE ON FUNCTION vault_lock_head(), scitt_log_lock_head(),
  scitt_log_advance(bigint, bytea, timestamptz, smallint[], bigint[], bytea[]),
  runs_upsert(uuid, text, text, jsonb, jsonb, text),
  transparency_jobs_claim(integer, integer, bigint, uuid[], boolean),
  transparency_jobs_renew(uuid, uuid, bigint),
  transparency_jobs_set_statement(uuid, uuid, bytea),
  transparency_jobs_complete(uuid, uuid, text, text, bigint, bytea),
  transparency_jobs_fail(uuid, uuid, text, text, bigint),
  transparency_jobs_requeue(uuid)
TO vault_writer;
REVOKE ALL ON FUNCTION vault_chain_extend(), vault_head_advance(), scitt_log_head_advance() FROM PUBLIC;
