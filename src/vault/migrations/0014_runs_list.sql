-- The runs list (GET /v1/runs, the UI's runs page): newest first, keyset pages on
-- (created_at, id). One index per namespace, so a page for the namespaces a caller may read is a
-- bounded index range scan in each (at most 16 of them); one over every namespace for callers
-- allowed cluster-wide. src/vault/run-list.ts.
CREATE INDEX runs_namespace_created_id ON runs (namespace, created_at DESC, id DESC);
CREATE INDEX runs_created_id ON runs (created_at DESC, id DESC);
