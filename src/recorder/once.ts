import type { ClaimedAppendOptions, ClaimRepository, NewAttestation } from '../vault/index.ts';
import { VaultError } from '../vault/index.ts';

/**
 * Store: appends `records` unless the logical `key` was already claimed. The claim commits with the
 * records, under the chain-head lock, so of two racing writers exactly one stores its batch; the
 * other's rolls back and it gets the stored ids instead. Returns the ids that stand for `key` and
 * whether this call wrote them.
 */
export async function appendOnce(
  claims: ClaimRepository,
  key: string,
  records: readonly NewAttestation[],
  options: ClaimedAppendOptions = {},
): Promise<{ ids: string[]; created: boolean }> {
  const existing = await claims.get(key);
  if (existing) return { ids: existing, created: false };
  try {
    const stored = await claims.append(key, records, options);
    return { ids: stored.map((s) => s.id), created: true };
  } catch (err) {
    if (!(err instanceof VaultError && err.code === 'CLAIM_TAKEN')) throw err;
    const ids = await claims.get(key);
    if (!ids) throw err;
    return { ids, created: false };
  }
}
