import type pg from 'pg';

/** Reads of capability_grants that the API needs beside the records (0011_capability_grants.sql). */
export interface CapabilityGrantRepository {
  /**
   * The root keys that signed grants in `namespaces`: SPKI DER (base64) of each signer and its
   * Biscuit root (`ed25519/<hex>`), distinct pairs. A token pasted into a query must verify under
   * one of them.
   */
  rootKeys(namespaces: readonly string[]): Promise<{ publicKey: string; biscuitRootKey: string }[]>;
  /**
   * The grant holding a token with this identifier, in `namespaces`, with the root keys that signed
   * it: a pasted token resolves to this grant only if one of these keys is the one that verified it.
   */
  grantOfToken(tokenId: string, namespaces: readonly string[]): Promise<TokenGrant | null>;
}

export interface TokenGrant {
  /** `capability:<run>:<step>:<n>` */
  readonly capabilityId: string;
  /** SPKI DER (base64) of the root that signed the grant's VC. */
  readonly publicKey: string;
  /** `ed25519/<hex>`: the root of the grant's Biscuit. */
  readonly biscuitRootKey: string;
}

export function capabilityGrantRepository(pool: pg.Pool): CapabilityGrantRepository {
  return {
    async rootKeys(namespaces) {
      if (namespaces.length === 0) return [];
      const { rows } = await pool.query<{ public_key: string; biscuit_root_key: string }>({
        name: 'capability_grants_root_keys',
        text: `SELECT DISTINCT public_key, biscuit_root_key FROM capability_grants
               WHERE namespace = ANY($1::text[])`,
        values: [[...namespaces]],
      });
      return rows.map((r) => ({ publicKey: r.public_key, biscuitRootKey: r.biscuit_root_key }));
    },

    async grantOfToken(tokenId, namespaces) {
      if (namespaces.length === 0) return null;
      // Token ids are per capability record (VC: the record's vault id; Biscuit: its signature), so
      // at most one grant holds one; LIMIT 1 only bounds the read.
      const { rows } = await pool.query<{
        capability_id: string;
        public_key: string;
        biscuit_root_key: string;
      }>({
        name: 'capability_grants_grant_by_token',
        text: `SELECT capability_id, public_key, biscuit_root_key FROM capability_grants
               WHERE token_ids @> ARRAY[$1::text] AND namespace = ANY($2::text[]) LIMIT 1`,
        values: [tokenId, [...namespaces]],
      });
      const row = rows[0];
      if (row === undefined) return null;
      return {
        capabilityId: row.capability_id,
        publicKey: row.public_key,
        biscuitRootKey: row.biscuit_root_key,
      };
    },
  };
}
