-- Witnessed logs (docs/transparency.md "Witnessed logs"): the C2SP signed-note checkpoints
-- (c2sp.org/tlog-checkpoint) of the service's two Merkle trees, the vault's records ('vault') and
-- the local SCITT log ('scitt'), the witnesses' cosignatures of them (c2sp.org/tlog-cosignature)
-- and the answers that were refusals. Append-only, like every other record of what was signed.

DO $$
BEGIN
  EXECUTE format('SET LOCAL search_path = %I, pg_temp', current_schema());
END
$$;

-- One signed note per log and size: origin, size and root in the note text, the log's Ed25519
-- signature line after it, and the verifier key that made it (a past key stays known).
CREATE TABLE tlog_checkpoints (
  log text NOT NULL,
  tree_size bigint NOT NULL,
  root_hash bytea NOT NULL,
  origin text NOT NULL,
  note text NOT NULL,
  vkey text NOT NULL,
  created_at timestamptz NOT NULL DEFAULT date_trunc('milliseconds', clock_timestamp()),
  PRIMARY KEY (log, tree_size),
  CONSTRAINT tlog_checkpoints_log_known CHECK (log IN ('vault', 'scitt')),
  CONSTRAINT tlog_checkpoints_size_positive CHECK (tree_size > 0),
  CONSTRAINT tlog_checkpoints_root_size CHECK (length(root_hash) = 32)
);

-- A witness's cosignature/v1 of one of them: the signature line as the witness answered it (its
-- key id and timestamp inside), verified with the witness's configured key before it is stored.
CREATE TABLE tlog_cosignatures (
  log text NOT NULL,
  tree_size bigint NOT NULL,
  witness text NOT NULL,
  witness_key_id text NOT NULL,
  line text NOT NULL,
  cosigned_at timestamptz NOT NULL,
  created_at timestamptz NOT NULL DEFAULT date_trunc('milliseconds', clock_timestamp()),
  PRIMARY KEY (log, tree_size, witness, witness_key_id),
  FOREIGN KEY (log, tree_size) REFERENCES tlog_checkpoints (log, tree_size),
  CONSTRAINT tlog_cosignatures_key_id CHECK (witness_key_id ~ '^[0-9a-f]{8}$')
);

-- What a witness answered instead of a cosignature: 'inconsistent' (422: the tree shown does not
-- extend the one it cosigned), 'ahead' (409 naming a size larger than the tree: it has seen more
-- of this log than the log now has), 'rejected' (400, 403, 404: it does not know the log or key).
CREATE TABLE tlog_witness_refusals (
  log text NOT NULL,
  tree_size bigint NOT NULL,
  witness text NOT NULL,
  witness_key_id text NOT NULL,
  outcome text NOT NULL,
  http_status int NOT NULL,
  old_size bigint NOT NULL,
  witness_size bigint,
  detail text NOT NULL,
  created_at timestamptz NOT NULL DEFAULT date_trunc('milliseconds', clock_timestamp()),
  FOREIGN KEY (log, tree_size) REFERENCES tlog_checkpoints (log, tree_size),
  CONSTRAINT tlog_witness_refusals_outcome CHECK (outcome IN ('inconsistent', 'ahead', 'rejected'))
);
CREATE INDEX tlog_witness_refusals_by_witness ON tlog_witness_refusals (log, witness, witness_key_id, created_at);

CREATE TRIGGER tlog_checkpoints_append_only
  BEFORE UPDATE OR DELETE OR TRUNCATE ON tlog_checkpoints
  FOR EACH STATEMENT EXECUTE FUNCTION vault_reject_change();
CREATE TRIGGER tlog_cosignatures_append_only
  BEFORE UPDATE OR DELETE OR TRUNCATE ON tlog_cosignatures
  FOR EACH STATEMENT EXECUTE FUNCTION vault_reject_change();
CREATE TRIGGER tlog_witness_refusals_append_only
  BEFORE UPDATE OR DELETE OR TRUNCATE ON tlog_witness_refusals
  FOR EACH STATEMENT EXECUTE FUNCTION vault_reject_change();

-- Stores a signed note of a tree this database holds, so a note can only ever state a root the
-- receipts and checkpoints prove: for 'vault', the root of the signed vault checkpoint of that
-- size; for 'scitt', the fold of the SCITT log's stored perfect subtrees of [0, size) within its
-- head. Idempotent for the same note; another note of a stored (log, size) is refused. The note's
-- signature is checked by whoever reads it (the database cannot).
CREATE FUNCTION tlog_checkpoint_add(new_log text, new_size bigint, new_root bytea, new_origin text,
                                    new_note text, new_vkey text)
RETURNS void
LANGUAGE plpgsql SECURITY DEFINER SET search_path FROM CURRENT AS $$
DECLARE
  acc bytea;
  node bytea;
  start bigint := 0;
  k int;
BEGIN
  IF new_log = 'vault' THEN
    IF NOT EXISTS (SELECT FROM vault_checkpoints c WHERE c.tree_size = new_size AND c.root_hash = new_root) THEN
      RAISE EXCEPTION 'no vault checkpoint of size % has this root', new_size USING ERRCODE = 'restrict_violation';
    END IF;
  ELSIF new_log = 'scitt' THEN
    IF new_size > (SELECT h.tree_size FROM scitt_log_head h) THEN
      RAISE EXCEPTION 'the SCITT log has no tree of size % yet', new_size USING ERRCODE = 'restrict_violation';
    END IF;
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
        acc := coalesce(acc, ''::bytea) || node;
        start := start + (1::bigint << k);
      END IF;
    END LOOP;
    IF merkle_fold_right(acc) IS DISTINCT FROM new_root THEN
      RAISE EXCEPTION 'SCITT log root at size % is not this root', new_size USING ERRCODE = 'restrict_violation';
    END IF;
  ELSE
    RAISE EXCEPTION 'unknown log %', new_log USING ERRCODE = 'check_violation';
  END IF;
  INSERT INTO tlog_checkpoints (log, tree_size, root_hash, origin, note, vkey)
  VALUES (new_log, new_size, new_root, new_origin, new_note, new_vkey)
  ON CONFLICT (log, tree_size) DO NOTHING;
  IF NOT EXISTS (SELECT FROM tlog_checkpoints c
                 WHERE c.log = new_log AND c.tree_size = new_size AND c.note = new_note) THEN
    RAISE EXCEPTION 'another note of % at size % is stored', new_log, new_size USING ERRCODE = 'restrict_violation';
  END IF;
END
$$;

REVOKE ALL ON tlog_checkpoints, tlog_cosignatures, tlog_witness_refusals FROM PUBLIC;
GRANT SELECT ON tlog_checkpoints TO vault_writer;
GRANT SELECT, INSERT ON tlog_cosignatures, tlog_witness_refusals TO vault_writer;
REVOKE ALL ON FUNCTION tlog_checkpoint_add(text, bigint, bytea, text, text, text) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION tlog_checkpoint_add(text, bigint, bytea, text, text, text) TO vault_writer;
