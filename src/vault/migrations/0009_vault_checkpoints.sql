-- Signed checkpoints of the vault (ADR 0008, docs/chain.md): an RFC 9162 Merkle tree over every
-- record in seq order (leaf index = seq - 1; the leaf is the record's id, seq, digest and labels,
-- src/checkpoint/leaf.ts), whose heads the controller signs. A verifier holding an earlier
-- checkpoint detects a removed, reordered or relabelled record without trusting the database: the
-- records as the API serves them must fold to the signed root, and a later checkpoint must be
-- consistent with it (RFC 9162 consistency proof from the stored subtrees).

DO $$
BEGIN
  EXECUTE format('SET LOCAL search_path = %I, pg_temp', current_schema());
END
$$;

-- Perfect subtrees (2^level leaves from idx * 2^level); level 0 holds the leaf hashes. Written
-- once, by the checkpointer that completes them; any root and proof needs O(log n) of them.
CREATE TABLE vault_tree_nodes (
  level smallint NOT NULL,
  idx bigint NOT NULL,
  hash bytea NOT NULL,
  PRIMARY KEY (level, idx),
  CONSTRAINT vault_tree_nodes_level_range CHECK (level BETWEEN 0 AND 62),
  CONSTRAINT vault_tree_nodes_idx_nonnegative CHECK (idx >= 0),
  CONSTRAINT vault_tree_nodes_hash_size CHECK (length(hash) = 32)
);

-- One row per signed checkpoint: the tree of the first tree_size records, its root, and the
-- signed statement (COSE_Sign1 by the service signer) a verifier keeps.
CREATE TABLE vault_checkpoints (
  tree_size bigint PRIMARY KEY,
  root_hash bytea NOT NULL,
  last_id uuid NOT NULL,
  statement bytea NOT NULL,
  created_at timestamptz NOT NULL DEFAULT date_trunc('milliseconds', clock_timestamp()),
  CONSTRAINT vault_checkpoints_size_positive CHECK (tree_size > 0),
  CONSTRAINT vault_checkpoints_root_size CHECK (length(root_hash) = 32)
);

-- A checkpoint's registration in the transparency log (SERVICE_TRANSPARENCY_WRITER=1).
CREATE TABLE vault_checkpoint_receipts (
  tree_size bigint PRIMARY KEY,
  backend text NOT NULL,
  entry_id text NOT NULL,
  log_index bigint,
  receipt bytea NOT NULL,
  created_at timestamptz NOT NULL DEFAULT clock_timestamp(),
  CONSTRAINT vault_checkpoint_receipts_backend_known CHECK (backend IN ('local', 'scrapi'))
);

CREATE TRIGGER vault_tree_nodes_append_only
  BEFORE UPDATE OR DELETE OR TRUNCATE ON vault_tree_nodes
  FOR EACH STATEMENT EXECUTE FUNCTION vault_reject_change();
CREATE TRIGGER vault_checkpoints_append_only
  BEFORE UPDATE OR DELETE OR TRUNCATE ON vault_checkpoints
  FOR EACH STATEMENT EXECUTE FUNCTION vault_reject_change();
CREATE TRIGGER vault_checkpoint_receipts_append_only
  BEFORE UPDATE OR DELETE OR TRUNCATE ON vault_checkpoint_receipts
  FOR EACH STATEMENT EXECUTE FUNCTION vault_reject_change();

-- Stores subtrees of the tree (idempotent: a subtree already stored must be the same hash). Each
-- must lie within the records (leaf index < the vault head's seq) and, above level 0, hash from its
-- two stored children; leaf hashes are the checkpointer's to compute from the records (JCS, not
-- SQL), and the verifier's to recompute from what the API serves.
CREATE FUNCTION vault_tree_add_nodes(levels smallint[], idxs bigint[], hashes bytea[]) RETURNS void
LANGUAGE plpgsql SECURITY DEFINER SET search_path FROM CURRENT AS $$
DECLARE
  head_seq bigint;
  bad text;
BEGIN
  SELECT h.last_seq INTO head_seq FROM vault_head h;
  INSERT INTO vault_tree_nodes (level, idx, hash)
  SELECT * FROM unnest(levels, idxs, hashes) ON CONFLICT (level, idx) DO NOTHING;
  SELECT format('%s/%s', n.level, n.idx) INTO bad
  FROM unnest(levels, idxs, hashes) AS n(level, idx, hash)
  LEFT JOIN vault_tree_nodes s ON s.level = n.level AND s.idx = n.idx
  WHERE s.hash IS DISTINCT FROM n.hash
     OR (n.idx + 1) * (1::bigint << n.level) > head_seq
     OR (n.level > 0 AND n.hash IS DISTINCT FROM sha256('\x01'::bytea
          || (SELECT c.hash FROM vault_tree_nodes c WHERE c.level = n.level - 1 AND c.idx = 2 * n.idx)
          || (SELECT c.hash FROM vault_tree_nodes c WHERE c.level = n.level - 1 AND c.idx = 2 * n.idx + 1)))
  LIMIT 1;
  IF bad IS NOT NULL THEN
    RAISE EXCEPTION 'vault tree subtree % is beyond the records, differs from the stored one or does not hash from its children', bad
      USING ERRCODE = 'restrict_violation';
  END IF;
END
$$;

-- Stores a checkpoint: strictly larger than every stored one, within the records, naming the
-- record at its last position, and with the root the stored subtrees of [0, tree_size) fold to.
-- The statement's signature is checked by whoever reads it (the database cannot).
CREATE FUNCTION vault_checkpoint_add(new_size bigint, new_root bytea, new_last_id uuid, new_statement bytea)
RETURNS void
LANGUAGE plpgsql SECURITY DEFINER SET search_path FROM CURRENT AS $$
DECLARE
  acc bytea;
  node bytea;
  start bigint := 0;
  k int;
BEGIN
  -- One checkpointer at a time (two controller replicas during a leadership handover).
  PERFORM pg_advisory_xact_lock(hashtext('aibom-vault/checkpoint'));
  IF new_size <= coalesce((SELECT max(c.tree_size) FROM vault_checkpoints c), 0) THEN
    RAISE EXCEPTION 'vault checkpoint of size % is not larger than the last one', new_size
      USING ERRCODE = 'restrict_violation';
  END IF;
  IF NOT EXISTS (SELECT FROM attestations a WHERE a.seq = new_size AND a.id = new_last_id) THEN
    RAISE EXCEPTION 'vault checkpoint of size % does not end at record %', new_size, new_last_id
      USING ERRCODE = 'restrict_violation';
  END IF;
  FOR k IN REVERSE 62..0 LOOP
    IF (new_size >> k) & 1 = 1 THEN
      SELECT c.hash INTO node FROM vault_tree_nodes c WHERE c.level = k AND c.idx = start >> k;
      IF node IS NULL THEN
        RAISE EXCEPTION 'vault tree subtree %/% is missing', k, start >> k USING ERRCODE = 'restrict_violation';
      END IF;
      acc := coalesce(acc, ''::bytea) || node;
      start := start + (1::bigint << k);
    END IF;
  END LOOP;
  IF merkle_fold_right(acc) IS DISTINCT FROM new_root THEN
    RAISE EXCEPTION 'vault checkpoint root at size % does not match the stored subtrees', new_size
      USING ERRCODE = 'restrict_violation';
  END IF;
  INSERT INTO vault_checkpoints (tree_size, root_hash, last_id, statement)
  VALUES (new_size, new_root, new_last_id, new_statement);
END
$$;

-- Every process waiting for a checkpoint (the API's on-demand request) hears of a new one.
CREATE FUNCTION vault_checkpoints_notify() RETURNS trigger
LANGUAGE plpgsql SET search_path FROM CURRENT AS $$
BEGIN
  PERFORM pg_notify('aibom_vault_checkpoint', NEW.tree_size::text);
  RETURN NULL;
END
$$;

CREATE TRIGGER vault_checkpoints_notify
  AFTER INSERT ON vault_checkpoints
  FOR EACH ROW EXECUTE FUNCTION vault_checkpoints_notify();

REVOKE ALL ON vault_tree_nodes, vault_checkpoints, vault_checkpoint_receipts FROM PUBLIC;
GRANT SELECT ON vault_tree_nodes, vault_checkpoints TO vault_writer;
GRANT SELECT, INSERT ON vault_checkpoint_receipts TO vault_writer;
REVOKE ALL ON FUNCTION vault_tree_add_nodes(smallint[], bigint[], bytea[]),
  vault_checkpoint_add(bigint, bytea, uuid, bytea), vault_checkpoints_notify() FROM PUBLIC;
GRANT EXECUTE ON FUNCTION vault_tree_add_nodes(smallint[], bigint[], bytea[]),
  vault_checkpoint_add(bigint, bytea, uuid, bytea) TO vault_writer;
