import type pg from 'pg';
import { append } from './append.ts';
import { appendOptions, type AttestationAppendOptions } from './attestations.ts';
import { insertArtifact, type NewArtifact } from './artifacts.ts';
import { VaultError } from './errors.ts';
import type { NewAttestation, NewCapabilityGrant, StoredAttestation } from './types.ts';

const UNIQUE_VIOLATION = '23505';

export interface ClaimedAppendOptions extends AttestationAppendOptions {
  /** An artifact record that commits with the records (built from the stored ones: ids are known then). */
  readonly artifact?: (inserted: readonly StoredAttestation[]) => NewArtifact;
  /**
   * Capability grants (chains and minted tokens) that commit with the records, built from the
   * stored ones (their ids and times are known then). Runs under the chain-head lock: keep it to
   * signing, no I/O. Throwing rolls the whole batch back.
   */
  readonly grants?: (inserted: readonly StoredAttestation[]) => Promise<readonly NewCapabilityGrant[]>;
}

async function insertGrants(client: pg.PoolClient, grants: readonly NewCapabilityGrant[]): Promise<void> {
  if (grants.length === 0) return;
  await client.query({
    name: 'capability_grants_insert',
    text: `INSERT INTO capability_grants (capability_attestation_id, step_attestation_id, namespace,
             capability_id, chain, tokens, token_ids, public_key, biscuit_root_key)
           SELECT * FROM jsonb_to_recordset($1::jsonb) AS g(capability_attestation_id uuid,
             step_attestation_id uuid, namespace text, capability_id text, chain jsonb, tokens jsonb,
             token_ids text[], public_key text, biscuit_root_key text)`,
    values: [
      JSON.stringify(
        grants.map((g) => ({
          capability_attestation_id: g.capabilityAttestationId,
          step_attestation_id: g.stepAttestationId,
          namespace: g.namespace,
          capability_id: g.capabilityId,
          chain: g.chain,
          tokens: g.tokens,
          token_ids: g.tokens.map((t) => t.id),
          public_key: g.publicKey,
          biscuit_root_key: g.biscuitRootKey,
        })),
      ),
    ],
  });
}

/**
 * `attestation_claims`: which records stand for a logical key (`step:<run>:<step>`, `run:<run>`,
 * `aibom:<run>`). The claim row is written in the same transaction as the records, under the
 * chain-head lock, so of two racing writers exactly one commits. Recording once per key on top of
 * this is src/recorder/once.ts.
 */
export interface ClaimRepository {
  /** The ids claimed for `key`, or null. */
  get(key: string): Promise<string[] | null>;
  /** The claimed ids of each key that has a claim. */
  getMany(keys: readonly string[]): Promise<Map<string, string[]>>;
  /**
   * Appends `records` and claims `key` for them in one transaction (with their SCITT jobs and the
   * artifact record when asked). Throws VaultError CLAIM_TAKEN, and stores nothing, when `key` is
   * claimed already.
   */
  append(
    key: string,
    records: readonly NewAttestation[],
    options?: ClaimedAppendOptions,
  ): Promise<StoredAttestation[]>;
}

export function claimRepository(pool: pg.Pool): ClaimRepository {
  return {
    async get(key) {
      const { rows } = await pool.query<{ attestation_ids: string[] }>({
        name: 'claims_get',
        text: 'SELECT attestation_ids FROM attestation_claims WHERE key = $1',
        values: [key],
      });
      return rows[0]?.attestation_ids ?? null;
    },

    async getMany(keys) {
      if (keys.length === 0) return new Map();
      const { rows } = await pool.query<{ key: string; attestation_ids: string[] }>({
        name: 'claims_get_many',
        text: 'SELECT key, attestation_ids FROM attestation_claims WHERE key = ANY($1::text[])',
        values: [[...keys]],
      });
      return new Map(rows.map((r) => [r.key, r.attestation_ids]));
    },

    async append(key, records, options = {}) {
      try {
        return await append(
          pool,
          records,
          appendOptions(options, async (client, inserted) => {
            await client.query({
              name: 'claims_insert',
              text: 'INSERT INTO attestation_claims (key, attestation_ids) VALUES ($1, $2::uuid[])',
              values: [key, inserted.map((s) => s.id)],
            });
            if (options.artifact !== undefined) await insertArtifact(client, options.artifact(inserted));
            if (options.grants !== undefined) await insertGrants(client, await options.grants(inserted));
          }),
        );
      } catch (err) {
        const e = err as { code?: string; constraint?: string };
        if (e.code === UNIQUE_VIOLATION && e.constraint === 'attestation_claims_pkey') {
          throw new VaultError('CLAIM_TAKEN', `${key} is already recorded`, { cause: err });
        }
        throw err;
      }
    },
  };
}
