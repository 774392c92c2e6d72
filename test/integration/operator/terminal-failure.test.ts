/**
 * A Run that reaches its terminal phase while recording fails: its conditions speak of the end,
 * never "waiting for the run to finish" (what Attested read while the run was running). First the
 * vault hangs (SIGSTOP on a PostgreSQL of this test) as the pipeline finishes the Run: Attested is
 * False and says the run's records are not all stored, with the dependency's reason. Then the vault
 * answers and the object store hangs: the run's records are stored, the AIBOM is not, so Attested
 * is True (RunAttested) and AIBOMReady says what the AIBOM waits for. Then the store answers: the
 * AIBOM is recorded. The real controller process, with deadlines short enough for the test.
 */
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { RunSpec, StepStatus } from '../../../src/crd/run.ts';
import {
  aibomReady,
  conditionOf,
  createRun,
  startControllerProcess,
  startScratchMinio,
  startScratchPostgres,
  stopAllControllers,
  testEnv,
  waitForCondition,
  type ScratchMinio,
  type ScratchPostgres,
} from '../../helpers/controller-process.ts';
import { applyPipelineStatus } from '../admission/helpers.ts';

const DEADLINE_MS = '1500';
let logDir: string;
let postgres: ScratchPostgres | undefined;
let minio: ScratchMinio | undefined;

beforeAll(async () => {
  logDir = await mkdtemp(join(tmpdir(), 'op-terminal-logs-'));
});

afterAll(async () => {
  await stopAllControllers();
  await postgres?.dispose();
  await minio?.dispose();
  if (logDir) await rm(logDir, { recursive: true, force: true });
});

const spec: RunSpec = {
  steps: [
    { id: 'ask', model: { name: 'm', provider: 'p', version: '1' } },
    { id: 'act', dependsOn: ['ask'], tool: { name: 't', command: ['t'] } },
  ],
};

const step = (id: string): StepStatus => {
  const at = new Date().toISOString();
  return { id, phase: 'Succeeded', startedAt: at, finishedAt: at, output: { id } };
};

describe('a terminal Run whose recording fails', () => {
  it('never reads "waiting for the run to finish": Attested says what is stored, AIBOMReady what waits', async () => {
    postgres = await startScratchPostgres();
    minio = await startScratchMinio();
    const t = await testEnv('op-terminal', null, logDir);
    const { namespace } = t;
    const env = {
      ...minio.env,
      S3_TIMEOUT_MS: DEADLINE_MS,
      PG_CONNECT_TIMEOUT_MS: DEADLINE_MS,
      PG_QUERY_TIMEOUT_MS: DEADLINE_MS,
    };
    const controller = await startControllerProcess({ ...t.opts(postgres.url), name: t.lease, env });
    await controller.waitLeading();

    await createRun(namespace, 'late', spec);
    const ask = step('ask');
    await applyPipelineStatus(namespace, 'late', { phase: 'Running', steps: [ask] });
    const running = await waitForCondition(
      namespace,
      'late',
      'Attested',
      (c) => c?.status === 'True' && c.reason === 'StepsAttested',
      'the first step attested',
    );
    expect(conditionOf(running, 'Attested')?.message).toMatch(/waiting for the run to finish/);

    // The vault hangs as the pipeline finishes the Run.
    postgres.pause();
    try {
      await applyPipelineStatus(namespace, 'late', { phase: 'Succeeded', steps: [ask, step('act')] });
      const failed = await waitForCondition(
        namespace,
        'late',
        'AIBOMReady',
        (c) => c?.status === 'False' && c.reason === 'VaultUnavailable',
        'AIBOMReady=False VaultUnavailable while PostgreSQL hangs',
      );
      const attested = conditionOf(failed, 'Attested');
      console.log(
        `[terminal] vault hung: Attested ${attested?.status} ${attested?.reason}: ${attested?.message}`,
      );
      expect(attested?.message).not.toMatch(/waiting for the run to finish/);
      expect(attested).toMatchObject({ status: 'False', reason: 'VaultUnavailable' });
      expect(attested?.message).toMatch(/^the run Succeeded; .*vault \(PostgreSQL\) is unavailable/);
      expect(conditionOf(failed, 'AIBOMReady')?.message).toMatch(/the AIBOM waits for the run's records/);

      // The object store hangs too, then the vault answers again: the run's records are stored,
      // the AIBOM is not.
      minio.pause();
    } finally {
      postgres.resume();
    }
    try {
      const stored = await waitForCondition(
        namespace,
        'late',
        'AIBOMReady',
        (c) => c?.status === 'False' && c.reason === 'ObjectStoreUnavailable',
        'AIBOMReady=False ObjectStoreUnavailable once the vault answers',
      );
      const attested = conditionOf(stored, 'Attested');
      console.log(
        `[terminal] store hung: Attested ${attested?.status} ${attested?.reason}: ${attested?.message}`,
      );
      expect(attested).toMatchObject({ status: 'True', reason: 'RunAttested' });
      expect(attested?.message).not.toMatch(/waiting for the run to finish/);
      expect(conditionOf(stored, 'AIBOMReady')?.message).toMatch(/object store is unavailable/);
    } finally {
      minio.resume();
    }

    const done = await waitForCondition(namespace, 'late', 'AIBOMReady', aibomReady, 'the AIBOM recorded');
    expect(conditionOf(done, 'Attested')).toMatchObject({ status: 'True', reason: 'RunAttested' });
    expect(conditionOf(done, 'Attested')?.message).toMatch(/^\d+ attestation\(s\) recorded for the run$/);
  }, 420_000);
});
