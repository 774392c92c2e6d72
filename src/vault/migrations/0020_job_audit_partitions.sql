-- The job tables and the audit log partitioned by month like the records (issue 29 item 1;
-- docs/vault.md "Partitions", "Retention").
--
-- `transparency_jobs`, `timestamp_jobs` and `attestation_timestamps` are keyed by their record's
-- UUIDv7 `attestation_id`: each is RANGE-partitioned on it with the bounds of `attestations`
-- (0019), so a month of records, its jobs and its time-stamps live in partitions of the same month
-- (the "companions" of the record partition with the same upper bound `hi`) and retire together.
-- `audit_log` is RANGE-partitioned on `at`, one partition per UTC month.
--
-- As in 0019, each existing table is renamed and attached as the first partition (`<table>_before`)
-- without moving a row: its bound is added as a validated CHECK first so ATTACH does not scan again,
-- and its indexes are attached to the parent's. Only `transparency_jobs` builds one index: its key
-- becomes `(id, attestation_id)` (a unique index of a partitioned table must contain the partition
-- key; a lookup by `id` still uses it, probing each partition's index once). A job table's first
-- partition ends at the upper bound of the record partition holding its newest record (so its
-- range is a union of whole record partitions); an audit log's, at the month after its newest row.
--
-- Row triggers (reference checks, the published-job and settled-job guards) are defined on the
-- parents and cloned by PostgreSQL onto every partition; statement triggers (append-only, NOTIFY)
-- fire for statements naming the parent; every partition carries `vault_partition_append_only`
-- (0019), which refuses writes naming a partition directly, for every role.

DO $$
BEGIN
  EXECUTE format('SET LOCAL search_path = %I, pg_temp', current_schema());
END
$$;

-- ------------------------------------------------------------------------------------------------
-- 1. transparency_jobs
ALTER TABLE transparency_jobs RENAME TO transparency_jobs_before;
-- A table has one primary key: the old (id) gives way to (id, attestation_id), built by ATTACH.
ALTER TABLE transparency_jobs_before DROP CONSTRAINT transparency_jobs_pkey;
ALTER INDEX transparency_jobs_attestation_id_key RENAME TO transparency_jobs_before_attestation_id_key;
ALTER INDEX transparency_jobs_due RENAME TO transparency_jobs_before_due;
DROP TRIGGER transparency_jobs_reference ON transparency_jobs_before;
DROP TRIGGER transparency_jobs_guard ON transparency_jobs_before;
DROP TRIGGER transparency_jobs_no_truncate ON transparency_jobs_before;
DROP TRIGGER transparency_jobs_notify_insert ON transparency_jobs_before;
DROP TRIGGER transparency_jobs_notify_update ON transparency_jobs_before;
REVOKE ALL ON transparency_jobs_before FROM vault_writer;

CREATE TABLE transparency_jobs (
  id uuid NOT NULL DEFAULT gen_random_uuid(),
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
  CONSTRAINT transparency_jobs_pkey PRIMARY KEY (id, attestation_id),
  CONSTRAINT transparency_jobs_attestation_id_key UNIQUE (attestation_id),
  CONSTRAINT transparency_jobs_state_known CHECK (state IN ('queued', 'published')),
  CONSTRAINT transparency_jobs_attempts_nonnegative CHECK (attempts >= 0),
  CONSTRAINT transparency_jobs_backend_known CHECK (backend IS NULL OR backend IN ('local', 'scrapi')),
  CONSTRAINT transparency_jobs_published_complete CHECK (
    state <> 'published'
    OR (receipt IS NOT NULL AND entry_id IS NOT NULL AND backend IS NOT NULL AND statement IS NOT NULL
        AND published_at IS NOT NULL)
  )
) PARTITION BY RANGE (attestation_id);
CREATE INDEX transparency_jobs_due ON transparency_jobs (next_attempt_at, id) WHERE state = 'queued';

CREATE TRIGGER transparency_jobs_reference
  BEFORE INSERT ON transparency_jobs
  FOR EACH ROW EXECUTE FUNCTION transparency_jobs_reference();
CREATE TRIGGER transparency_jobs_guard
  BEFORE UPDATE OR DELETE ON transparency_jobs
  FOR EACH ROW EXECUTE FUNCTION transparency_jobs_guard();
CREATE TRIGGER transparency_jobs_no_truncate
  BEFORE TRUNCATE ON transparency_jobs
  FOR EACH STATEMENT EXECUTE FUNCTION vault_reject_change();
CREATE TRIGGER transparency_jobs_notify_insert
  AFTER INSERT ON transparency_jobs REFERENCING NEW TABLE AS new_jobs
  FOR EACH STATEMENT EXECUTE FUNCTION transparency_jobs_notify_insert();
CREATE TRIGGER transparency_jobs_notify_update
  AFTER UPDATE ON transparency_jobs REFERENCING OLD TABLE AS old_jobs NEW TABLE AS new_jobs
  FOR EACH STATEMENT EXECUTE FUNCTION transparency_jobs_notify_update();

REVOKE ALL ON transparency_jobs FROM PUBLIC;
GRANT SELECT, INSERT ON transparency_jobs TO vault_writer;

-- ------------------------------------------------------------------------------------------------
-- 2. timestamp_jobs
ALTER TABLE timestamp_jobs RENAME TO timestamp_jobs_before;
ALTER INDEX timestamp_jobs_pkey RENAME TO timestamp_jobs_before_pkey;
ALTER INDEX timestamp_jobs_due RENAME TO timestamp_jobs_before_due;
DROP TRIGGER timestamp_jobs_reference ON timestamp_jobs_before;
DROP TRIGGER timestamp_jobs_settled ON timestamp_jobs_before;
DROP TRIGGER timestamp_jobs_kept ON timestamp_jobs_before;
DROP TRIGGER timestamp_jobs_notify ON timestamp_jobs_before;
REVOKE ALL ON timestamp_jobs_before FROM vault_writer;

CREATE TABLE timestamp_jobs (
  attestation_id uuid NOT NULL,
  state text NOT NULL DEFAULT 'queued',
  attempts integer NOT NULL DEFAULT 0,
  next_attempt_at timestamptz NOT NULL DEFAULT clock_timestamp(),
  lease_token uuid,
  last_error text,
  created_at timestamptz NOT NULL DEFAULT clock_timestamp(),
  updated_at timestamptz NOT NULL DEFAULT clock_timestamp(),
  CONSTRAINT timestamp_jobs_pkey PRIMARY KEY (attestation_id),
  CONSTRAINT timestamp_jobs_state CHECK (state IN ('queued', 'done', 'failed')),
  CONSTRAINT timestamp_jobs_attempts CHECK (attempts >= 0)
) PARTITION BY RANGE (attestation_id);
CREATE INDEX timestamp_jobs_due ON timestamp_jobs (next_attempt_at, attestation_id) WHERE state = 'queued';

CREATE TRIGGER timestamp_jobs_reference
  BEFORE INSERT ON timestamp_jobs
  FOR EACH ROW EXECUTE FUNCTION attestation_reference();
CREATE TRIGGER timestamp_jobs_settled
  BEFORE UPDATE ON timestamp_jobs
  FOR EACH ROW EXECUTE FUNCTION timestamp_jobs_settled();
CREATE TRIGGER timestamp_jobs_kept
  BEFORE DELETE OR TRUNCATE ON timestamp_jobs
  FOR EACH STATEMENT EXECUTE FUNCTION vault_reject_change();
CREATE TRIGGER timestamp_jobs_notify
  AFTER INSERT ON timestamp_jobs REFERENCING NEW TABLE AS new_jobs
  FOR EACH STATEMENT EXECUTE FUNCTION timestamp_jobs_notify();

REVOKE ALL ON timestamp_jobs FROM PUBLIC;
GRANT SELECT, INSERT (attestation_id) ON timestamp_jobs TO vault_writer;

-- ------------------------------------------------------------------------------------------------
-- 3. attestation_timestamps
ALTER TABLE attestation_timestamps RENAME TO attestation_timestamps_before;
ALTER INDEX attestation_timestamps_pkey RENAME TO attestation_timestamps_before_pkey;
DROP TRIGGER attestation_timestamps_append_only ON attestation_timestamps_before;
DROP TRIGGER attestation_timestamps_reference ON attestation_timestamps_before;
REVOKE ALL ON attestation_timestamps_before FROM vault_writer;

CREATE TABLE attestation_timestamps (
  attestation_id uuid NOT NULL,
  gen_time timestamptz NOT NULL,
  tsa text NOT NULL,
  serial text NOT NULL,
  response bytea NOT NULL,
  stamped_at timestamptz NOT NULL DEFAULT clock_timestamp(),
  CONSTRAINT attestation_timestamps_pkey PRIMARY KEY (attestation_id),
  CONSTRAINT attestation_timestamps_response_size CHECK (length(response) BETWEEN 16 AND 65536)
) PARTITION BY RANGE (attestation_id);

CREATE TRIGGER attestation_timestamps_append_only
  BEFORE UPDATE OR DELETE OR TRUNCATE ON attestation_timestamps
  FOR EACH STATEMENT EXECUTE FUNCTION vault_reject_change();
CREATE TRIGGER attestation_timestamps_reference
  BEFORE INSERT ON attestation_timestamps
  FOR EACH ROW EXECUTE FUNCTION attestation_reference();

REVOKE ALL ON attestation_timestamps FROM PUBLIC;
GRANT SELECT ON attestation_timestamps TO vault_writer;

-- ------------------------------------------------------------------------------------------------
-- 4. audit_log. A partition cannot carry an identity column of its own: the old table's identity
-- (and its sequence) is dropped and the parent's continues after its largest id, GENERATED ALWAYS
-- as before (a writer still cannot choose an id, so id order stays insertion order).
ALTER TABLE audit_log RENAME TO audit_log_before;
-- The old key (id) gives way to (id, at), built by ATTACH.
ALTER TABLE audit_log_before DROP CONSTRAINT audit_log_pkey;
ALTER INDEX audit_log_namespace_at RENAME TO audit_log_before_namespace_at;
ALTER INDEX audit_log_namespace_id RENAME TO audit_log_before_namespace_id;
DROP TRIGGER audit_log_append_only ON audit_log_before;
REVOKE ALL ON audit_log_before FROM vault_writer;
ALTER TABLE audit_log_before ALTER COLUMN id DROP IDENTITY;

DO $$
DECLARE
  next_id bigint;
BEGIN
  SELECT coalesce(max(id), 0) + 1 INTO next_id FROM audit_log_before;
  EXECUTE format($t$
    CREATE TABLE audit_log (
      id bigint GENERATED ALWAYS AS IDENTITY (START WITH %s) NOT NULL,
      at timestamptz NOT NULL DEFAULT clock_timestamp(),
      actor text NOT NULL,
      action text NOT NULL,
      namespace text,
      object text,
      manifest_digest text,
      attestation_ids text[] NOT NULL DEFAULT '{}',
      details jsonb NOT NULL DEFAULT '{}',
      CONSTRAINT audit_log_pkey PRIMARY KEY (id, at)
    ) PARTITION BY RANGE (at)$t$, next_id);
END
$$;
CREATE INDEX audit_log_namespace_at ON audit_log (namespace, at);
CREATE INDEX audit_log_namespace_id ON audit_log (namespace, id);

CREATE TRIGGER audit_log_append_only
  BEFORE UPDATE OR DELETE OR TRUNCATE ON audit_log
  FOR EACH STATEMENT EXECUTE FUNCTION vault_reject_change();

REVOKE ALL ON audit_log FROM PUBLIC;
GRANT SELECT, INSERT ON audit_log TO vault_writer;
GRANT USAGE ON SEQUENCE audit_log_id_seq TO vault_writer;

-- ------------------------------------------------------------------------------------------------
-- 5. The old tables become the first partitions.

-- A job table's first partition: up to the upper bound of the record partition holding its newest
-- row (the oldest record partition when it is empty), so it retires with that record partition.
CREATE FUNCTION vault_companion_attach_before(p_parent text) RETURNS void
LANGUAGE plpgsql SET search_path FROM CURRENT AS $$
DECLARE
  newest uuid;
  rp vault_partitions%ROWTYPE;
  old text := p_parent || '_before';
BEGIN
  EXECUTE format('SELECT attestation_id FROM %I ORDER BY attestation_id DESC LIMIT 1', old) INTO newest;
  SELECT * INTO rp FROM vault_partitions p
  WHERE p.parent = 'attestations'
    AND p.hi > coalesce(newest, '00000000-0000-0000-0000-000000000000'::uuid)
  ORDER BY p.hi LIMIT 1;
  IF NOT FOUND THEN
    RAISE EXCEPTION '%: record % lies beyond every partition of attestations', old, newest;
  END IF;
  EXECUTE format('ALTER TABLE %I ADD CONSTRAINT %I CHECK (attestation_id < %L::uuid)', old, old || '_bound', rp.hi);
  EXECUTE format('ALTER TABLE %I ATTACH PARTITION %I FOR VALUES FROM (MINVALUE) TO (%L)', p_parent, old, rp.hi);
  EXECUTE format('ALTER TABLE %I DROP CONSTRAINT %I', old, old || '_bound');
  PERFORM vault_partition_guard(old::regclass);
  INSERT INTO vault_partitions (name, parent, lo, hi, from_at, to_at)
  VALUES (old, p_parent, NULL, rp.hi, NULL, rp.to_at);
END
$$;

SELECT vault_companion_attach_before('transparency_jobs');
SELECT vault_companion_attach_before('timestamp_jobs');
SELECT vault_companion_attach_before('attestation_timestamps');
DROP FUNCTION vault_companion_attach_before(text);

DO $$
DECLARE
  newest timestamptz;
  bound timestamptz;
BEGIN
  SELECT max(at) INTO newest FROM audit_log_before;
  bound := vault_month_start(greatest(clock_timestamp(), coalesce(newest, '-infinity'))) + interval '1 month';
  EXECUTE format('ALTER TABLE audit_log_before ADD CONSTRAINT audit_log_before_bound CHECK (at < %L::timestamptz)', bound);
  EXECUTE format('ALTER TABLE audit_log ATTACH PARTITION audit_log_before FOR VALUES FROM (MINVALUE) TO (%L)', bound);
  ALTER TABLE audit_log_before DROP CONSTRAINT audit_log_before_bound;
  PERFORM vault_partition_guard('audit_log_before'::regclass);
  INSERT INTO vault_partitions (name, parent, lo, hi, from_at, to_at)
  VALUES ('audit_log_before', 'audit_log', NULL, vault_uuidv7_floor(bound), NULL, bound);
END
$$;

-- ------------------------------------------------------------------------------------------------
-- 6. The queue functions returned the old tables' row type: they are made again on the parents
-- (same bodies, same signatures). The claim joins its update on the partition key too, so each
-- claimed job is one probe of one partition, and returns the jobs in due order explicitly (an
-- UPDATE over several partitions returns its rows partition by partition).
DROP FUNCTION transparency_jobs_claim(integer, bigint, uuid[], boolean);
CREATE FUNCTION transparency_jobs_claim(max_jobs integer, lease_ms bigint, only_ids uuid[], skip_backoff boolean)
RETURNS SETOF transparency_jobs
LANGUAGE plpgsql SECURITY DEFINER SET search_path FROM CURRENT AS $$
BEGIN
  IF max_jobs < 1 OR lease_ms < 1 THEN
    RAISE EXCEPTION 'claim needs max_jobs and lease_ms >= 1' USING ERRCODE = 'invalid_parameter_value';
  END IF;
  RETURN QUERY
  WITH due AS (
    SELECT j.id, j.attestation_id, j.next_attempt_at AS due_at FROM transparency_jobs j WHERE j.state = 'queued'
      AND (j.next_attempt_at <= now() OR (only_ids IS NOT NULL AND skip_backoff AND j.lease_token IS NULL))
      AND (only_ids IS NULL OR j.id = ANY(only_ids))
    ORDER BY j.next_attempt_at, j.id LIMIT max_jobs FOR UPDATE SKIP LOCKED),
  claimed AS (
    UPDATE transparency_jobs j SET attempts = j.attempts + 1, lease_token = gen_random_uuid(),
           next_attempt_at = now() + lease_ms * interval '1 millisecond', updated_at = now()
    FROM due WHERE j.id = due.id AND j.attestation_id = due.attestation_id
    RETURNING j.*, due.due_at)
  SELECT c.id, c.attestation_id, c.state, c.attempts, c.last_error, c.next_attempt_at, c.lease_token,
         c.statement, c.entry_id, c.log_index, c.receipt, c.backend, c.published_at, c.created_at, c.updated_at
  FROM claimed c ORDER BY c.due_at, c.id;
END
$$;

DROP FUNCTION transparency_jobs_complete(uuid, uuid, text, text, bigint, bytea);
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

DROP FUNCTION transparency_jobs_fail(uuid, uuid, text, bigint);
CREATE FUNCTION transparency_jobs_fail(job_id uuid, token uuid, error text, delay_ms bigint)
RETURNS SETOF transparency_jobs
LANGUAGE sql SECURITY DEFINER SET search_path FROM CURRENT AS $$
  UPDATE transparency_jobs SET last_error = left(error, 2000), lease_token = NULL,
         next_attempt_at = now() + greatest(delay_ms, 0) * interval '1 millisecond', updated_at = now()
  WHERE id = job_id AND lease_token = token AND state = 'queued'
  RETURNING *
$$;

DROP FUNCTION timestamp_jobs_claim(integer, bigint);
CREATE FUNCTION timestamp_jobs_claim(max_jobs integer, lease_ms bigint) RETURNS SETOF timestamp_jobs
LANGUAGE plpgsql SECURITY DEFINER SET search_path FROM CURRENT AS $$
BEGIN
  IF max_jobs < 1 OR lease_ms < 1 THEN
    RAISE EXCEPTION 'claim needs max_jobs and lease_ms >= 1' USING ERRCODE = 'invalid_parameter_value';
  END IF;
  RETURN QUERY
  WITH due AS (
    SELECT j.attestation_id, j.next_attempt_at AS due_at FROM timestamp_jobs j
    WHERE j.state = 'queued' AND j.next_attempt_at <= clock_timestamp()
    ORDER BY j.next_attempt_at, j.attestation_id LIMIT max_jobs FOR UPDATE SKIP LOCKED),
  claimed AS (
    UPDATE timestamp_jobs j SET attempts = j.attempts + 1, lease_token = gen_random_uuid(),
           next_attempt_at = clock_timestamp() + lease_ms * interval '1 millisecond',
           updated_at = clock_timestamp()
    FROM due WHERE j.attestation_id = due.attestation_id
    RETURNING j.*, due.due_at)
  SELECT c.attestation_id, c.state, c.attempts, c.next_attempt_at, c.lease_token, c.last_error,
         c.created_at, c.updated_at
  FROM claimed c ORDER BY c.due_at, c.attestation_id;
END
$$;

REVOKE ALL ON FUNCTION transparency_jobs_claim(integer, bigint, uuid[], boolean),
  transparency_jobs_complete(uuid, uuid, text, text, bigint, bytea),
  transparency_jobs_fail(uuid, uuid, text, bigint),
  timestamp_jobs_claim(integer, bigint) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION transparency_jobs_claim(integer, bigint, uuid[], boolean),
  transparency_jobs_complete(uuid, uuid, text, text, bigint, bytea),
  transparency_jobs_fail(uuid, uuid, text, bigint),
  timestamp_jobs_claim(integer, bigint) TO vault_writer;

-- ------------------------------------------------------------------------------------------------
-- 7. Created ahead: every partitioned parent up to the same month. Companions of the records take
-- the records' monthly UUIDv7 bounds; the audit log, the months themselves.
CREATE FUNCTION vault_partition_month(p_parent text, lo_at timestamptz, hi_at timestamptz) RETURNS text
LANGUAGE plpgsql SET search_path FROM CURRENT AS $$
DECLARE
  part text := p_parent || '_p' || to_char(lo_at AT TIME ZONE 'UTC', 'YYYYMM');
  by_time boolean := p_parent = 'audit_log';
  col text := CASE p_parent WHEN 'attestations' THEN 'id' WHEN 'audit_log' THEN 'at' ELSE 'attestation_id' END;
  lo text := CASE WHEN by_time THEN quote_literal(lo_at) || '::timestamptz' ELSE quote_literal(vault_uuidv7_floor(lo_at)) || '::uuid' END;
  hi text := CASE WHEN by_time THEN quote_literal(hi_at) || '::timestamptz' ELSE quote_literal(vault_uuidv7_floor(hi_at)) || '::uuid' END;
BEGIN
  EXECUTE format('CREATE TABLE %I (LIKE %I INCLUDING DEFAULTS INCLUDING CONSTRAINTS)', part, p_parent);
  EXECUTE format('ALTER TABLE %I ADD CONSTRAINT %I CHECK (%I >= %s AND %I < %s)',
                 part, part || '_bound', col, lo, col, hi);
  EXECUTE format('ALTER TABLE %I ATTACH PARTITION %I FOR VALUES FROM (%s) TO (%s)', p_parent, part, lo, hi);
  -- The partition bound now says the same; keeping the check would cost every insert.
  EXECUTE format('ALTER TABLE %I DROP CONSTRAINT %I', part, part || '_bound');
  PERFORM vault_partition_guard(part::regclass);
  INSERT INTO vault_partitions (name, parent, lo, hi, from_at, to_at)
  VALUES (part, p_parent, vault_uuidv7_floor(lo_at), vault_uuidv7_floor(hi_at), lo_at, hi_at);
  RETURN part;
END
$$;

-- 0019's function, for every partitioned parent. The identity column of audit_log is not copied by
-- LIKE (no INCLUDING IDENTITY): a partition's rows take their id from the parent's sequence.
CREATE OR REPLACE FUNCTION vault_partitions_ensure(months_ahead integer) RETURNS SETOF text
LANGUAGE plpgsql SECURITY DEFINER SET search_path FROM CURRENT AS $$
DECLARE
  upto timestamptz;
  lo_at timestamptz;
  tbl text;
BEGIN
  IF months_ahead < 0 OR months_ahead > 120 THEN
    RAISE EXCEPTION 'months_ahead must be within 0..120 (got %)', months_ahead
      USING ERRCODE = 'invalid_parameter_value';
  END IF;
  PERFORM pg_advisory_xact_lock(hashtext('aibom-vault/partitions'));
  upto := vault_month_start(clock_timestamp()) + make_interval(months => months_ahead + 1);
  FOREACH tbl IN ARRAY ARRAY['attestations', 'transparency_jobs', 'timestamp_jobs',
                                'attestation_timestamps', 'audit_log'] LOOP
    SELECT max(p.to_at) INTO lo_at FROM vault_partitions p WHERE p.parent = tbl;
    -- The records' companions reach as far as the records do (an earlier, longer months_ahead).
    IF tbl <> 'audit_log' THEN
      SELECT greatest(upto, max(p.to_at)) INTO upto FROM vault_partitions p WHERE p.parent = 'attestations';
    END IF;
    WHILE lo_at < upto LOOP
      RETURN NEXT vault_partition_month(tbl, lo_at, lo_at + interval '1 month');
      lo_at := lo_at + interval '1 month';
    END LOOP;
  END LOOP;
END
$$;

-- ------------------------------------------------------------------------------------------------
-- 8. Retention: the companions of a retired record partition leave with it. A bundle of the
-- records holds what they keep (docs/export.md): each record's SCITT statement and receipt (with
-- the job's entry id and log position in the record's `transparency`) and its RFC 3161 time-stamp.
-- Queue state it does not hold: a month whose transparency or time-stamp jobs are still queued is
-- not retired (the work would leave the queue undone); the records' detach fails with 23001 and
-- retention tries again next round. A failed time-stamp job's last error is not in the bundle
-- (the record's Sigstore bundle simply has no time-stamp): it stays in the detached table, and is
-- gone with VAULT_RETENTION_DROP.
--
-- Companions are retired once every record partition their range covers has left (`hi` at or
-- below that of a detached or dropped record partition); they pass through `archived` carrying the
-- record partition's archive key, so `vault_partitions` says where their content went.
CREATE FUNCTION vault_partition_companions_retire(p_drop boolean) RETURNS SETOF text
LANGUAGE plpgsql SECURITY DEFINER SET search_path FROM CURRENT AS $$
DECLARE
  c vault_partitions%ROWTYPE;
  rp vault_partitions%ROWTYPE;
  n bigint;
  waiting boolean;
BEGIN
  FOR c IN SELECT * FROM vault_partitions p
           WHERE p.parent IN ('transparency_jobs', 'timestamp_jobs', 'attestation_timestamps')
             AND p.state = 'attached'
             AND p.hi <= (SELECT r.hi FROM vault_partitions r
                          WHERE r.parent = 'attestations' AND r.state IN ('detached', 'dropped')
                          ORDER BY r.hi DESC LIMIT 1)
           ORDER BY p.hi, p.name FOR UPDATE LOOP
    SELECT * INTO rp FROM vault_partitions r
    WHERE r.parent = 'attestations' AND r.hi >= c.hi ORDER BY r.hi LIMIT 1;
    IF c.parent IN ('transparency_jobs', 'timestamp_jobs') THEN
      EXECUTE format('SELECT EXISTS (SELECT FROM %I WHERE state = ''queued'')', c.name) INTO waiting;
      IF waiting THEN
        RAISE EXCEPTION '% still has queued jobs: the month retires once they are done', c.name
          USING ERRCODE = 'restrict_violation';
      END IF;
    END IF;
    EXECUTE format('SELECT count(*) FROM %I', c.name) INTO n;
    UPDATE vault_partitions SET state = 'archived', records = n, archive_key = rp.archive_key,
           archive_digest = rp.archive_digest, archived_at = clock_timestamp()
    WHERE name = c.name;
    EXECUTE format('ALTER TABLE %I DETACH PARTITION %I', c.parent, c.name);
    IF p_drop THEN
      EXECUTE format('DROP TABLE %I', c.name);
    END IF;
    UPDATE vault_partitions SET state = CASE WHEN p_drop THEN 'dropped' ELSE 'detached' END,
           detached_at = clock_timestamp()
    WHERE name = c.name;
    RETURN NEXT c.name;
  END LOOP;
END
$$;

-- 0019's detach, then the companions of what has left.
CREATE OR REPLACE FUNCTION vault_partition_detach(p_name text, p_drop boolean) RETURNS void
LANGUAGE plpgsql SECURITY DEFINER SET search_path FROM CURRENT AS $$
DECLARE
  p vault_partitions%ROWTYPE;
BEGIN
  SELECT * INTO p FROM vault_partitions WHERE name = p_name AND parent = 'attestations' FOR UPDATE;
  IF NOT FOUND OR p.state <> 'archived' THEN
    RAISE EXCEPTION 'partition % is not archived: only an archived partition is detached', p_name
      USING ERRCODE = 'restrict_violation';
  END IF;
  EXECUTE format('ALTER TABLE attestations DETACH PARTITION %I', p_name);
  IF p_drop THEN
    EXECUTE format('DROP TABLE %I', p_name);
  END IF;
  UPDATE vault_partitions SET state = CASE WHEN p_drop THEN 'dropped' ELSE 'detached' END,
         detached_at = clock_timestamp()
  WHERE name = p_name;
  PERFORM vault_partition_companions_retire(p_drop);
END
$$;

-- The months ahead for the new parents, and the companions of record partitions retired before
-- this migration (kept, not dropped: the choice to drop was not this migration's to make).
SELECT vault_partitions_ensure(3);
SELECT vault_partition_companions_retire(false);

REVOKE ALL ON FUNCTION vault_partition_month(text, timestamptz, timestamptz),
  vault_partition_companions_retire(boolean) FROM PUBLIC;
