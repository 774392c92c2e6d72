-- The record table partitioned by time (issue 29; docs/vault.md "Partitions", docs/sizing.md).
--
-- Records are keyed by UUIDv7, whose leading 48 bits are the milliseconds of their creation, so
-- `attestations` is RANGE-partitioned on `id` itself: one partition per UTC month, bounded by the
-- smallest UUID of each month's first millisecond. The primary key stays `(id)`, keyset pages (ORDER
-- BY id, `id > $after`) lead with the partition key and touch one or two partitions, and GET by id
-- prunes to one.
--
-- The existing table is converted without moving a row: it is renamed and attached as the first
-- partition, `attestations_before`, covering everything below the first monthly bound (MINVALUE up
-- to the month after its newest record, or up to this month when it is empty). Monthly partitions
-- from there on are created ahead by `vault_partitions_ensure` (this migration, every start-up and
-- the append path when a row finds no partition) and attached without blocking writers.
--
-- Uniqueness of `seq` and `digest` cannot be a constraint of a partitioned table (a unique index
-- must contain the partition key); the chain trigger enforces both instead: seq continues the head
-- (so it is unique by construction), and a digest already stored in any attached partition, or
-- twice in one statement, fails the insert with 23505 as the constraint did.

DO $$
BEGIN
  EXECUTE format('SET LOCAL search_path = %I, pg_temp', current_schema());
END
$$;

-- The smallest UUID of an instant's millisecond: below every UUIDv7 of that millisecond and above
-- every UUIDv7 of the ones before it (uuid order is byte order).
CREATE FUNCTION vault_uuidv7_floor(at timestamptz) RETURNS uuid
LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE AS $$
  SELECT (substr(h, 1, 8) || '-' || substr(h, 9, 4) || '-0000-0000-000000000000')::uuid
  FROM (SELECT lpad(to_hex(floor(extract(epoch FROM at) * 1000)::bigint), 12, '0') AS h) AS t
$$;

-- The milliseconds a UUIDv7 carries, as an instant.
CREATE FUNCTION vault_uuidv7_time(id uuid) RETURNS timestamptz
LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE AS $$
  SELECT to_timestamp(('x' || lpad(replace(substr(id::text, 1, 13), '-', ''), 16, '0'))::bit(64)::bigint / 1000.0)
$$;

-- The start of the UTC month holding an instant.
CREATE FUNCTION vault_month_start(at timestamptz) RETURNS timestamptz
LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE AS $$
  SELECT date_trunc('month', at AT TIME ZONE 'UTC') AT TIME ZONE 'UTC'
$$;

-- One row per partition the vault ever had: what it covers and where it went. `lo` NULL is
-- MINVALUE. A partition is `attached` (part of `attestations`), then `archived` (its records were
-- written to the object store as a signed export bundle), then `detached` (no longer part of
-- `attestations`; the table is kept) or `dropped` (VAULT_RETENTION_DROP). Rows are never deleted;
-- only the state moves forward, through the functions below.
CREATE TABLE vault_partitions (
  name text PRIMARY KEY,
  parent text NOT NULL,
  lo uuid,
  hi uuid NOT NULL,
  from_at timestamptz,
  to_at timestamptz NOT NULL,
  state text NOT NULL DEFAULT 'attached',
  records bigint,
  first_seq bigint,
  last_seq bigint,
  -- Digest of the record at last_seq: where the hash chain of the records still attached resumes.
  last_digest text,
  archive_key text,
  archive_digest text,
  created_at timestamptz NOT NULL DEFAULT clock_timestamp(),
  archived_at timestamptz,
  detached_at timestamptz,
  CONSTRAINT vault_partitions_state CHECK (state IN ('attached', 'archived', 'detached', 'dropped')),
  CONSTRAINT vault_partitions_range CHECK (lo IS NULL OR lo < hi),
  CONSTRAINT vault_partitions_archive CHECK ((state = 'attached') = (archive_key IS NULL))
);

CREATE TRIGGER vault_partitions_kept
  BEFORE DELETE OR TRUNCATE ON vault_partitions
  FOR EACH STATEMENT EXECUTE FUNCTION vault_reject_change();

-- The guards every partition carries: a statement naming a partition directly (not routed through
-- `attestations`) may not write it, for any role: such an insert would skip the chain trigger,
-- which fires on the parent only. Writes through the parent are routed to partitions without
-- firing these (statement triggers fire for the table a statement names).
CREATE FUNCTION vault_partition_guard(part regclass) RETURNS void
LANGUAGE plpgsql SET search_path FROM CURRENT AS $$
BEGIN
  EXECUTE format('CREATE TRIGGER %I BEFORE INSERT OR UPDATE OR DELETE OR TRUNCATE ON %s '
                 'FOR EACH STATEMENT EXECUTE FUNCTION vault_reject_change()',
                 'vault_partition_append_only', part);
END
$$;

-- 1. The existing table becomes the first partition, keeping its rows, indexes and checks.
ALTER TABLE attestations RENAME TO attestations_before;
ALTER INDEX attestations_pkey RENAME TO attestations_before_pkey;
ALTER INDEX attestations_namespace_id RENAME TO attestations_before_namespace_id;
ALTER INDEX attestations_run_id RENAME TO attestations_before_run_id;
ALTER INDEX attestations_policy_id RENAME TO attestations_before_policy_id;
ALTER INDEX attestations_subjects RENAME TO attestations_before_subjects;
ALTER INDEX attestations_artifact_digests RENAME TO attestations_before_artifact_digests;
ALTER INDEX attestations_capability_token_ids RENAME TO attestations_before_capability_token_ids;
ALTER INDEX attestations_created_at_id RENAME TO attestations_before_created_at_id;
DROP TRIGGER attestations_chain_extend ON attestations_before;
DROP TRIGGER attestations_append_only ON attestations_before;
REVOKE ALL ON attestations_before FROM vault_writer;

-- 2. The partitioned table: the same columns, checks and indexes.
CREATE TABLE attestations (
  id uuid NOT NULL,
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
  CONSTRAINT attestations_pkey PRIMARY KEY (id),
  CONSTRAINT attestations_seq_positive CHECK (seq > 0),
  CONSTRAINT attestations_id_v7 CHECK (substr(id::text, 15, 1) = '7'),
  CONSTRAINT attestations_namespace_nonempty CHECK (namespace <> ''),
  CONSTRAINT attestations_kind_known
    CHECK (kind IN ('run', 'step', 'artifact', 'policy', 'capability', 'aibom')),
  CONSTRAINT attestations_digest_format CHECK (length(digest) = 71 AND digest ~ '^sha256:[0-9a-f]+$'),
  CONSTRAINT attestations_prev_digest_format
    CHECK (length(prev_digest) = 71 AND prev_digest ~ '^sha256:[0-9a-f]+$'),
  CONSTRAINT attestations_step_needs_run CHECK (step_id IS NULL OR run_id IS NOT NULL),
  CONSTRAINT attestations_version_needs_pack CHECK (policy_version IS NULL OR policy_pack IS NOT NULL),
  CONSTRAINT attestations_envelope_object CHECK (jsonb_typeof(envelope) = 'object'),
  CONSTRAINT attestations_signature_object CHECK (jsonb_typeof(signature) = 'object')
) PARTITION BY RANGE (id);

CREATE INDEX attestations_namespace_id ON attestations (namespace, id);
CREATE INDEX attestations_run_id ON attestations (run_id, id) WHERE run_id IS NOT NULL;
CREATE INDEX attestations_policy_id ON attestations (policy_pack, policy_version, id)
  WHERE policy_pack IS NOT NULL;
CREATE INDEX attestations_subjects ON attestations USING gin (subjects);
CREATE INDEX attestations_artifact_digests ON attestations USING gin (artifact_digests);
CREATE INDEX attestations_capability_token_ids ON attestations USING gin (capability_token_ids);
CREATE INDEX attestations_created_at_id ON attestations (created_at, id);
-- What the unique constraints indexed: seq walks (chain, checkpoints) and the digest probe.
CREATE INDEX attestations_seq ON attestations (seq);
CREATE INDEX attestations_digest ON attestations (digest);

-- 3. Attach the old table. Its bound check is added and validated first, so ATTACH does not scan
-- again; its indexes match the parent's and are attached, not rebuilt (seq and digest are built:
-- the old unique indexes are not the same kind of index).
DO $$
DECLARE
  newest uuid;
  bound timestamptz;
BEGIN
  SELECT id INTO newest FROM attestations_before ORDER BY id DESC LIMIT 1;
  bound := CASE WHEN newest IS NULL THEN vault_month_start(clock_timestamp())
                ELSE vault_month_start(greatest(clock_timestamp(), vault_uuidv7_time(newest))) + interval '1 month' END;
  EXECUTE format('ALTER TABLE attestations_before ADD CONSTRAINT attestations_before_bound CHECK (id < %L::uuid)',
                 vault_uuidv7_floor(bound));
  EXECUTE format('ALTER TABLE attestations ATTACH PARTITION attestations_before FOR VALUES FROM (MINVALUE) TO (%L)',
                 vault_uuidv7_floor(bound));
  ALTER TABLE attestations_before DROP CONSTRAINT attestations_before_bound;
  INSERT INTO vault_partitions (name, parent, lo, hi, from_at, to_at)
  VALUES ('attestations_before', 'attestations', NULL, vault_uuidv7_floor(bound), NULL, bound);
END
$$;
ALTER TABLE attestations_before DROP CONSTRAINT attestations_seq_key;
ALTER TABLE attestations_before DROP CONSTRAINT attestations_digest_key;
SELECT vault_partition_guard('attestations_before');

-- 4. The parent's guards and chain trigger, as before.
CREATE TRIGGER attestations_append_only
  BEFORE UPDATE OR DELETE OR TRUNCATE ON attestations
  FOR EACH STATEMENT EXECUTE FUNCTION vault_reject_change();

-- 0008's chain check, plus the uniqueness the constraints gave: a digest stored in an attached
-- partition or repeated within the statement fails it (seq is unique by the continuity check).
CREATE OR REPLACE FUNCTION vault_chain_extend() RETURNS trigger
LANGUAGE plpgsql SECURITY DEFINER SET search_path FROM CURRENT AS $$
DECLARE
  h vault_head%ROWTYPE;
  bad bigint;
  dup text;
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
  -- One probe of each partition's digest index per new row: the LIMIT inside LATERAL keeps the
  -- planner from turning this into a hash semi-join over every stored row (a full scan per append).
  SELECT n.digest INTO dup FROM new_rows n
  CROSS JOIN LATERAL (SELECT 1 FROM attestations a WHERE a.digest = n.digest AND a.id <> n.id LIMIT 1) AS hit
  LIMIT 1;
  IF dup IS NULL THEN
    SELECT n.digest INTO dup FROM new_rows n GROUP BY n.digest HAVING count(*) > 1 LIMIT 1;
  END IF;
  IF dup IS NOT NULL THEN
    RAISE EXCEPTION 'duplicate key value violates unique constraint "attestations_digest_key"'
      USING ERRCODE = 'unique_violation', DETAIL = format('Key (digest)=(%s) already exists.', dup),
            CONSTRAINT = 'attestations_digest_key', TABLE = 'attestations';
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

REVOKE ALL ON attestations FROM PUBLIC;
GRANT SELECT, INSERT ON attestations TO vault_writer;

-- Creates the monthly partitions of `attestations` from the last one's upper bound up to and
-- including the month `months_ahead` after now (contiguous: a start-up after a long stop fills the
-- gap). Each is created as a plain table with the parent's columns, checks and indexes plus its
-- bound as a check, then attached: ATTACH takes SHARE UPDATE EXCLUSIVE on the parent, which
-- readers and writers do not conflict with, and skips the scan because the check proves the bound.
-- Safe to call from every replica (one at a time, under an advisory lock). Returns the new names.
CREATE FUNCTION vault_partitions_ensure(months_ahead integer) RETURNS SETOF text
LANGUAGE plpgsql SECURITY DEFINER SET search_path FROM CURRENT AS $$
DECLARE
  upto timestamptz;
  lo_at timestamptz;
  hi_at timestamptz;
  part text;
BEGIN
  IF months_ahead < 0 OR months_ahead > 120 THEN
    RAISE EXCEPTION 'months_ahead must be within 0..120 (got %)', months_ahead
      USING ERRCODE = 'invalid_parameter_value';
  END IF;
  PERFORM pg_advisory_xact_lock(hashtext('aibom-vault/partitions'));
  upto := vault_month_start(clock_timestamp()) + make_interval(months => months_ahead + 1);
  SELECT max(p.to_at) INTO lo_at FROM vault_partitions p WHERE p.parent = 'attestations';
  WHILE lo_at < upto LOOP
    hi_at := lo_at + interval '1 month';
    part := 'attestations_p' || to_char(lo_at AT TIME ZONE 'UTC', 'YYYYMM');
    EXECUTE format('CREATE TABLE %I (LIKE attestations INCLUDING DEFAULTS INCLUDING CONSTRAINTS)', part);
    EXECUTE format('ALTER TABLE %I ADD CONSTRAINT %I CHECK (id >= %L::uuid AND id < %L::uuid)',
                   part, part || '_bound', vault_uuidv7_floor(lo_at), vault_uuidv7_floor(hi_at));
    EXECUTE format('ALTER TABLE attestations ATTACH PARTITION %I FOR VALUES FROM (%L) TO (%L)',
                   part, vault_uuidv7_floor(lo_at), vault_uuidv7_floor(hi_at));
    -- The partition bound now says the same; keeping the check would cost every insert.
    EXECUTE format('ALTER TABLE %I DROP CONSTRAINT %I', part, part || '_bound');
    PERFORM vault_partition_guard(part::regclass);
    INSERT INTO vault_partitions (name, parent, lo, hi, from_at, to_at)
    VALUES (part, 'attestations', vault_uuidv7_floor(lo_at), vault_uuidv7_floor(hi_at), lo_at, hi_at);
    RETURN NEXT part;
    lo_at := hi_at;
  END LOOP;
END
$$;

SELECT vault_partitions_ensure(3);

-- Retention, step 1: the records of a partition were written to the object store as a signed export
-- bundle (`key`, `digest` of its bytes; '' and NULL for an empty partition). Only a partition wholly
-- in the past, whose every record a signed checkpoint already covers (so the vault keeps proving
-- what it held after the records leave), and with exactly the records the caller says it wrote.
CREATE FUNCTION vault_partition_archived(p_name text, p_records bigint, p_first_seq bigint,
                                         p_last_seq bigint, p_key text, p_digest text)
RETURNS void
LANGUAGE plpgsql SECURITY DEFINER SET search_path FROM CURRENT AS $$
DECLARE
  p vault_partitions%ROWTYPE;
  n bigint;
  lo_seq bigint;
  hi_seq bigint;
  covered bigint;
BEGIN
  SELECT * INTO p FROM vault_partitions WHERE name = p_name AND parent = 'attestations' FOR UPDATE;
  IF NOT FOUND OR p.state <> 'attached' THEN
    RAISE EXCEPTION 'partition % is not an attached partition of attestations', p_name
      USING ERRCODE = 'restrict_violation';
  END IF;
  IF p.to_at > clock_timestamp() THEN
    RAISE EXCEPTION 'partition % reaches until %: only past months are archived', p_name, p.to_at
      USING ERRCODE = 'restrict_violation';
  END IF;
  -- Oldest first: what left the live table is always a prefix of the chain, so the walk of what
  -- stays starts at one known link.
  IF EXISTS (SELECT FROM vault_partitions o WHERE o.parent = 'attestations' AND o.hi < p.hi AND o.state = 'attached') THEN
    RAISE EXCEPTION 'partition % is not the oldest attached partition: archive the older ones first', p_name
      USING ERRCODE = 'restrict_violation';
  END IF;
  SELECT count(*), min(a.seq), max(a.seq) INTO n, lo_seq, hi_seq FROM attestations a
  WHERE (p.lo IS NULL OR a.id >= p.lo) AND a.id < p.hi;
  IF n <> p_records OR lo_seq IS DISTINCT FROM p_first_seq OR hi_seq IS DISTINCT FROM p_last_seq THEN
    RAISE EXCEPTION 'partition % holds % records (seq % to %), not the % archived', p_name, n, lo_seq, hi_seq, p_records
      USING ERRCODE = 'restrict_violation';
  END IF;
  SELECT coalesce(max(c.tree_size), 0) INTO covered FROM vault_checkpoints c;
  IF hi_seq IS NOT NULL AND hi_seq > covered THEN
    RAISE EXCEPTION 'partition % ends at seq % but the newest checkpoint covers %: sign one first', p_name, hi_seq, covered
      USING ERRCODE = 'restrict_violation';
  END IF;
  IF (n = 0) <> (p_key = '') OR (p_key <> '' AND p_digest !~ '^sha256:[0-9a-f]{64}$') THEN
    RAISE EXCEPTION 'partition %: an archive key and sha256 digest are needed exactly when it holds records', p_name
      USING ERRCODE = 'invalid_parameter_value';
  END IF;
  UPDATE vault_partitions SET state = 'archived', records = n, first_seq = lo_seq, last_seq = hi_seq,
         last_digest = (SELECT a.digest FROM attestations a WHERE a.seq = hi_seq AND a.id < p.hi),
         archive_key = p_key, archive_digest = p_digest, archived_at = clock_timestamp()
  WHERE name = p_name;
END
$$;

-- Retention, step 2: an archived partition leaves `attestations` (DETACH: the table and its rows are
-- kept, no row is rewritten) or, with p_drop, is dropped. The head, the tree and the checkpoints
-- stay: they keep proving what the partition held.
CREATE FUNCTION vault_partition_detach(p_name text, p_drop boolean) RETURNS void
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
END
$$;

-- The state only moves forward (attached → archived → detached | dropped), through the functions.
CREATE FUNCTION vault_partitions_forward() RETURNS trigger
LANGUAGE plpgsql SET search_path FROM CURRENT AS $$
BEGIN
  IF NEW.name <> OLD.name OR NEW.lo IS DISTINCT FROM OLD.lo OR NEW.hi <> OLD.hi
     OR (OLD.state <> 'attached' AND (NEW.archive_key, NEW.archive_digest, NEW.records, NEW.last_seq, NEW.last_digest)
         IS DISTINCT FROM (OLD.archive_key, OLD.archive_digest, OLD.records, OLD.last_seq, OLD.last_digest))
     OR NOT ((OLD.state = 'attached' AND NEW.state = 'archived')
          OR (OLD.state = 'archived' AND NEW.state IN ('detached', 'dropped'))) THEN
    RAISE EXCEPTION 'partition % cannot move from % to % or change its range or archive', OLD.name, OLD.state, NEW.state
      USING ERRCODE = 'restrict_violation';
  END IF;
  RETURN NEW;
END
$$;
CREATE TRIGGER vault_partitions_forward
  BEFORE UPDATE ON vault_partitions
  FOR EACH ROW EXECUTE FUNCTION vault_partitions_forward();

REVOKE ALL ON vault_partitions FROM PUBLIC;
GRANT SELECT ON vault_partitions TO vault_writer;
REVOKE ALL ON FUNCTION vault_partitions_ensure(integer), vault_partition_guard(regclass),
  vault_partition_archived(text, bigint, bigint, bigint, text, text), vault_partition_detach(text, boolean),
  vault_partitions_forward() FROM PUBLIC;
GRANT EXECUTE ON FUNCTION vault_partitions_ensure(integer),
  vault_partition_archived(text, bigint, bigint, bigint, text, text), vault_partition_detach(text, boolean)
TO vault_writer;
