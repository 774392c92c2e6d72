import type { PoolClient } from 'pg';
import type { NewAttestation, StoredAttestation } from './types.ts';
import type { Vault } from './index.ts';

const UNIQUE_VIOLATION = '23505';

/**
 * Appends `records` unless the logical `key` was already claimed. The claim row is written in the
 * same transaction as the attestations, under the chain-head lock, so of two racing writers exactly
 * one commits; the other's batch rolls back and it gets the stored ids instead. Returns the ids of
 * the records that stand for `key` and whether this call wrote them.
 */
export async function appendOnce(
  vault: Vault,
  key: string,
  records: readonly NewAttestation[],
  options: {
    /** More work that must commit with the records (e.g. enqueue transparency jobs). */
    onAppend?: (client: PoolClient, inserted: readonly StoredAttestation[]) => Promise<void>;
  } = {},
): Promise<{ ids: string[]; created: boolean; stored: StoredAttestation[] }> {
  const existing = await claimedIds(vault, key);
  if (existing) return { ids: existing, created: false, stored: [] };
  try {
    const stored = await vault.append(records, {
      inTransaction: async (client, inserted) => {
        await client.query({
          name: 'claims_insert',
          text: 'INSERT INTO attestation_claims (key, attestation_ids) VALUES ($1, $2::uuid[])',
          values: [key, inserted.map((s) => s.id)],
        });
        await options.onAppend?.(client, inserted);
      },
    });
    return { ids: stored.map((s) => s.id), created: true, stored };
  } catch (err) {
    if ((err as { code?: string }).code !== UNIQUE_VIOLATION) throw err;
    const ids = await claimedIds(vault, key);
    if (!ids) throw err;
    return { ids, created: false, stored: [] };
  }
}

export async function claimedIds(vault: Vault, key: string): Promise<string[] | null> {
  const { rows } = await vault.pool.query<{ attestation_ids: string[] }>({
    name: 'claims_get',
    text: 'SELECT attestation_ids FROM attestation_claims WHERE key = $1',
    values: [key],
  });
  return rows[0]?.attestation_ids ?? null;
}
