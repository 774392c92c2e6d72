/**
 * A dependency that HANGS (issue 10 item 3, issue 11 item 8): MinIO, then PostgreSQL, stopped with
 * SIGSTOP for longer than the deadline the test configures (S3_TIMEOUT_MS, PG_*_TIMEOUT_MS). A
 * stopped server still accepts connections and answers nothing, which is what used to hold a
 * reconcile for minutes with no sign anywhere. Now, for the real controller and sidecar processes:
 * the Run's condition names the dependency, a Warning Event says it, /readyz of both fails, the
 * dependency gauge drops, the API answers 503 UPSTREAM_UNAVAILABLE with Retry-After (never 500,
 * never a hang), Runs that do not need the hung dependency keep being reconciled, and once it
 * resumes (SIGCONT) every Run gets exactly one AIBOM.
 *
 * Each dependency is a separate server of this test (startScratchMinio / startScratchPostgres):
 * stopping the shared stack's servers would hang every other test file running meanwhile. Waits are
 * polls with generous bounds; nothing asserts how long anything took.
 */
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import type { Run, RunSpec, StepStatus } from '../../../src/crd/run.ts';
import { ObjectStoreError, s3BlobStore } from '../../../src/blob/store.ts';
import { driveRun } from '../../../hack/sample-pipeline.ts';
import {
  aibomReady,
  conditionOf,
  connectionsTo,
  createRun,
  eventsOf,
  expectArtifactVerifies,
  expectKubeMirrorsVault,
  expectOneAibomPerRun,
  metricValue,
  poll,
  sampleRunSpec,
  stackS3,
  startControllerProcess,
  startScratchMinio,
  startScratchPostgres,
  stopAllControllers,
  testEnv,
  waitForCondition,
  type ControllerProcess,
  type ScratchMinio,
  type ScratchPostgres,
} from '../../helpers/controller-process.ts';
import { kubeConfig, stack } from '../../helpers/stack.ts';
import { applyPipelineStatus } from '../admission/helpers.ts';

/** The deadline this test gives every call to the hung dependency. */
const DEADLINE_MS = '1500';

let spec: RunSpec;
let logDir: string;
const pipeline = () => kubeConfig('admin');

beforeAll(async () => {
  spec = await sampleRunSpec();
  logDir = await mkdtemp(join(tmpdir(), 'op-hung-logs-'));
});

afterEach(async () => {
  await stopAllControllers();
});

afterAll(async () => {
  await stopAllControllers();
  if (process.env.KEEP_LOGS) console.log(`controller logs kept in ${logDir}`);
  else if (logDir) await rm(logDir, { recursive: true, force: true });
});

/** The controller and the sidecar of one deployment, as processes, with `env` on top. */
async function deployment(
  prefix: string,
  dbPrefix: string | null,
  env: Record<string, string>,
  databaseUrl?: string,
) {
  const t = await testEnv(prefix, dbPrefix, logDir);
  const url = databaseUrl ?? t.databaseUrl;
  const controller = await startControllerProcess({ ...t.opts(url), name: t.lease, env });
  const sidecar = await startControllerProcess({
    ...t.opts(url),
    name: `${t.lease}-api`,
    bin: 'sidecar',
    env,
  });
  await controller.waitLeading();
  const apiUrl = await sidecar.apiUrl();
  const token = stack().kube.tokens.admin;
  const api = (path: string) =>
    fetch(`${apiUrl}${path}`, {
      headers: { authorization: `Bearer ${token}` },
      // A bound for the test only: the service must answer well before it.
      signal: AbortSignal.timeout(60_000),
    });
  return { ...t, url, controller, sidecar, apiUrl, api };
}

const readyz = async (proc: ControllerProcess): Promise<number> =>
  (await fetch(`http://127.0.0.1:${await proc.metricsPort()}/readyz`)).status;

async function aibomOf(namespace: string, name: string, what: string): Promise<Run> {
  return waitForCondition(namespace, name, 'AIBOMReady', aibomReady, what, 180_000);
}

/** A Warning Event about the Run with `reason` (polled: Events are written best effort). */
async function warningEvent(run: Run, reason: string): Promise<{ message?: string }> {
  return poll(
    async () =>
      (await eventsOf(run.metadata.namespace, run.metadata.uid)).find(
        (e) => e.type === 'Warning' && e.reason === reason,
      ),
    `a Warning Event ${reason} on ${run.metadata.name}`,
  );
}

/** 503 UPSTREAM_UNAVAILABLE as problem+json with a Retry-After in seconds. */
async function expectUpstreamUnavailable(res: Response, dependency: RegExp): Promise<void> {
  expect(res.status).toBe(503);
  expect(res.headers.get('content-type')).toMatch(/^application\/problem\+json/);
  const retryAfter = res.headers.get('retry-after');
  expect(retryAfter).toMatch(/^\d+$/);
  expect(Number(retryAfter)).toBeGreaterThan(0);
  const body = (await res.json()) as { code?: string; detail?: string; status?: number };
  expect(body).toMatchObject({ status: 503, code: 'UPSTREAM_UNAVAILABLE' });
  expect(body.detail).toMatch(dependency);
  // No address of the dependency in the answer.
  expect(body.detail).not.toMatch(/127\.0\.0\.1|:\d{2,5}\b/);
}

describe('object store (MinIO) hung with SIGSTOP', () => {
  let minio: ScratchMinio | undefined;

  afterAll(async () => {
    await stopAllControllers();
    await minio?.dispose();
  });

  it('the Run, an Event, /readyz, the metric and the API say so within the deadline; other Runs go on; one AIBOM each after SIGCONT', async () => {
    minio = await startScratchMinio();
    const env = { ...minio.env, S3_TIMEOUT_MS: DEADLINE_MS };
    const d = await deployment('op-hung-s3', 'ophungs3', env);
    const { namespace } = d;

    await createRun(namespace, 'before', spec);
    await driveRun(pipeline(), namespace, 'before', { stepDelayMs: 50 });
    const before = await aibomOf(namespace, 'before', 'AIBOMReady=True before the hang');
    expect(await readyz(d.controller)).toBe(200);
    expect((await d.api('/readyz')).status).toBe(200);
    const artifactPath = `/v1/runs/${before.metadata.uid}/artifacts/aibom`;
    expect((await d.api(artifactPath)).status).toBe(200);

    const first: StepStatus = {
      id: spec.steps[0]!.id,
      phase: 'Succeeded',
      startedAt: new Date().toISOString(),
      finishedAt: new Date().toISOString(),
      output: { hits: 3 },
    };
    minio.pause();
    try {
      // A Run that reaches its AIBOM while the store hangs.
      await createRun(namespace, 'during', spec);
      await driveRun(pipeline(), namespace, 'during', { stepDelayMs: 50 });
      const during = await waitForCondition(
        namespace,
        'during',
        'AIBOMReady',
        (c) => c?.status === 'False' && c.reason === 'ObjectStoreUnavailable',
        'AIBOMReady=False ObjectStoreUnavailable while MinIO hangs',
      );
      const cond = conditionOf(during, 'AIBOMReady')!;
      expect(cond.message).toMatch(/object store is unavailable.*did not answer .* within 1500 ms/);
      console.log(`[hung] MinIO stopped: AIBOMReady ${cond.reason}: ${cond.message}`);
      const event = await warningEvent(during, 'ObjectStoreUnavailable');
      expect(event.message).toMatch(/object store/);

      await poll(async () => (await readyz(d.controller)) === 503, 'controller /readyz 503');
      await poll(
        async () =>
          metricValue(await d.controller.metrics(), 'aibom_vault_dependency_up', {
            dependency: 'object_store',
          }) === 0 && true,
        'aibom_vault_dependency_up{dependency="object_store"} 0',
      );
      const sidecarReady = await d.api('/readyz');
      expect(sidecarReady.status).toBe(503);
      expect(await sidecarReady.text()).toMatch(/object store/);
      await expectUpstreamUnavailable(await d.api(artifactPath), /object store/);
      await expectUpstreamUnavailable(await d.api(`${artifactPath}/manifest`), /object store/);
      // PostgreSQL is fine: the run detail is served.
      expect((await d.api(`/v1/runs/${before.metadata.uid}`)).status).toBe(200);

      // Runs that need only PostgreSQL keep being reconciled meanwhile: a step finishes, it is attested.
      await createRun(namespace, 'steps', spec);
      await applyPipelineStatus(namespace, 'steps', { phase: 'Running', steps: [first] });
      await waitForCondition(
        namespace,
        'steps',
        'Attested',
        (c) => c?.status === 'True' && c.reason === 'StepsAttested',
        'a step of another Run attested while MinIO hangs',
      );

      // Aborted, not abandoned: a call of this process fails, and leaves no connection open to the
      // stopped server (the kernel still completes the close handshake for it).
      const port = Number(new URL(minio.endpoint).port);
      // First, idle keep-alive sockets this process kept from earlier calls (the bucket's creation)
      // time out in the HTTP agent: then the call below must open its own connection.
      await poll(
        async () => (await connectionsTo(process.pid, port)).established === 0,
        'no idle connection of this process to MinIO',
      );
      const blobs = s3BlobStore({ ...minio, timeoutMs: Number(DEADLINE_MS) });
      const key = (before.status?.artifacts?.aibom as { key: string }).key;
      // The stopped server's kernel accepts the connection; a client that only raced a timer would
      // leave it open.
      await expect(blobs.get(key)).rejects.toBeInstanceOf(ObjectStoreError);
      expect((await connectionsTo(process.pid, port)).established).toBe(0);
      // The controller's reconciles against the store time out the same way: its processes keep
      // retrying, but never pile up connections (at most one per worker and the readiness probe).
      expect((await connectionsTo(d.controller.pid, port)).established).toBeLessThanOrEqual(5);

      // Still hung after more than the deadline, still the same answers (nothing recovered by itself).
      expect(minio.running).toBe(true);
    } finally {
      minio.resume();
    }

    // The pipeline finishes the other Run (its first step exactly as it reported it).
    const at = new Date().toISOString();
    await applyPipelineStatus(namespace, 'steps', {
      phase: 'Succeeded',
      steps: [
        first,
        ...spec.steps.slice(1).map((s): StepStatus => ({
          id: s.id,
          phase: 'Succeeded',
          startedAt: at,
          finishedAt: at,
          output: {},
        })),
      ],
    });
    const runs = [
      await aibomOf(namespace, 'before', 'AIBOMReady=True'),
      await aibomOf(namespace, 'during', 'AIBOMReady=True after SIGCONT'),
      await aibomOf(namespace, 'steps', 'AIBOMReady=True after SIGCONT'),
    ];
    await poll(async () => (await readyz(d.controller)) === 200, 'controller /readyz 200 again');
    await poll(async () => (await d.api('/readyz')).status === 200, 'sidecar /readyz 200 again');
    expect((await d.api(artifactPath)).status).toBe(200);
    await expectOneAibomPerRun(d.url, runs);
    await expectKubeMirrorsVault(d.url, runs);
    for (const run of runs) await expectArtifactVerifies(d.pki, run, minio);
  }, 420_000);
});

describe('vault (PostgreSQL) hung with SIGSTOP', () => {
  let postgres: ScratchPostgres | undefined;

  afterAll(async () => {
    await stopAllControllers();
    await postgres?.dispose();
  });

  it('the Run, an Event, /readyz, the metric and the API say so within the deadline; Runs go on after SIGCONT, one AIBOM each', async () => {
    postgres = await startScratchPostgres();
    const env = { PG_CONNECT_TIMEOUT_MS: DEADLINE_MS, PG_QUERY_TIMEOUT_MS: DEADLINE_MS };
    const d = await deployment('op-hung-pg', null, env, postgres.url);
    const { namespace } = d;

    await createRun(namespace, 'before', spec);
    await driveRun(pipeline(), namespace, 'before', { stepDelayMs: 50 });
    const before = await aibomOf(namespace, 'before', 'AIBOMReady=True before the hang');
    const runPath = `/v1/runs/${before.metadata.uid}`;
    expect((await d.api(runPath)).status).toBe(200);
    expect(await readyz(d.controller)).toBe(200);

    postgres.pause();
    try {
      await createRun(namespace, 'during', spec);
      await driveRun(pipeline(), namespace, 'during', { stepDelayMs: 50 });
      const during = await waitForCondition(
        namespace,
        'during',
        'AIBOMReady',
        (c) => c?.status === 'False' && c.reason === 'VaultUnavailable',
        'AIBOMReady=False VaultUnavailable while PostgreSQL hangs',
      );
      const cond = conditionOf(during, 'AIBOMReady')!;
      expect(cond.message).toMatch(/vault \(PostgreSQL\) is unavailable/);
      console.log(`[hung] PostgreSQL stopped: AIBOMReady ${cond.reason}: ${cond.message}`);
      await warningEvent(during, 'VaultUnavailable');

      await poll(async () => (await readyz(d.controller)) === 503, 'controller /readyz 503');
      await poll(
        async () =>
          metricValue(await d.controller.metrics(), 'aibom_vault_dependency_up', { dependency: 'vault' }) ===
            0 && true,
        'aibom_vault_dependency_up{dependency="vault"} 0',
      );
      const sidecarReady = await d.api('/readyz');
      expect(sidecarReady.status).toBe(503);
      expect(await sidecarReady.text()).toMatch(/vault/);
      await expectUpstreamUnavailable(await d.api(runPath), /vault \(PostgreSQL\)/);
      await expectUpstreamUnavailable(await d.api(`${runPath}/artifacts/aibom`), /vault \(PostgreSQL\)/);
      expect(postgres.running).toBe(true);
    } finally {
      postgres.resume();
    }

    const runs = [
      await aibomOf(namespace, 'before', 'AIBOMReady=True'),
      await aibomOf(namespace, 'during', 'AIBOMReady=True after SIGCONT'),
    ];
    expect(runs[1]!.status?.phase).toBe('Succeeded');
    await poll(async () => (await readyz(d.controller)) === 200, 'controller /readyz 200 again');
    await poll(async () => (await d.api('/readyz')).status === 200, 'sidecar /readyz 200 again');
    expect((await d.api(runPath)).status).toBe(200);
    await expectOneAibomPerRun(d.url, runs);
    await expectKubeMirrorsVault(d.url, runs);
    for (const run of runs) await expectArtifactVerifies(d.pki, run, stackS3());
  }, 420_000);
});
