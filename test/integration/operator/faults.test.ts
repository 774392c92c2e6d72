import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import type { RunSpec } from '../../../src/crd/run.ts';
import { driveRun } from '../../../hack/sample-pipeline.ts';
import {
  aibomReady,
  conditionOf,
  createRun,
  expectArtifactVerifies,
  expectKubeMirrorsVault,
  expectOneAibomPerRun,
  manifestRefMismatches,
  metricValue,
  poll,
  randomBetween,
  sampleRunSpec,
  sleep,
  stackS3,
  startControllerProcess,
  startScratchMinio,
  startScratchPostgres,
  stopAllControllers,
  testEnv as operatorEnv,
  vaultFacts,
  waitForCondition,
  type LogLine,
  type ScratchMinio,
  type ScratchPostgres,
} from '../../helpers/controller-process.ts';
import { kubeConfig } from '../../helpers/stack.ts';

let spec: RunSpec;
let logDir: string;
const pipeline = () => kubeConfig('admin');

beforeAll(async () => {
  spec = await sampleRunSpec();
  logDir = await mkdtemp(join(tmpdir(), 'op-faults-logs-'));
});

afterEach(async () => {
  await stopAllControllers();
});

afterAll(async () => {
  await stopAllControllers();
  if (process.env.KEEP_LOGS) console.log(`controller logs kept in ${logDir}`);
  else if (logDir) await rm(logDir, { recursive: true, force: true });
});

const testEnv = (prefix: string, dbPrefix: string | null) => operatorEnv(prefix, dbPrefix, logDir);

const failedReconciles = (key: string) => (l: LogLine) =>
  l.msg === 'reconcile failed; requeued with backoff' && l.key === key;

describe('controller killed with SIGKILL at random moments', () => {
  it('every Run still gets exactly one AIBOM, every step one attestation, and the chain verifies', async () => {
    const { namespace, pki, lease, databaseUrl: url, opts: options } = await testEnv('op-kill', 'opkill');
    const opts = options();
    const names = Array.from({ length: 10 }, (_, i) => `kill-${i}`);
    const failStep = ['retrieve', 'summarise', 'post-comment'];
    await Promise.all(names.map((n) => createRun(namespace, n, spec)));
    const drive = (i: number) =>
      driveRun(pipeline(), namespace, names[i]!, {
        stepDelayMs: randomBetween(100, 600),
        // Runs 2, 5, 8 fail, at the first, second and third step.
        ...(i % 3 === 2 ? { fail: failStep[Math.floor(i / 3)]! } : {}),
      });

    // Four crash cycles. A new process leads (once the killed holder's Lease expired: the default
    // 15 s), two more Runs start moving, and the process is SIGKILLed at a random moment of its
    // term: in even cycles 300–900 ms after it started leading (reconciling steps of Runs being
    // driven), in odd ones 0–200 ms after its first "AIBOM recorded" line (the other Runs that
    // finished while nobody led are then mid-pipeline).
    const drives: Promise<unknown>[] = [];
    const schedule: string[] = [];
    for (let cycle = 0; cycle < 4; cycle++) {
      const proc = await startControllerProcess({ ...opts, name: `${lease}-${cycle}` });
      await proc.waitLeading({ timeoutMs: 90_000 });
      drives.push(drive(2 * cycle), drive(2 * cycle + 1));
      let when: string;
      if (cycle % 2 === 0) {
        const after = randomBetween(300, 900);
        await sleep(after);
        when = `${after} ms into its term`;
      } else {
        const seen = await proc
          .waitForLog((l) => l.msg === 'AIBOM recorded', 'a recorded AIBOM', { timeoutMs: 20_000 })
          .then(() => true)
          .catch(() => false);
        const after = randomBetween(0, 200);
        await sleep(after);
        when = seen ? `${after} ms after its first AIBOM` : 'without having recorded an AIBOM';
      }
      const exit = await proc.kill();
      expect(exit.signal).toBe('SIGKILL');
      const recorded = (await proc.logs()).filter((l) => l.msg === 'AIBOM recorded').length;
      schedule.push(`${proc.name} killed ${when} (${recorded} AIBOM(s) recorded in its term)`);
    }
    console.log(`[faults] ${schedule.join('; ')}`);

    // Then one controller that is left alone.
    const last = await startControllerProcess({ ...opts, name: `${lease}-last` });
    await last.waitLeading({ timeoutMs: 90_000 });
    drives.push(drive(8), drive(9));
    await Promise.all(drives);
    const runs = await Promise.all(
      names.map((n) => waitForCondition(namespace, n, 'AIBOMReady', aibomReady, 'AIBOMReady=True')),
    );
    for (const [i, run] of runs.entries()) {
      expect(run.status?.phase).toBe(i % 3 === 2 ? 'Failed' : 'Succeeded');
      expect(conditionOf(run, 'Attested')?.status).toBe('True');
    }
    await expectOneAibomPerRun(url, runs);
    await expectKubeMirrorsVault(url, runs);
    for (const run of runs) await expectArtifactVerifies(pki, run, stackS3());
    // The AIBOM attestation and the metadata record name the same C2PA sidecar, whatever was killed.
    expect(await manifestRefMismatches(url)).toEqual([]);
  }, 480_000);
});

describe('object store (MinIO) unavailable', () => {
  let minio: ScratchMinio | undefined;

  afterAll(async () => {
    await minio?.dispose();
  });

  it('reports it on the Run, retries with backoff, and records the AIBOM once after MinIO returns', async () => {
    minio = await startScratchMinio();
    const { namespace, pki, lease, databaseUrl: url, opts } = await testEnv('op-minio', 'opminio');
    const proc = await startControllerProcess({ ...opts(), name: lease, env: minio.env });
    await proc.waitLeading();

    // Baseline: with MinIO up the pipeline works against this (second) MinIO.
    await createRun(namespace, 'minio-ok', spec);
    await driveRun(pipeline(), namespace, 'minio-ok', { stepDelayMs: 50 });
    await waitForCondition(namespace, 'minio-ok', 'AIBOMReady', aibomReady, 'AIBOMReady=True with MinIO up');

    await minio.stop();
    await createRun(namespace, 'minio-down', spec);
    await driveRun(pipeline(), namespace, 'minio-down', { stepDelayMs: 50 });
    const failed = await waitForCondition(
      namespace,
      'minio-down',
      'AIBOMReady',
      (c) => c?.status === 'False' && c.reason === 'ObjectStoreUnavailable',
      'AIBOMReady=False because the object store is down',
    );
    const cond = conditionOf(failed, 'AIBOMReady')!;
    console.log(`[faults] MinIO down: AIBOMReady ${cond.reason}: ${cond.message}`);
    expect(cond.message).toMatch(/ECONNREFUSED|connect|object store|unavailable/i);

    // Retried with the key's exponential backoff: the key's requeue count (the exponent) grows with
    // every object-store failure, never reset by a success in between.
    const key = `${namespace}/minio-down`;
    const storeFailure = (l: LogLine) =>
      failedReconciles(key)(l) &&
      /ECONNREFUSED/.test((l.err as { message?: string } | undefined)?.message ?? '');
    const lines = await proc.waitForLog(storeFailure, 'object-store failures of the Run', { count: 3 });
    const retries = lines.map((l) => l.retries as number);
    expect(
      retries.slice(1).every((r, k) => r > retries[k]!),
      `retries ${retries.join(',')}`,
    ).toBe(true);
    const metrics = await proc.metrics();
    expect(
      metricValue(metrics, 'controller_runtime_reconcile_errors_total', { controller: 'runs' }),
    ).toBeGreaterThanOrEqual(3);
    expect(metricValue(metrics, 'workqueue_retries_total', { name: 'runs' })).toBeGreaterThanOrEqual(3);

    // Everything but the AIBOM is in the vault already; no half-recorded AIBOM.
    const during = await vaultFacts(url);
    const downId = failed.metadata.uid;
    expect(during.runAttestations.get(downId)).toBe(1);
    expect(during.aibomArtifacts.get(downId)).toBeUndefined();
    expect(during.aibomAttestations.get(downId)).toBeUndefined();

    await minio.start();
    const runs = await Promise.all(
      ['minio-ok', 'minio-down'].map((n) =>
        waitForCondition(namespace, n, 'AIBOMReady', aibomReady, 'AIBOMReady=True after MinIO returned'),
      ),
    );
    await expectOneAibomPerRun(url, runs);
    await expectKubeMirrorsVault(url, runs);
    for (const run of runs) await expectArtifactVerifies(pki, run, minio);
    // Recorded exactly once: one "created" pipeline run per Run in the log.
    const recorded = (await proc.logs()).filter((l) => l.msg === 'AIBOM recorded' && l.created === true);
    expect(recorded.map((l) => l.run).sort()).toEqual([`${namespace}/minio-down`, `${namespace}/minio-ok`]);
  }, 300_000);
});

describe('vault (PostgreSQL) unavailable', () => {
  let postgres: ScratchPostgres | undefined;

  afterAll(async () => {
    await stopAllControllers();
    await postgres?.dispose();
  });

  it('reports VaultUnavailable, retries, and loses or duplicates nothing once PostgreSQL is back', async () => {
    postgres = await startScratchPostgres();
    const url = postgres.url;
    const { namespace, pki, lease, opts } = await testEnv('op-pg', null);
    // As deployed: the owner migrates, the runtime login runs.
    const proc = await startControllerProcess({
      ...opts(postgres.runtimeUrl),
      env: { DATABASE_MIGRATION_URL: postgres.ownerUrl },
      name: lease,
    });
    await proc.waitLeading();
    const port = await proc.metricsPort();
    const readyz = async () => (await fetch(`http://127.0.0.1:${port}/readyz`)).ok;

    // Baseline before the outage.
    await createRun(namespace, 'pg-ok', spec);
    await driveRun(pipeline(), namespace, 'pg-ok', { stepDelayMs: 50 });
    const before = await waitForCondition(
      namespace,
      'pg-ok',
      'AIBOMReady',
      aibomReady,
      'AIBOMReady=True before',
    );
    const factsBefore = await vaultFacts(url);
    expect(await readyz()).toBe(true);

    await postgres.stop();
    await Promise.all(['pg-down-ok', 'pg-down-failed'].map((n) => createRun(namespace, n, spec)));
    // A Run created during the outage: nothing can be attested yet, and the Run says why.
    const pending = await waitForCondition(
      namespace,
      'pg-down-ok',
      'Attested',
      (c) => c?.status === 'False' && c.reason === 'VaultUnavailable',
      'Attested=False with reason VaultUnavailable',
    );
    expect(conditionOf(pending, 'Attested')!.message).toMatch(/vault \(PostgreSQL\) is unavailable/);
    await Promise.all([
      driveRun(pipeline(), namespace, 'pg-down-ok', { stepDelayMs: 50 }),
      driveRun(pipeline(), namespace, 'pg-down-failed', { stepDelayMs: 50, fail: 'summarise' }),
    ]);
    for (const n of ['pg-down-ok', 'pg-down-failed']) {
      const run = await waitForCondition(
        namespace,
        n,
        'AIBOMReady',
        (c) => c?.status === 'False' && c.reason === 'VaultUnavailable',
        'AIBOMReady=False with reason VaultUnavailable',
      );
      const cond = conditionOf(run, 'AIBOMReady')!;
      expect(cond.message).toMatch(/vault \(PostgreSQL\) is unavailable/);
      console.log(`[faults] PostgreSQL down: AIBOMReady ${cond.reason}: ${cond.message}`);
    }
    // Retried (rate-limited requeues), and the process stays up.
    const vaultFailures = await proc.waitForLog(
      (l) =>
        failedReconciles(`${namespace}/pg-down-ok`)(l) &&
        /ECONNREFUSED/.test((l.err as { message?: string } | undefined)?.message ?? ''),
      'vault failures of the Run',
      { count: 3 },
    );
    const retries = vaultFailures.map((l) => l.retries as number);
    expect(
      retries.slice(1).every((r, k) => r > retries[k]!),
      `retries ${retries.join(',')}`,
    ).toBe(true);
    await poll(async () => !(await readyz()), '/readyz to fail while the vault is down');
    expect(proc.alive).toBe(true);

    await postgres.start();
    const runs = await Promise.all(
      ['pg-ok', 'pg-down-ok', 'pg-down-failed'].map((n) =>
        waitForCondition(namespace, n, 'AIBOMReady', aibomReady, 'AIBOMReady=True after PostgreSQL returned'),
      ),
    );
    expect(runs[2]!.status?.phase).toBe('Failed');
    await poll(readyz, '/readyz to pass again');
    await expectOneAibomPerRun(url, runs);
    await expectKubeMirrorsVault(url, runs);
    for (const run of runs) await expectArtifactVerifies(pki, run, stackS3());

    // What was recorded before the outage is untouched.
    const after = await vaultFacts(url);
    for (const id of factsBefore.attestationIds) expect(after.attestationIds.has(id)).toBe(true);
    expect(runs[0]!.status?.attestations).toEqual(before.status?.attestations);
  }, 300_000);
});
