-- A SCITT job is `queued` until it is `published`; there is no third state (the spec allows
-- `queued` and `published` only, for the AIBOM's entry and so for every job it mirrors). A job that
-- cannot publish stays queued and is tried again after a backoff, for as long as it takes: the
-- attempts, the last error and the next attempt say why it waits (docs/transparency.md).
--
-- Before: a job was left `failed` after an attempt cap or a permanent refusal, and nothing ever
-- tried it again unless an operator pushed it.

-- Functions below resolve names in the vault's schema, then pg_temp last (as in 0008).
DO $$
BEGIN
  EXECUTE format('SET LOCAL search_path = %I, pg_temp', current_schema());
END
$$;

-- Jobs left failed before this migration go back in the queue, due now, their history kept.
UPDATE transparency_jobs
   SET state = 'queued', lease_token = NULL, next_attempt_at = now(), updated_at = now()
 WHERE state = 'failed';

ALTER TABLE transparency_jobs DROP CONSTRAINT transparency_jobs_state_known;
ALTER TABLE transparency_jobs ADD CONSTRAINT transparency_jobs_state_known
  CHECK (state IN ('queued', 'published'));

-- The claim has no attempt cap any more: it claims up to `max_jobs` due jobs (with `only_ids`, only
-- those; with `skip_backoff`, also those waiting out a backoff, never a leased one).
DROP FUNCTION transparency_jobs_claim(integer, integer, bigint, uuid[], boolean);
CREATE FUNCTION transparency_jobs_claim(max_jobs integer, lease_ms bigint, only_ids uuid[], skip_backoff boolean)
RETURNS SETOF transparency_jobs
LANGUAGE plpgsql SECURITY DEFINER SET search_path FROM CURRENT AS $$
BEGIN
  IF max_jobs < 1 OR lease_ms < 1 THEN
    RAISE EXCEPTION 'claim needs max_jobs and lease_ms >= 1' USING ERRCODE = 'invalid_parameter_value';
  END IF;
  RETURN QUERY
  WITH due AS (
    SELECT j.id FROM transparency_jobs j WHERE j.state = 'queued'
      AND (j.next_attempt_at <= now() OR (only_ids IS NOT NULL AND skip_backoff AND j.lease_token IS NULL))
      AND (only_ids IS NULL OR j.id = ANY(only_ids))
    ORDER BY j.next_attempt_at, j.id LIMIT max_jobs FOR UPDATE SKIP LOCKED)
  UPDATE transparency_jobs j SET attempts = j.attempts + 1, lease_token = gen_random_uuid(),
         next_attempt_at = now() + lease_ms * interval '1 millisecond', updated_at = now()
  FROM due WHERE j.id = due.id RETURNING j.*;
END
$$;

-- A failed attempt: the job stays queued, due again after `delay_ms`, with the error.
DROP FUNCTION transparency_jobs_fail(uuid, uuid, text, text, bigint);
CREATE FUNCTION transparency_jobs_fail(job_id uuid, token uuid, error text, delay_ms bigint)
RETURNS SETOF transparency_jobs
LANGUAGE sql SECURITY DEFINER SET search_path FROM CURRENT AS $$
  UPDATE transparency_jobs SET last_error = left(error, 2000), lease_token = NULL,
         next_attempt_at = now() + greatest(delay_ms, 0) * interval '1 millisecond', updated_at = now()
  WHERE id = job_id AND lease_token = token AND state = 'queued'
  RETURNING *
$$;

-- Nothing is left to put back: a push (POST /v1/attestations/scitt) claims a job whatever its backoff.
DROP FUNCTION transparency_jobs_requeue(uuid);

REVOKE ALL ON FUNCTION transparency_jobs_claim(integer, bigint, uuid[], boolean),
  transparency_jobs_fail(uuid, uuid, text, bigint) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION transparency_jobs_claim(integer, bigint, uuid[], boolean),
  transparency_jobs_fail(uuid, uuid, text, bigint) TO vault_writer;
