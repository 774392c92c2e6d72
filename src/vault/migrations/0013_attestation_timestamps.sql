-- RFC 3161 time-stamps of the records' DSSE signatures (issue 15; docs/timestamps.md, ADR 0015).
-- A record is stored first and time-stamped right after, by the stamper of any controller replica:
-- a TSA outage never holds or loses a record. The job row is inserted in the append transaction
-- (so no record of a stamping deployment is ever left without one), claimed with SKIP LOCKED under
-- a lease like the transparency queue (0005, 0008), and retried with backoff until the TSA answers
-- or the signer's certificate has expired (a later time-stamp would prove nothing).
--
-- Roles (0008): the runtime role inserts a job naming only its record, and moves it only through
-- the functions below; the time-stamp itself is written by `timestamp_jobs_complete`, by the
-- holder of the job's lease, and never changes afterwards.

DO $$
BEGIN
  EXECUTE format('SET LOCAL search_path = %I, pg_temp', current_schema());
END
$$;

-- One time-stamp per record, kept for as long as the vault: what verifiers judge the signer's
-- certificate at, years after it expired.
-- Both tables reference attestations(id) through the insert-time check below, not a declarative
-- FOREIGN KEY (as transparency_jobs, 0005): attestations never change, so the check is the same
-- guarantee, and a foreign key would make `TRUNCATE attestations` fail with 0A000 before the
-- append-only trigger refuses it with 23001.
CREATE FUNCTION attestation_reference() RETURNS trigger
LANGUAGE plpgsql SET search_path FROM CURRENT AS $$
BEGIN
  IF NOT EXISTS (SELECT FROM attestations a WHERE a.id = NEW.attestation_id) THEN
    RAISE EXCEPTION 'attestation % does not exist', NEW.attestation_id
      USING ERRCODE = 'foreign_key_violation';
  END IF;
  RETURN NEW;
END
$$;

CREATE TABLE attestation_timestamps (
  attestation_id uuid PRIMARY KEY,
  -- TSTInfo genTime: when the TSA saw the signature.
  gen_time timestamptz NOT NULL,
  -- Subject of the TSA certificate, one line.
  tsa text NOT NULL,
  -- TSTInfo serialNumber, hex.
  serial text NOT NULL,
  -- The DER TimeStampResp over the raw bytes of the envelope's first signature (RFC 3161; the
  -- `signedTimestamp` of a Sigstore bundle v0.3).
  response bytea NOT NULL,
  stamped_at timestamptz NOT NULL DEFAULT clock_timestamp(),
  CONSTRAINT attestation_timestamps_response_size CHECK (length(response) BETWEEN 16 AND 65536)
);

CREATE TRIGGER attestation_timestamps_append_only
  BEFORE UPDATE OR DELETE OR TRUNCATE ON attestation_timestamps
  FOR EACH STATEMENT EXECUTE FUNCTION vault_reject_change();
CREATE TRIGGER attestation_timestamps_reference
  BEFORE INSERT ON attestation_timestamps
  FOR EACH ROW EXECUTE FUNCTION attestation_reference();

CREATE TABLE timestamp_jobs (
  attestation_id uuid PRIMARY KEY,
  -- queued → done (time-stamp stored), or failed (the signer's certificate expired first).
  state text NOT NULL DEFAULT 'queued',
  -- Claims so far (the current one included while leased).
  attempts integer NOT NULL DEFAULT 0,
  -- When a queued job is next due; while leased, the lease end.
  next_attempt_at timestamptz NOT NULL DEFAULT clock_timestamp(),
  lease_token uuid,
  last_error text,
  created_at timestamptz NOT NULL DEFAULT clock_timestamp(),
  updated_at timestamptz NOT NULL DEFAULT clock_timestamp(),
  CONSTRAINT timestamp_jobs_state CHECK (state IN ('queued', 'done', 'failed')),
  CONSTRAINT timestamp_jobs_attempts CHECK (attempts >= 0)
);

CREATE TRIGGER timestamp_jobs_reference
  BEFORE INSERT ON timestamp_jobs
  FOR EACH ROW EXECUTE FUNCTION attestation_reference();

-- The claim's scan: due queued jobs in due order.
CREATE INDEX timestamp_jobs_due ON timestamp_jobs (next_attempt_at, attestation_id) WHERE state = 'queued';

-- A settled job is history; no job is ever deleted; a job stays the job of its record.
CREATE FUNCTION timestamp_jobs_settled() RETURNS trigger
LANGUAGE plpgsql SET search_path FROM CURRENT AS $$
BEGIN
  IF OLD.state <> 'queued' THEN
    RAISE EXCEPTION 'time-stamp job of % is % and cannot change', OLD.attestation_id, OLD.state
      USING ERRCODE = 'restrict_violation';
  END IF;
  IF NEW.attestation_id <> OLD.attestation_id OR NEW.created_at <> OLD.created_at THEN
    RAISE EXCEPTION 'time-stamp job of %: its record cannot change', OLD.attestation_id
      USING ERRCODE = 'restrict_violation';
  END IF;
  RETURN NEW;
END
$$;
CREATE TRIGGER timestamp_jobs_settled
  BEFORE UPDATE ON timestamp_jobs
  FOR EACH ROW EXECUTE FUNCTION timestamp_jobs_settled();
CREATE TRIGGER timestamp_jobs_kept
  BEFORE DELETE OR TRUNCATE ON timestamp_jobs
  FOR EACH STATEMENT EXECUTE FUNCTION vault_reject_change();

-- `aibom_vault_timestamp_due` (no payload): jobs were enqueued; the stampers of every replica
-- listen (src/vault/listener.ts). Per statement: a batch of records is one notification.
CREATE FUNCTION timestamp_jobs_notify() RETURNS trigger
LANGUAGE plpgsql SET search_path FROM CURRENT AS $$
BEGIN
  IF EXISTS (SELECT FROM new_jobs) THEN
    PERFORM pg_notify('aibom_vault_timestamp_due', '');
  END IF;
  RETURN NULL;
END
$$;
CREATE TRIGGER timestamp_jobs_notify
  AFTER INSERT ON timestamp_jobs REFERENCING NEW TABLE AS new_jobs
  FOR EACH STATEMENT EXECUTE FUNCTION timestamp_jobs_notify();

-- Claims up to `max_jobs` due jobs: a fresh lease token each, due again at the lease end (a
-- stamper that dies leaves its jobs claimable then).
CREATE FUNCTION timestamp_jobs_claim(max_jobs integer, lease_ms bigint) RETURNS SETOF timestamp_jobs
LANGUAGE plpgsql SECURITY DEFINER SET search_path FROM CURRENT AS $$
BEGIN
  IF max_jobs < 1 OR lease_ms < 1 THEN
    RAISE EXCEPTION 'claim needs max_jobs and lease_ms >= 1' USING ERRCODE = 'invalid_parameter_value';
  END IF;
  RETURN QUERY
  WITH due AS (
    SELECT j.attestation_id FROM timestamp_jobs j
    WHERE j.state = 'queued' AND j.next_attempt_at <= clock_timestamp()
    ORDER BY j.next_attempt_at, j.attestation_id LIMIT max_jobs FOR UPDATE SKIP LOCKED)
  UPDATE timestamp_jobs j SET attempts = j.attempts + 1, lease_token = gen_random_uuid(),
         next_attempt_at = clock_timestamp() + lease_ms * interval '1 millisecond',
         updated_at = clock_timestamp()
  FROM due WHERE j.attestation_id = due.attestation_id RETURNING j.*;
END
$$;

-- The lease holder stores the time-stamp and settles the job, in one step; false when the lease
-- was lost (another stamper holds the job now, or it is settled).
CREATE FUNCTION timestamp_jobs_complete(p_attestation_id uuid, p_token uuid, p_gen_time timestamptz,
                                        p_tsa text, p_serial text, p_response bytea)
RETURNS boolean
LANGUAGE plpgsql SECURITY DEFINER SET search_path FROM CURRENT AS $$
BEGIN
  UPDATE timestamp_jobs SET state = 'done', lease_token = NULL, last_error = NULL,
         updated_at = clock_timestamp()
  WHERE attestation_id = p_attestation_id AND lease_token = p_token AND state = 'queued';
  IF NOT FOUND THEN
    RETURN false;
  END IF;
  INSERT INTO attestation_timestamps (attestation_id, gen_time, tsa, serial, response)
  VALUES (p_attestation_id, p_gen_time, p_tsa, p_serial, p_response)
  ON CONFLICT (attestation_id) DO NOTHING;
  RETURN true;
END
$$;

-- A failed attempt: due again after `p_delay_ms`, or failed for good (`p_final`).
CREATE FUNCTION timestamp_jobs_fail(p_attestation_id uuid, p_token uuid, p_final boolean, p_error text,
                                    p_delay_ms bigint)
RETURNS boolean
LANGUAGE sql SECURITY DEFINER SET search_path FROM CURRENT AS $$
  WITH u AS (
    UPDATE timestamp_jobs SET state = CASE WHEN p_final THEN 'failed' ELSE 'queued' END,
           last_error = left(p_error, 2000), lease_token = NULL,
           next_attempt_at = clock_timestamp() + greatest(p_delay_ms, 0) * interval '1 millisecond',
           updated_at = clock_timestamp()
    WHERE attestation_id = p_attestation_id AND lease_token = p_token AND state = 'queued' RETURNING 1)
  SELECT EXISTS (SELECT FROM u)
$$;

REVOKE ALL ON attestation_timestamps, timestamp_jobs FROM PUBLIC;
GRANT SELECT ON attestation_timestamps TO vault_writer;
-- A job names its record and nothing else: its state only ever moves through the functions.
GRANT SELECT, INSERT (attestation_id) ON timestamp_jobs TO vault_writer;
REVOKE ALL ON FUNCTION timestamp_jobs_claim(integer, bigint),
  timestamp_jobs_complete(uuid, uuid, timestamptz, text, text, bytea),
  timestamp_jobs_fail(uuid, uuid, boolean, text, bigint)
FROM PUBLIC;
GRANT EXECUTE ON FUNCTION timestamp_jobs_claim(integer, bigint),
  timestamp_jobs_complete(uuid, uuid, timestamptz, text, text, bytea),
  timestamp_jobs_fail(uuid, uuid, boolean, text, bigint)
TO vault_writer;
