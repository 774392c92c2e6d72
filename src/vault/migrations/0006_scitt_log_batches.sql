-- The local SCITT log commits appends in batches (src/transparency/local-log.ts): a batch's
-- receipts share one signature over the tree head the batch leaves behind.

-- leaf_hash was unique twice over: entry_id is UNIQUE and CHECKed to be encode(leaf_hash, 'hex'),
-- so equal leaf hashes already violate scitt_log_entries_entry_id_key. One index less per append.
ALTER TABLE scitt_log_entries DROP CONSTRAINT scitt_log_entries_leaf_hash_key;

COMMENT ON COLUMN scitt_log_entries.receipt IS
  'Receipt issued at registration: inclusion of this entry in the tree its commit batch left '
  'behind (size idx + 1 up to idx + batch size), signed once for the whole batch. Never changes.';

-- Entries are ~2–3 KiB (statement with its x5chain + receipt): just over the default 2 KiB at
-- which PostgreSQL compresses a row's large values with pglz, which cost more CPU than the whole
-- insert. Rows up to the page limit stay inline and uncompressed; larger ones are still toasted.
ALTER TABLE scitt_log_entries SET (toast_tuple_target = 8160);
