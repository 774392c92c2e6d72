/**
 * A connection lost in the middle of a transaction (a failover, a terminated backend): the call
 * fails as the vault being unavailable, the transaction leaves nothing behind, the process lives
 * (a pooled connection that dies between two statements emits `error` with no query waiting: an
 * unheard one would end it), the pool serves the next call, and the retry the controller makes
 * (appendOnce, the claim per logical key) stores the batch exactly once: also when the first attempt
 * did commit and only its answer was lost.
 */
import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { appendOnce } from '../../../src/recorder/once.ts';
import { isVaultUnavailable } from '../../../src/vault/index.ts';
import { attestation, digestOf, setupVault, type TestVault } from './helpers.ts';

let t: TestVault;
beforeAll(async () => {
  t = await setupVault('connloss');
});
afterAll(async () => {
  await t.close();
});

/** Terminates every session of the runtime login (as the superuser): the server side of a lost connection. */
async function terminateRuntimeSessions(): Promise<number> {
  const { rows } = await t.admin.query<{ n: string }>(
    `SELECT count(pg_terminate_backend(pid)) AS n FROM pg_stat_activity
     WHERE usename = 'vault_app' AND pid <> pg_backend_pid()`,
  );
  return Number(rows[0]!.n);
}

describe('a connection lost inside an append transaction', () => {
  it('fails the append as unavailable, stores nothing, keeps the process, and the retry stores once', async () => {
    const runId = randomUUID();
    const key = `step:${runId}:train`;
    const records = [attestation({ runId })];
    let terminated = 0;
    const failed = await t.vault.claims
      .append(key, records, {
        // Runs inside the transaction, after the COPY and before COMMIT.
        grants: async () => {
          terminated = await terminateRuntimeSessions();
          // Let the dead socket's `error` event arrive while no statement is waiting.
          await new Promise((r) => setTimeout(r, 300));
          return [];
        },
      })
      .then(
        () => undefined,
        (err: unknown) => err,
      );
    expect(terminated).toBeGreaterThan(0);
    expect(failed).toBeDefined();
    expect(isVaultUnavailable(failed), String(failed)).toBe(true);
    // Nothing half-written: no record, no claim.
    expect(await t.vault.claims.get(key)).toBeNull();
    const { rows } = await t.admin.query('SELECT id FROM attestations WHERE run_id = $1', [runId]);
    expect(rows).toHaveLength(0);

    // The pool serves the next call; the controller's retry stores the batch once.
    const first = await appendOnce(t.vault.claims, key, records);
    expect(first.created).toBe(true);
    const again = await appendOnce(t.vault.claims, key, [attestation({ runId })]);
    expect(again).toEqual({ ids: first.ids, created: false });
    const stored = await t.admin.query('SELECT id FROM attestations WHERE run_id = $1', [runId]);
    expect(stored.rows).toHaveLength(1);
    expect((await t.vault.attestations.verifyChain({ digestOf })).ok).toBe(true);
  });

  it('a commit whose answer was lost: the retry finds the claim and adds nothing', async () => {
    const runId = randomUUID();
    const key = `run:${runId}`;
    // The first attempt committed; the caller never heard (its connection died right after).
    const committed = await t.vault.claims.append(key, [attestation({ runId, stepId: null })]);
    await terminateRuntimeSessions();
    // The pool hears of its dead connections (idle ones are dropped, not handed out again).
    await new Promise((r) => setTimeout(r, 300));
    // The retry re-signs the statements (new envelopes, new digests), as the recorder does.
    const retry = await appendOnce(t.vault.claims, key, [attestation({ runId, stepId: null })]);
    expect(retry).toEqual({ ids: committed.map((c) => c.id), created: false });
    const { rows } = await t.admin.query('SELECT id FROM attestations WHERE run_id = $1', [runId]);
    expect(rows).toHaveLength(1);
  });
});
