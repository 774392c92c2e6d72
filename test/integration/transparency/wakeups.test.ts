/**
 * Cross-process wake-ups through PostgreSQL LISTEN/NOTIFY: two vaults on one database stand for two
 * replicas (separate pools, separate LISTEN connections). A job enqueued by one wakes the worker of
 * the other at once, although that worker's idle poll is ten minutes (so the poll cannot be what
 * published it); nothing is announced for a transaction that rolls back; and after the LISTEN
 * connection is killed the listener reconnects and re-scans, so a job enqueued meanwhile is
 * published too.
 */
import { randomUUID } from 'node:crypto';
import { pino } from 'pino';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { KeySigner } from '../../../src/signing/index.ts';
import { setupTransparency } from '../../../src/transparency/setup.ts';
import { createWorker } from '../../../src/transparency/worker.ts';
import { connectVault, TRANSPARENCY_CHANNEL, type Vault } from '../../../src/vault/index.ts';
import { waitFor } from '../../helpers/wait.ts';
import { logSigner, statementSigner } from '../../unit/transparency/fixtures.ts';
import { record, setupDb, type TestDb } from './helpers.ts';

const TEN_MINUTES = 600_000;

describe('LISTEN/NOTIFY between replicas', () => {
  let db: TestDb;
  let writer: Vault; // replica A: appends (as the controller's recorder does)
  let reader: Vault; // replica B: listens, runs a worker
  let signer: KeySigner;

  beforeAll(async () => {
    db = await setupDb('wakeups');
    writer = await connectVault(db.url, { max: 2, applicationName: 'replica-a' });
    reader = await connectVault(db.url, { max: 2, applicationName: 'replica-b' });
    signer = await statementSigner();
  });
  afterAll(async () => {
    await writer?.close();
    await reader?.close();
    await db?.close();
  });

  const runRecord = (runId: string) => ({ ...record(signer), runId });

  it('announces an enqueue to another process on commit, with the run id, and nothing for a rollback', async () => {
    const heard: string[] = [];
    let resyncs = 0;
    const unsubscribe = await reader.listener.subscribe(TRANSPARENCY_CHANNEL, {
      onNotify: (p) => heard.push(p),
      resync: () => resyncs++,
    });
    try {
      expect(resyncs).toBe(1);
      expect(reader.listener.connected()).toBe(true);
      const runId = randomUUID();
      await writer.claims.append(`test:${runId}`, [runRecord(runId)], { enqueueTransparency: true });
      await waitFor('the notification', () => Promise.resolve(heard.includes(runId) ? true : undefined));
      // The same key again: the claim conflicts after the insert and the job, so all roll back.
      const other = randomUUID();
      await expect(
        writer.claims.append(`test:${runId}`, [runRecord(other)], { enqueueTransparency: true }),
      ).rejects.toMatchObject({ code: 'CLAIM_TAKEN' });
      // A later commit is heard; the rolled-back one never is.
      const later = randomUUID();
      await writer.attestations.append([runRecord(later)], { enqueueTransparency: true });
      await waitFor('the later notification', () =>
        Promise.resolve(heard.includes(later) ? true : undefined),
      );
      expect(heard).not.toContain(other);
    } finally {
      unsubscribe();
    }
  });

  it("wakes another replica's worker at once: its ten-minute idle poll never fires", async () => {
    const transparency = setupTransparency({
      vault: reader,
      signer,
      caCertificates: signer.caCertificates,
      logSigner: logSigner(),
      issuer: 'https://scitt.wakeups.invalid',
      backend: 'local',
      logger: pino({ level: 'silent' }),
    });
    const stop = new AbortController();
    const worker = createWorker({
      jobs: reader.transparencyJobs,
      listener: reader.listener,
      publisher: transparency.publisher,
      idleMs: TEN_MINUTES,
    });
    const running = worker.run(stop.signal);
    try {
      // Let the worker find nothing due and go to sleep.
      await waitFor('the worker idle', async () =>
        (await reader.transparencyJobs.nextDueInMs()) === null ? true : undefined,
      );
      const [stored] = await writer.attestations.append([record(signer)], { enqueueTransparency: true });
      const published = await waitFor('published by the other replica', async () => {
        const job = await writer.transparencyJobs.get({ attestationId: stored!.id });
        return job?.state === 'published' ? job : undefined;
      });
      expect(published.backend).toBe('local');

      // The LISTEN connection dies (a restart, a proxy timeout): the listener reconnects and
      // re-scans, so a job enqueued while it was gone is published as well.
      let resyncs = 0;
      const unsubscribe = await reader.listener.subscribe(TRANSPARENCY_CHANNEL, {
        onNotify: () => undefined,
        resync: () => resyncs++,
      });
      await db.admin.query(
        `SELECT pg_terminate_backend(pid) FROM pg_stat_activity
          WHERE application_name = 'replica-b' AND query LIKE 'LISTEN%'`,
      );
      const [missed] = await writer.attestations.append([record(signer)], { enqueueTransparency: true });
      await waitFor('the job enqueued while B was not listening', async () => {
        const job = await writer.transparencyJobs.get({ attestationId: missed!.id });
        return job?.state === 'published' ? job : undefined;
      });
      await waitFor('the listener re-scanned after reconnecting', () =>
        Promise.resolve(resyncs >= 2 ? true : undefined),
      );
      unsubscribe();
      const { rows } = await db.admin.query<{ n: number }>(
        `SELECT count(*)::int AS n FROM pg_stat_activity WHERE application_name = 'replica-b' AND query LIKE 'LISTEN%'`,
      );
      expect(rows[0]!.n).toBe(1);
    } finally {
      stop.abort();
      await running;
    }
  });
});
