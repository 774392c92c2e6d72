import { randomBytes } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { KeySigner } from '../../../src/signing/index.ts';
import { claim, fail, transparencyView, type RetryPolicy } from '../../../src/transparency/jobs.ts';
import { connectVault } from '../../../src/vault/index.ts';
import { statementSigner } from '../../unit/transparency/fixtures.ts';
import { record, setupDb, sqlstate, type TestDb } from './helpers.ts';

const POLICY: RetryPolicy = {
  baseDelayMs: 1_000,
  maxDelayMs: 60_000,
  maxRetryAfterMs: 3_600_000,
  leaseMs: 60_000,
};

const publication = () => ({
  backend: 'local' as const,
  entryId: randomBytes(32).toString('hex'),
  logIndex: 0,
  receipt: randomBytes(64),
});

describe('transparency job queue', () => {
  let db: TestDb;
  let signer: KeySigner;

  /** Stores attestations and enqueues their jobs in the same transaction, as the service does. */
  const store = async (n: number): Promise<string[]> => {
    const stored = await db.vault.attestations.append(
      Array.from({ length: n }, () => record(signer)),
      { enqueueTransparency: true },
    );
    return stored.map((s) => s.id);
  };

  /** Lets time pass for one job (lease or backoff ends), without sleeping. */
  const makeDue = async (jobId: string): Promise<void> => {
    await db.admin.query(
      `UPDATE transparency_jobs SET next_attempt_at = now() - interval '1 second' WHERE id = $1`,
      [jobId],
    );
  };

  beforeAll(async () => {
    db = await setupDb('jobs');
    signer = await statementSigner();
  });
  afterAll(async () => {
    await db.close();
  });

  it('enqueues in the vault append transaction: both commit or neither', async () => {
    const ids = await store(3);
    const jobs = await db.vault.transparencyJobs.getByAttestation(ids);
    expect([...jobs.keys()].sort()).toEqual([...ids].sort());
    for (const job of jobs.values())
      expect(job).toMatchObject({ state: 'queued', attempts: 0, receipt: null });
    // Enqueueing again is a no-op that returns the existing jobs.
    const again = await db.vault.transparencyJobs.enqueue(ids);
    expect(again.map((j) => j.id).sort()).toEqual([...jobs.values()].map((j) => j.id).sort());

    // A transaction that fails after the insert (here: its claim is taken) leaves neither.
    await db.vault.claims.append('test:taken', [record(signer)], { enqueueTransparency: true });
    const before = await db.vault.transparencyJobs.stats();
    const failing = record(signer);
    await expect(
      db.vault.claims.append('test:taken', [failing], { enqueueTransparency: true }),
    ).rejects.toMatchObject({ code: 'CLAIM_TAKEN' });
    expect(await db.vault.transparencyJobs.stats()).toEqual(before);
    const { rows } = await db.admin.query('SELECT count(*)::int AS n FROM attestations WHERE digest = $1', [
      failing.digest,
    ]);
    expect(rows[0]).toEqual({ n: 0 });
    await expect(
      db.vault.transparencyJobs.enqueue(['01890000-0000-7000-8000-000000000000']),
    ).rejects.toMatchObject({
      code: '23503',
    });
  });

  it('gives each job to exactly one of 4 concurrent workers (SKIP LOCKED)', async () => {
    // Earlier tests' queued jobs are set aside (due tomorrow): only this test's 80 are claimable.
    await db.admin.query(
      `UPDATE transparency_jobs SET next_attempt_at = now() + interval '1 day' WHERE state = 'queued'`,
    );
    const ids = await store(80);
    const processed = new Map<string, string[]>();
    const workers = await Promise.all(
      Array.from({ length: 4 }, async (_, w) => ({
        name: `w${w}`,
        vault: await connectVault(db.url, { max: 2 }),
      })),
    );
    // Each worker holds its first batch until all four have one: they really overlap.
    let arrived = 0;
    let release!: () => void;
    const barrier = new Promise<void>((resolve) => (release = resolve));
    try {
      await Promise.all(
        workers.map(async ({ name, vault }) => {
          const jobs = vault.transparencyJobs;
          for (let round = 0; ; round++) {
            const batch = await claim(jobs, 3, { policy: POLICY });
            if (round === 0) {
              expect(batch).toHaveLength(3);
              if (++arrived === workers.length) release();
              await barrier;
            }
            if (batch.length === 0) return;
            for (const job of batch) {
              processed.set(job.attestationId, [...(processed.get(job.attestationId) ?? []), name]);
              await jobs.setStatement(job, randomBytes(100));
              expect(await jobs.complete(job, publication())).toMatchObject({ state: 'published' });
            }
          }
        }),
      );
    } finally {
      await Promise.all(workers.map((w) => w.vault.close()));
    }
    for (const id of ids) expect(processed.get(id), id).toHaveLength(1);
    expect(new Set([...processed.values()].flat()).size).toBe(4);
    const jobs = await db.vault.transparencyJobs.getByAttestation(ids);
    for (const job of jobs.values())
      expect(job).toMatchObject({ state: 'published', attempts: 1, leaseToken: null });
  });

  it('hands a job whose lease expired to another worker; the first one can no longer touch it', async () => {
    const [id] = await store(1);
    const jobId = (await db.vault.transparencyJobs.get({ attestationId: id! }))!.id;
    const [a] = await claim(db.vault.transparencyJobs, 10, { policy: POLICY, jobIds: [jobId] });
    expect(a).toMatchObject({ attempts: 1 });
    // While A holds the lease nobody else gets the job.
    expect(await claim(db.vault.transparencyJobs, 10, { policy: POLICY, jobIds: [jobId] })).toEqual([]);
    const fixed = (await db.vault.transparencyJobs.setStatement(a!, Buffer.from('statement of A')))!;
    expect(fixed.toString()).toBe('statement of A');

    await makeDue(jobId); // A's lease runs out (A died, or hangs)
    const [b] = await claim(db.vault.transparencyJobs, 10, { policy: POLICY, jobIds: [jobId] });
    expect(b).toMatchObject({ attempts: 2 });
    expect(b!.leaseToken).not.toBe(a!.leaseToken);
    // B resubmits A's statement: the statement is fixed once chosen.
    expect(b!.statement?.equals(fixed)).toBe(true);
    expect((await db.vault.transparencyJobs.setStatement(b!, Buffer.from('another')))?.equals(fixed)).toBe(
      true,
    );

    expect(await db.vault.transparencyJobs.complete(a!, publication())).toBeNull();
    expect(await fail(db.vault.transparencyJobs, a!, 'late', { policy: POLICY })).toBeNull();
    // Lease lost: nothing is stored and the holder is told (null).
    expect(
      await db.vault.transparencyJobs.setStatement({ ...a!, statement: null }, Buffer.from('x')),
    ).toBeNull();
    expect(await db.vault.transparencyJobs.complete(b!, publication())).toMatchObject({
      state: 'published',
      attempts: 2,
    });
  });

  it('backs off, honours Retry-After, and keeps a job that keeps failing queued with its error and next attempt', async () => {
    const [id] = await store(1);
    const jobId = (await db.vault.transparencyJobs.get({ attestationId: id! }))!.id;
    const gap = async (): Promise<number> => {
      const { rows } = await db.admin.query<{ ms: number }>(
        'SELECT (extract(epoch FROM next_attempt_at - updated_at) * 1000)::float8 AS ms FROM transparency_jobs WHERE id = $1',
        [jobId],
      );
      return rows[0]!.ms;
    };

    let [job] = await claim(db.vault.transparencyJobs, 1, { policy: POLICY, jobIds: [jobId] });
    expect(
      await fail(db.vault.transparencyJobs, job!, 'REMOTE_UNAVAILABLE: 503', {
        policy: POLICY,
        random: () => 1,
      }),
    ).toMatchObject({
      state: 'queued',
      attempts: 1,
      lastError: 'REMOTE_UNAVAILABLE: 503',
      leaseToken: null,
    });
    expect(await gap()).toBe(1_000); // base · 2^0, full jitter share
    expect(await claim(db.vault.transparencyJobs, 1, { policy: POLICY, jobIds: [jobId] })).toEqual([]); // not due yet

    await makeDue(jobId);
    [job] = await claim(db.vault.transparencyJobs, 1, { policy: POLICY, jobIds: [jobId] });
    await fail(db.vault.transparencyJobs, job!, 'REMOTE_UNAVAILABLE: 429', {
      policy: POLICY,
      retryAfterMs: 42_000,
    });
    expect(await gap()).toBe(42_000);

    await makeDue(jobId);
    [job] = await claim(db.vault.transparencyJobs, 1, { policy: POLICY, jobIds: [jobId] });
    expect(job).toMatchObject({ attempts: 3 });
    // A permanent refusal: still queued, due again after the cap of the backoff (never given up).
    const refused = await fail(db.vault.transparencyJobs, job!, 'REMOTE_REJECTED: 400', {
      policy: POLICY,
      permanent: true,
    });
    expect(refused).toMatchObject({ state: 'queued', attempts: 3, lastError: 'REMOTE_REJECTED: 400' });
    expect(await gap()).toBe(POLICY.maxDelayMs);
    expect(transparencyView(refused!)).toEqual({
      job_id: jobId,
      status: 'queued',
      attempts: 3,
      last_error: 'REMOTE_REJECTED: 400',
      next_attempt_at: refused!.nextAttemptAt.toISOString(),
    });
    // Long past any former attempt cap, the job is still claimed when due.
    for (let i = 4; i <= 12; i++) {
      await makeDue(jobId);
      [job] = await claim(db.vault.transparencyJobs, 1, { policy: POLICY, jobIds: [jobId] });
      expect(job).toMatchObject({ attempts: i, state: 'queued' });
      await fail(db.vault.transparencyJobs, job!, 'REMOTE_UNAVAILABLE: still down', { policy: POLICY });
    }
    // A push takes it at once, whatever backoff it waits out.
    [job] = await claim(db.vault.transparencyJobs, 1, { policy: POLICY, jobIds: [jobId], skipBackoff: true });
    expect(job).toMatchObject({ attempts: 13 });
    await db.vault.transparencyJobs.setStatement(job!, Buffer.from('s'));
    expect(await db.vault.transparencyJobs.complete(job!, publication())).toMatchObject({
      state: 'published',
      lastError: null,
    });
  });

  it('claims a job again once the lease of a worker that died ends, however many attempts it had', async () => {
    const [id] = await store(1);
    const jobId = (await db.vault.transparencyJobs.get({ attestationId: id! }))!.id;
    for (let i = 0; i < 12; i++) {
      await makeDue(jobId);
      expect(await claim(db.vault.transparencyJobs, 1, { policy: POLICY, jobIds: [jobId] })).toHaveLength(1);
    }
    expect(await db.vault.transparencyJobs.get({ id: jobId })).toMatchObject({
      state: 'queued',
      attempts: 12,
    });
  });

  it('refuses a third state in the table itself', async () => {
    const [id] = await store(1);
    const jobId = (await db.vault.transparencyJobs.get({ attestationId: id! }))!.id;
    expect(
      await sqlstate(db.admin.query("UPDATE transparency_jobs SET state = 'failed' WHERE id = $1", [jobId])),
    ).toBe('23514');
  });

  it('keeps published jobs immutable and undeletable; queued jobs are never deleted by the runtime role', async () => {
    const [id] = await store(1);
    const jobId = (await db.vault.transparencyJobs.get({ attestationId: id! }))!.id;
    const [job] = await claim(db.vault.transparencyJobs, 1, { policy: POLICY, jobIds: [jobId] });
    await db.vault.transparencyJobs.setStatement(job!, Buffer.from('s'));
    const published = await db.vault.transparencyJobs.complete(job!, publication());
    const view = transparencyView(published!);
    expect(view).toMatchObject({
      job_id: jobId,
      status: 'published',
      backend: 'local',
      mode: 'dry_run',
      attempts: 1,
    });
    expect(Buffer.from(view.receipt!, 'base64').equals(published!.receipt!)).toBe(true);

    for (const sql of [
      `UPDATE transparency_jobs SET receipt = '\\x00' WHERE id = $1`,
      `UPDATE transparency_jobs SET state = 'queued' WHERE id = $1`,
      `DELETE FROM transparency_jobs WHERE id = $1`,
    ]) {
      expect(await sqlstate(db.admin.query(sql, [jobId])), sql).toBe('23001');
    }
    expect(await sqlstate(db.admin.query('TRUNCATE transparency_jobs'))).toBe('23001');
    expect(await sqlstate(db.pool.query('DELETE FROM transparency_jobs WHERE id = $1', [jobId]))).toBe(
      '42501',
    );
    expect(
      await sqlstate(db.pool.query(`UPDATE transparency_jobs SET attestation_id = attestation_id`)),
    ).toBe('42501');
  });
});
