-- Cross-process wake-ups for the transparency queue (src/vault/listener.ts), sent in the
-- transaction of the change, so they are delivered exactly when (and only if) the change commits, to
-- every process listening:
-- - `aibom_vault_transparency_due` (no payload): a job became claimable now (enqueued, or a failed
--   one put back). The SCITT workers of every replica listen.
-- - `aibom_vault_transparency`: a job was enqueued, published, failed or put back. The payload is
--   the comma-separated ids of the runs whose attestations' jobs changed (empty for attestations
--   outside runs), or `*` when the list would not fit a notification (listeners then re-scan). The
--   leader's projection of job state onto the Kubernetes resources listens.
--
-- Triggers, not NOTIFY calls in the application's statements: every writer (a worker, the API's
-- synchronous publish, an operator's SQL) is covered, and the queue statements stay as they were.
-- Per statement, not per row: a batch enqueue is one notification. Lease bookkeeping (a claim, a
-- renewal, the statement being fixed) is not announced: nobody waits on it.

CREATE FUNCTION transparency_jobs_announce(runs text) RETURNS void
LANGUAGE sql AS $$
  SELECT pg_notify('aibom_vault_transparency',
                   CASE WHEN length(coalesce(runs, '')) > 7000 THEN '*' ELSE coalesce(runs, '') END);
$$;

CREATE FUNCTION transparency_jobs_notify_insert() RETURNS trigger
LANGUAGE plpgsql SET search_path FROM CURRENT AS $$
BEGIN
  IF EXISTS (SELECT FROM new_jobs) THEN
    PERFORM pg_notify('aibom_vault_transparency_due', '');
    PERFORM transparency_jobs_announce(
      (SELECT string_agg(DISTINCT a.run_id::text, ',') FROM new_jobs n
         JOIN attestations a ON a.id = n.attestation_id));
  END IF;
  RETURN NULL;
END
$$;

CREATE FUNCTION transparency_jobs_notify_update() RETURNS trigger
LANGUAGE plpgsql SET search_path FROM CURRENT AS $$
BEGIN
  IF EXISTS (SELECT FROM new_jobs n JOIN old_jobs o ON o.id = n.id
             WHERE n.state = 'queued' AND o.state <> 'queued') THEN
    PERFORM pg_notify('aibom_vault_transparency_due', '');
  END IF;
  -- What a reader sees change: the state, and the error and attempt count a failed attempt leaves.
  IF EXISTS (SELECT FROM new_jobs n JOIN old_jobs o ON o.id = n.id
             WHERE n.state IS DISTINCT FROM o.state OR n.last_error IS DISTINCT FROM o.last_error
                OR (n.lease_token IS NULL AND o.lease_token IS NOT NULL)) THEN
    PERFORM transparency_jobs_announce(
      (SELECT string_agg(DISTINCT a.run_id::text, ',') FROM new_jobs n
         JOIN old_jobs o ON o.id = n.id
         JOIN attestations a ON a.id = n.attestation_id
        WHERE n.state IS DISTINCT FROM o.state OR n.last_error IS DISTINCT FROM o.last_error
           OR (n.lease_token IS NULL AND o.lease_token IS NOT NULL)));
  END IF;
  RETURN NULL;
END
$$;

CREATE TRIGGER transparency_jobs_notify_insert
  AFTER INSERT ON transparency_jobs REFERENCING NEW TABLE AS new_jobs
  FOR EACH STATEMENT EXECUTE FUNCTION transparency_jobs_notify_insert();
CREATE TRIGGER transparency_jobs_notify_update
  AFTER UPDATE ON transparency_jobs REFERENCING OLD TABLE AS old_jobs NEW TABLE AS new_jobs
  FOR EACH STATEMENT EXECUTE FUNCTION transparency_jobs_notify_update();
