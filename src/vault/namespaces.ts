import type pg from 'pg';

/**
 * Every namespace holding at least one attestation, sorted. A loose index scan of
 * (namespace, id): one index descent per namespace, not a pass over every row.
 */
export async function listNamespaces(db: pg.Pool | pg.PoolClient): Promise<string[]> {
  const { rows } = await db.query<{ namespace: string }>({
    name: 'vault_list_namespaces',
    text: `
      WITH RECURSIVE ns AS (
        (SELECT namespace FROM attestations ORDER BY namespace LIMIT 1)
        UNION ALL
        SELECT (SELECT a.namespace FROM attestations a WHERE a.namespace > ns.namespace ORDER BY a.namespace LIMIT 1)
        FROM ns WHERE ns.namespace IS NOT NULL
      )
      SELECT namespace FROM ns WHERE namespace IS NOT NULL`,
  });
  return rows.map((r) => r.namespace);
}
