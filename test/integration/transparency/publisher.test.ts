import type { AddressInfo } from 'node:net';
import { setTimeout as sleep } from 'node:timers/promises';
import Fastify, { type FastifyInstance } from 'fastify';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { KeySigner } from '../../../src/signing/index.ts';
import { decodeSign1, verifySignedStatement } from '../../../src/transparency/statement.ts';
import { transparencyView, type RetryPolicy } from '../../../src/transparency/jobs.ts';
import { createLocalLog, type LocalLog } from '../../../src/transparency/local-log.ts';
import { createPublisher, type PublishBackend } from '../../../src/transparency/publisher.ts';
import { verifyReceipt } from '../../../src/transparency/receipt.ts';
import { createScrapiClient } from '../../../src/transparency/scrapi-client.ts';
import { installErrorHandling } from '../../../src/http/error-handler.ts';
import { registerScrapiRoutes } from '../../../src/http/routes/scrapi.ts';
import { createWorker } from '../../../src/transparency/worker.ts';
import { logSigner, statementSigner } from '../../unit/transparency/fixtures.ts';
import { record, setupDb, type TestDb } from './helpers.ts';

const POLICY: RetryPolicy = {
  baseDelayMs: 10,
  maxDelayMs: 100,
  maxRetryAfterMs: 1_000,
  leaseMs: 60_000,
};

describe('publisher and worker', () => {
  let a: TestDb; // this deployment
  let b: TestDb; // another deployment, whose log A publishes to over SCRAPI
  let signer: KeySigner;
  let localLog: LocalLog;
  let remoteLog: LocalLog;
  let remote: FastifyInstance;
  let remoteUrl: string;

  const storeAndEnqueue = async (n: number): Promise<string[]> =>
    (
      await a.vault.attestations.append(
        Array.from({ length: n }, () => record(signer)),
        { enqueueTransparency: true },
      )
    ).map((s) => s.id);

  const publisherWith = (backend: PublishBackend) =>
    createPublisher({
      jobs: a.vault.transparencyJobs,
      backend,
      signer,
      caCertificates: signer.caCertificates,
      loadAttestation: (id) => a.vault.attestations.get(id),
      payloadLocation: (id) => `https://vault.test.invalid/v1/attestations/${id}`,
      policy: POLICY,
    });

  const checkPublished = async (ids: readonly string[], backend: 'local' | 'scrapi', log: LocalLog) => {
    const jobs = await a.vault.transparencyJobs.getByAttestation(ids);
    expect(jobs.size).toBe(ids.length);
    for (const id of ids) {
      const job = jobs.get(id)!;
      expect(job).toMatchObject({ state: 'published', backend });
      const statement = verifySignedStatement(job.statement!, { trustAnchors: signer.caCertificates });
      expect(statement.subject).toBe(id);
      const stored = await a.vault.attestations.get(id);
      expect(`sha256:${statement.payload.toString('hex')}`).toBe(stored!.digest);
      expect(decodeSign1(job.statement!, 'MALFORMED_STATEMENT').protectedHeader.get(260)).toBe(
        `https://vault.test.invalid/v1/attestations/${id}`,
      );
      expect(
        verifyReceipt({ receipt: job.receipt!, statement: job.statement!, logKey: log.keys }),
      ).toMatchObject({
        ok: true,
        leafIndex: job.logIndex,
      });
      expect(transparencyView(job)).toMatchObject({
        status: 'published',
        backend,
        mode: backend === 'local' ? 'dry_run' : 'published',
        entry_id: job.entryId,
      });
    }
  };

  beforeAll(async () => {
    [a, b] = await Promise.all([setupDb('pub_a'), setupDb('pub_b')]);
    signer = await statementSigner();
    localLog = createLocalLog({
      storage: a.vault.scittLog,
      signer: logSigner(),
      issuer: 'https://a.scitt.test.invalid',
    });
    remoteLog = createLocalLog({
      storage: b.vault.scittLog,
      signer: logSigner(),
      issuer: 'https://b.scitt.test.invalid',
    });
    remote = Fastify({ logger: false });
    installErrorHandling(remote);
    await registerScrapiRoutes(remote, { log: remoteLog, trustAnchors: signer.caCertificates });
    await remote.listen({ port: 0, host: '127.0.0.1' });
    remoteUrl = `http://127.0.0.1:${(remote.server.address() as AddressInfo).port}`;
  });
  afterAll(async () => {
    await remote.close();
    await Promise.all([a.close(), b.close()]);
  });

  it('publishes every enqueued attestation to the local log (dry run)', async () => {
    const ids = await storeAndEnqueue(12);
    const worker = createWorker({
      jobs: a.vault.transparencyJobs,
      publisher: publisherWith({ kind: 'local', log: localLog }),
      batchSize: 5,
      policy: POLICY,
    });
    let claimed = 0;
    for (let n = await worker.drainOnce(); n > 0; n = await worker.drainOnce()) claimed += n;
    expect(claimed).toBe(12);
    await checkPublished(ids, 'local', localLog);
  });

  it('publishes to another deployment over SCRAPI', async () => {
    const ids = await storeAndEnqueue(4);
    const publisher = publisherWith({ kind: 'scrapi', client: createScrapiClient({ baseUrl: remoteUrl }) });
    const worker = createWorker({ jobs: a.vault.transparencyJobs, publisher, policy: POLICY });
    while ((await worker.drainOnce()) > 0);
    await checkPublished(ids, 'scrapi', remoteLog);
    expect((await remoteLog.treeHead()).size).toBe(4);
  });

  it('resubmits the same statement after a crash between submission and completion: one entry', async () => {
    const [id] = await storeAndEnqueue(1);
    let crashes = 1;
    const flaky: LocalLog = {
      ...localLog,
      append: async (s) => {
        const result = await localLog.append(s);
        if (crashes-- > 0) throw new Error('worker died after the log accepted the statement');
        return result;
      },
    };
    const publisher = publisherWith({ kind: 'local', log: flaky });
    const first = await publisher.publishNow(id!);
    expect(first).toMatchObject({ state: 'queued', attempts: 1, receipt: null });
    expect(first.lastError).toMatch(/worker died/);
    const sizeAfterCrash = (await localLog.treeHead()).size;

    const second = await publisher.publishNow(id!); // an explicit push skips the backoff
    expect(second).toMatchObject({ state: 'published', attempts: 2 });
    expect((await localLog.treeHead()).size).toBe(sizeAfterCrash);
    const entry = await localLog.getEntry(second.entryId!);
    expect(entry!.receipt.equals(second.receipt!)).toBe(true);
    expect(second.statement!.equals(first.statement!)).toBe(true);
    // Published is final: pushing again returns the same job untouched.
    expect(await publisher.publishNow(id!)).toMatchObject({ state: 'published', receipt: second.receipt });
  });

  it('keeps the job queued, visibly, with the cap of the backoff, when the vault record does not match its digest', async () => {
    const [id] = await storeAndEnqueue(1);
    const publisher = createPublisher({
      jobs: a.vault.transparencyJobs,
      backend: { kind: 'local', log: localLog },
      signer,
      caCertificates: signer.caCertificates,
      loadAttestation: async (attestationId) => {
        const stored = await a.vault.attestations.get(attestationId);
        return stored && { ...stored, digest: `sha256:${'1'.repeat(64)}` };
      },
      policy: POLICY,
    });
    const job = await publisher.publishNow(id!);
    expect(job).toMatchObject({ state: 'queued', attempts: 1, receipt: null });
    expect(job.lastError).toMatch(/^ATTESTATION_DIGEST_MISMATCH/);
    // Not a transient failure: the next attempt waits the cap of the backoff, not the base delay.
    expect(job.nextAttemptAt.getTime() - job.updatedAt.getTime()).toBe(POLICY.maxDelayMs);
    await expect(publisher.publishNow('01890000-0000-7000-8000-000000000000')).rejects.toMatchObject({
      code: 'ATTESTATION_NOT_FOUND',
    });
  });

  it('runs as a loop until stopped, woken by new work', async () => {
    const stop = new AbortController();
    const worker = createWorker({
      jobs: a.vault.transparencyJobs,
      publisher: publisherWith({ kind: 'local', log: localLog }),
      idleMs: 60_000,
      policy: POLICY,
    });
    const running = worker.run(stop.signal);
    const ids = await storeAndEnqueue(3);
    worker.wake();
    // Wait for the condition itself (bounded by the test timeout), not for an amount of time.
    for (;;) {
      const jobs = await a.vault.transparencyJobs.getByAttestation(ids);
      if ([...jobs.values()].every((j) => j.state === 'published')) break;
      await sleep(20);
      worker.wake();
    }
    stop.abort();
    await running;
    for (const id of ids)
      expect((await a.vault.transparencyJobs.get({ attestationId: id }))?.backend).toBe('local');
  });
});
