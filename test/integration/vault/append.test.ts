import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { GENESIS_DIGEST, isUuidV7, VaultError } from '../../../src/vault/index.ts';
import { attestation, digestOf, setupVault, type TestVault } from './helpers.ts';

/**
 * What a read returns for a record `append` returned: reads add `stapled` (whether an AIBOM's
 * manifest staples it, src/vault/stapled.ts); no run here has an AIBOM, so it is false.
 */
const read = <T extends object>(stored: T): T & { stapled: boolean } => ({ ...stored, stapled: false });

describe('vault append', () => {
  let t: TestVault;
  beforeAll(async () => {
    t = await setupVault('append');
  });
  afterAll(async () => {
    await t.close();
  });

  it('stores a batch with ids, seq, chain links and one created_at, and reads it back', async () => {
    const input = [
      attestation({ stepId: null }),
      attestation(),
      attestation({ artifactDigests: [`sha256:${'a'.repeat(64)}`] }),
    ];
    const stored = await t.vault.attestations.append(input);
    expect(stored.map((s) => s.seq)).toEqual([1, 2, 3]);
    expect(stored[0]!.prevDigest).toBe(GENESIS_DIGEST);
    expect(stored[1]!.prevDigest).toBe(input[0]!.digest);
    expect(stored[2]!.prevDigest).toBe(input[1]!.digest);
    expect(stored.every((s) => isUuidV7(s.id))).toBe(true);
    expect(stored[0]!.id < stored[1]!.id && stored[1]!.id < stored[2]!.id).toBe(true);
    expect(new Set(stored.map((s) => s.createdAt.getTime())).size).toBe(1);

    for (const [i, s] of stored.entries()) {
      const got = await t.vault.attestations.get(s.id);
      expect(got).toEqual(read(s));
      expect(got?.envelope).toEqual(input[i]!.envelope);
      expect(digestOf(got!.envelope)).toBe(got!.digest);
    }
    expect(await t.vault.attestations.get(stored[0]!.id.toUpperCase())).toEqual(read(stored[0]!));
  });

  it('get hides rows outside the caller namespaces and ignores malformed ids', async () => {
    const [s] = await t.vault.attestations.append([attestation({ namespace: 'team-b' })]);
    expect(await t.vault.attestations.get(s!.id, { namespaces: ['team-b'] })).toEqual(read(s!));
    expect(await t.vault.attestations.get(s!.id, { namespaces: ['team-a'] })).toBeNull();
    expect(await t.vault.attestations.get(s!.id, { namespaces: [] })).toBeNull();
    expect(await t.vault.attestations.get('not-a-uuid')).toBeNull();
    expect(await t.vault.attestations.get('0190b6a4-0000-7000-8000-000000000000')).toBeNull();
  });

  it('is idempotent per envelope digest, across calls and within a batch', async () => {
    const a = attestation();
    const b = attestation();
    const [first] = await t.vault.attestations.append([a]);
    const again = await t.vault.attestations.append([a, b, b]);
    expect(again[0]).toEqual(first);
    expect(again[1]).toEqual(again[2]);
    expect(again[1]!.seq).toBe(first!.seq + 1);
    expect(again[1]!.prevDigest).toBe(a.digest);
    const { rows } = await t.admin.query<{ n: string }>(
      'SELECT count(*) AS n FROM attestations WHERE digest = $1',
      [a.digest],
    );
    expect(rows[0]!.n).toBe('1');
  });

  it('commits records, their claim, SCITT jobs and artifact record in one transaction, or none of them', async () => {
    const runId = randomUUID();
    const first = attestation({ runId });
    const artifactOf = (id: string) => ({
      runId: id,
      kind: 'aibom',
      namespace: 'team-a',
      objectKey: `runs/team-a/${id}/aibom.json`,
      digest: `sha256:${'a'.repeat(64)}`,
      metadata: { kind: 'aibom' },
    });
    let seen: string[] = [];
    const [kept] = await t.vault.claims.append(`aibom:${runId}`, [first], {
      enqueueTransparency: true,
      artifact: (inserted) => {
        seen = inserted.map((s) => s.id);
        return artifactOf(runId);
      },
    });
    expect(seen).toEqual([kept!.id]);
    expect(await t.vault.claims.get(`aibom:${runId}`)).toEqual([kept!.id]);
    expect((await t.vault.transparencyJobs.get({ attestationId: kept!.id }))?.state).toBe('queued');
    expect((await t.vault.artifacts.get(runId, 'aibom'))?.objectKey).toBe(artifactOf(runId).objectKey);

    // The same key again: the claim conflicts after the rows, the job and the artifact were
    // written, and the whole transaction rolls back.
    const before = await t.admin.query<{ last_seq: string }>('SELECT last_seq FROM vault_head');
    const other = randomUUID();
    const doomed = attestation({ runId: other });
    const err = await t.vault.claims
      .append(`aibom:${runId}`, [doomed], { enqueueTransparency: true, artifact: () => artifactOf(other) })
      .catch((e: unknown) => e);
    expect(err).toBeInstanceOf(VaultError);
    expect((err as VaultError).code).toBe('CLAIM_TAKEN');
    const after = await t.admin.query<{ last_seq: string }>('SELECT last_seq FROM vault_head');
    expect(after.rows[0]!.last_seq).toBe(before.rows[0]!.last_seq);
    const gone = await t.admin.query('SELECT 1 FROM attestations WHERE digest = $1', [doomed.digest]);
    expect(gone.rowCount).toBe(0);
    expect(await t.vault.artifacts.get(other, 'aibom')).toBeNull();
    const jobs = await t.admin.query(
      'SELECT 1 FROM transparency_jobs j JOIN attestations a ON a.id = j.attestation_id WHERE a.run_id = $1',
      [other],
    );
    expect(jobs.rowCount).toBe(0);
  });

  it('stores strings that need COPY and array escaping exactly', async () => {
    const tricky =
      'tab\there, newline\nthere, cr\r, backslash \\ and "quotes", {braces}, comma, NULL, \\N, ünïcødé 🚀';
    const input = attestation({
      namespace: 'team-a',
      stepId: tricky,
      subjects: [tricky, 'NULL', '', 'plain'].filter((s) => s !== ''),
      capabilityTokenIds: ['tok,1', 'tok"2', 'tok\\3'],
      policyPack: `pack ${tricky}`,
      policyVersion: '1.0.0',
    });
    const [s] = await t.vault.attestations.append([input]);
    const got = await t.vault.attestations.get(s!.id);
    expect(got).toEqual(read(s!));
    expect(got!.stepId).toBe(tricky);
    expect(got!.subjects).toEqual([tricky, 'NULL', 'plain']);
    expect(got!.capabilityTokenIds).toEqual(['tok,1', 'tok"2', 'tok\\3']);
    expect(got!.policyPack).toBe(`pack ${tricky}`);
  });

  it('rejects malformed records before touching the database', async () => {
    const good = attestation();
    const cases = [
      { ...good, digest: 'sha256:XYZ' },
      { ...good, namespace: '' },
      { ...good, subjects: [] },
      { ...good, kind: 'nope' as 'run' },
      { ...good, runId: null, stepId: 'x' },
      { ...good, policyVersion: '1' },
      { ...good, envelope: { payload: 'x' } as unknown as typeof good.envelope },
    ];
    for (const bad of cases) {
      const err = await t.vault.attestations.append([good, bad]).catch((e: unknown) => e);
      expect(err).toBeInstanceOf(VaultError);
      expect((err as VaultError).code).toBe('INVALID_INPUT');
    }
    const { rows } = await t.admin.query('SELECT 1 FROM attestations WHERE digest = $1', [good.digest]);
    expect(rows).toHaveLength(0);
  });

  it('rolls the whole batch back when the database rejects one row', async () => {
    const before = await t.admin.query<{ last_seq: string }>('SELECT last_seq FROM vault_head');
    const good = attestation();
    const bad = attestation({ stepId: 'nul\u0000byte' });
    await expect(t.vault.attestations.append([good, bad])).rejects.toMatchObject({
      code: expect.stringMatching(/^22/) as unknown,
    });
    const after = await t.admin.query<{ last_seq: string }>('SELECT last_seq FROM vault_head');
    expect(after.rows[0]!.last_seq).toBe(before.rows[0]!.last_seq);
    // The pool still works after the failed COPY.
    const [s] = await t.vault.attestations.append([good]);
    expect(s!.seq).toBe(Number(before.rows[0]!.last_seq) + 1);
  });

  it('keeps created_at non-decreasing and ids increasing across batches', async () => {
    const { rows } = await t.admin.query<{ ok: boolean }>(`
      SELECT bool_and(id > prev_id AND created_at >= prev_at) AS ok FROM (
        SELECT id, created_at, lag(id) OVER w AS prev_id, lag(created_at) OVER w AS prev_at
        FROM attestations WINDOW w AS (ORDER BY seq)) x WHERE prev_id IS NOT NULL`);
    expect(rows[0]!.ok).toBe(true);
    const chain = await t.vault.attestations.verifyChain({ digestOf });
    expect(chain.ok).toBe(true);
  });
});
