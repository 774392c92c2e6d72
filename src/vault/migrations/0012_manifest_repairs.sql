-- Manifest repair: a download that finds an artifact's C2PA manifest missing or no longer valid
-- asks the signer (the controller, which holds the runtime signer; the API does not) for a new
-- manifest over the SAME bytes. The request is durable (this table), wakes the controller through
-- NOTIFY like the transparency queue (0007), and the answer is recorded here: the new manifest's
-- key and digest. The artifacts row stays as it was (immutable): readers take the manifest of the
-- latest completed repair, and the earlier manifest (object and record) is kept. Both the request
-- and its completion are written to audit_log by the vault, in the transaction of the change.
-- See src/vault/manifest-repairs.ts and docs/c2pa.md.
--
-- Roles (0008): the runtime role inserts requests and moves them only through the two functions at
-- the end (complete, fail), never by UPDATE.

-- Functions below resolve names in the vault's schema, then pg_temp last (as in 0008).
DO $$
BEGIN
  EXECUTE format('SET LOCAL search_path = %I, pg_temp', current_schema());
END
$$;

CREATE TABLE manifest_repairs (
  id uuid PRIMARY KEY DEFAULT gen_random_uuid(),
  run_id uuid NOT NULL,
  kind text NOT NULL,
  -- Why: the manifest object is gone (`missing`) or does not verify for the bytes (`invalid`).
  reason text NOT NULL,
  detail text NOT NULL DEFAULT '',
  -- The manifest found missing or invalid (the record's, or an earlier repair's).
  replaces_key text,
  replaces_digest text,
  requested_by text NOT NULL,
  -- queued → done (new manifest stored), or failed (cannot be repaired: the bytes changed).
  state text NOT NULL DEFAULT 'queued',
  attempts integer NOT NULL DEFAULT 0,
  last_error text,
  next_attempt_at timestamptz NOT NULL DEFAULT clock_timestamp(),
  manifest_key text,
  manifest_digest text,
  manifest_label text,
  requested_at timestamptz NOT NULL DEFAULT clock_timestamp(),
  completed_at timestamptz,
  CONSTRAINT manifest_repairs_artifact FOREIGN KEY (run_id, kind) REFERENCES artifacts (run_id, kind),
  CONSTRAINT manifest_repairs_reason CHECK (reason IN ('missing', 'invalid')),
  CONSTRAINT manifest_repairs_state CHECK (state IN ('queued', 'done', 'failed')),
  CONSTRAINT manifest_repairs_done_has_manifest CHECK (
    state <> 'done' OR (manifest_key IS NOT NULL AND manifest_digest IS NOT NULL AND completed_at IS NOT NULL)
  ),
  CONSTRAINT manifest_repairs_attempts CHECK (attempts >= 0)
);

-- At most one open request per artifact: concurrent downloads join the same request.
CREATE UNIQUE INDEX manifest_repairs_one_open ON manifest_repairs (run_id, kind) WHERE state = 'queued';
CREATE INDEX manifest_repairs_by_artifact ON manifest_repairs (run_id, kind, requested_at);

-- A finished request is history: it never changes again, and no request is ever deleted.
CREATE FUNCTION manifest_repairs_settled() RETURNS trigger
LANGUAGE plpgsql SET search_path FROM CURRENT AS $$
BEGIN
  IF OLD.state <> 'queued' THEN
    RAISE EXCEPTION 'manifest repair % is % and cannot change', OLD.id, OLD.state
      USING ERRCODE = 'restrict_violation';
  END IF;
  IF NEW.id <> OLD.id OR NEW.run_id <> OLD.run_id OR NEW.kind <> OLD.kind
     OR NEW.replaces_digest IS DISTINCT FROM OLD.replaces_digest
     OR NEW.requested_at <> OLD.requested_at OR NEW.requested_by <> OLD.requested_by THEN
    RAISE EXCEPTION 'manifest repair %: what was asked cannot change', OLD.id
      USING ERRCODE = 'restrict_violation';
  END IF;
  RETURN NEW;
END
$$;
CREATE TRIGGER manifest_repairs_settled
  BEFORE UPDATE ON manifest_repairs
  FOR EACH ROW EXECUTE FUNCTION manifest_repairs_settled();
CREATE TRIGGER manifest_repairs_kept
  BEFORE DELETE OR TRUNCATE ON manifest_repairs
  FOR EACH STATEMENT EXECUTE FUNCTION vault_reject_change();

-- `aibom_vault_manifest_repair`: a request is open (new, or due again after a failed attempt). The
-- payload is `<namespace>/<run name>` of the run (its Kubernetes key), the leader's Run reconciler
-- listens and reconciles that Run, which signs the new manifest.
CREATE FUNCTION manifest_repairs_notify() RETURNS trigger
LANGUAGE plpgsql SET search_path FROM CURRENT AS $$
BEGIN
  PERFORM pg_notify('aibom_vault_manifest_repair', coalesce(r.namespace || '/' || r.name, ''))
    FROM runs r WHERE r.id = NEW.run_id;
  RETURN NULL;
END
$$;
CREATE TRIGGER manifest_repairs_notify
  AFTER INSERT ON manifest_repairs
  FOR EACH ROW WHEN (NEW.state = 'queued') EXECUTE FUNCTION manifest_repairs_notify();

-- The signer answers a request: the new manifest's key and digest (only a queued request).
CREATE FUNCTION manifest_repair_complete(p_id uuid, p_key text, p_digest text, p_label text)
RETURNS SETOF manifest_repairs
LANGUAGE plpgsql SECURITY DEFINER SET search_path FROM CURRENT AS $$
BEGIN
  IF p_digest IS NULL OR p_digest !~ '^sha256:[0-9a-f]{64}$' OR coalesce(p_key, '') = '' THEN
    RAISE EXCEPTION 'manifest repair %: a completed repair names its manifest key and sha256 digest', p_id
      USING ERRCODE = 'check_violation';
  END IF;
  RETURN QUERY
    UPDATE manifest_repairs SET state = 'done', manifest_key = p_key, manifest_digest = p_digest,
      manifest_label = p_label, attempts = attempts + 1, last_error = NULL, completed_at = clock_timestamp()
    WHERE id = p_id AND state = 'queued' RETURNING *;
END
$$;

-- An attempt failed: due again after `p_delay_ms`, or failed for good (`p_final`).
CREATE FUNCTION manifest_repair_fail(p_id uuid, p_error text, p_final boolean, p_delay_ms bigint)
RETURNS SETOF manifest_repairs
LANGUAGE sql SECURITY DEFINER SET search_path FROM CURRENT AS $$
  UPDATE manifest_repairs SET state = CASE WHEN p_final THEN 'failed' ELSE 'queued' END,
    attempts = attempts + 1, last_error = left(p_error, 2000),
    next_attempt_at = clock_timestamp() + greatest(p_delay_ms, 0) * interval '1 millisecond',
    completed_at = CASE WHEN p_final THEN clock_timestamp() END
  WHERE id = p_id AND state = 'queued' RETURNING *
$$;

REVOKE ALL ON manifest_repairs FROM PUBLIC;
GRANT SELECT, INSERT ON manifest_repairs TO vault_writer;
REVOKE ALL ON FUNCTION manifest_repair_complete(uuid, text, text, text), manifest_repair_fail(uuid, text, boolean, bigint) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION manifest_repair_complete(uuid, text, text, text), manifest_repair_fail(uuid, text, boolean, bigint) TO vault_writer;
