/**
 * A controller restart into a large cluster (issue 29 item 3), against the real kube-apiserver and
 * PostgreSQL. `CONVERGED` Runs recorded by a first controller; then:
 *
 * 1. A new controller process (same Lease, empty memory) starts into them: it lists and reconciles
 *    every one and writes nothing, neither to the API server nor to PostgreSQL (counted at its
 *    KubeClient and its vault's pool, as in converged.test.ts and requests.test.ts).
 * 2. With the controller down, `BACKLOG` Runs reach their terminal phase (unrecorded). A new
 *    controller (one worker, so order is all there is) starts into converged + backlog Runs; once it
 *    has recorded one backlog Run, a fresh Run is created and finishes. The fresh Run gets its AIBOM
 *    while backlog Runs are still unrecorded: its watch events go before the initial list's work
 *    (src/queue/workqueue.ts priorities). Asserted on order (the status writes of the controller in
 *    sequence), never on time. Still no write concerns a converged Run, and the backlog is recorded.
 */
import { randomBytes } from 'node:crypto';
import { Registry } from 'prom-client';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { PIPELINE_FIELD_MANAGER, topoOrder } from '../../../hack/sample-pipeline.ts';
import { ConditionTypes } from '../../../src/crd/reasons.ts';
import type { Run, RunSpec } from '../../../src/crd/run.ts';
import type { RunningController } from '../../../src/controller/manager.ts';
import { startTestController } from '../../helpers/controller.ts';
import { RUN_TYPE } from '../../../src/controller/run/kube-api.ts';
import {
  applyStatus,
  kubeClient,
  resourcePath,
  type KubeClient,
  type RequestSpec,
  type StreamSpec,
} from '../../../src/kube/index.ts';
import { signerFromPem, type KeySigner } from '../../../src/signing/index.ts';
import { migrate, openVault, type Vault } from '../../../src/vault/index.ts';
import { createRun, sampleRunSpec } from '../../helpers/controller-process.ts';
import { countingPool, CountingClient, isIdle, reconciles } from '../../helpers/counting-client.ts';
import { generateDevPki } from '../../helpers/pki.ts';
import { createNamespace } from '../../helpers/rbac.ts';
import { freshDatabase, kubeAccess, uniqueName } from '../../helpers/stack.ts';
import { waitFor } from '../../helpers/wait.ts';
import { WRITE_SQL } from '../../helpers/write-sql.ts';

const CONVERGED = 200;
const BACKLOG = 40;
/** Requests in flight while the test creates Runs. */
const IN_FLIGHT = 8;
const ns = uniqueName('restart');
const leaseName = `restart-${randomBytes(3).toString('hex')}`;
const admin = kubeClient(kubeAccess('admin'));

/** Every write request (not a read, not the Lease) in order, with its path and body. */
class WriteLog implements KubeClient {
  readonly writes: Array<{ method: string; path: string; body: string }> = [];
  readonly #inner: KubeClient;
  constructor(inner: KubeClient) {
    this.#inner = inner;
  }
  request<T>(spec: RequestSpec): Promise<T> {
    if (spec.method !== 'GET' && !spec.path.includes('/leases'))
      this.writes.push({ method: spec.method, path: spec.path, body: JSON.stringify(spec.body ?? null) });
    return this.#inner.request<T>(spec);
  }
  stream(spec: StreamSpec, onObject: (value: unknown) => void): Promise<void> {
    return this.#inner.stream(spec, onObject);
  }
}

let vault: Vault;
let statements: string[];
let signer: KeySigner;
let spec: RunSpec;
let controller: RunningController | undefined;

function start(client: KubeClient, registry: Registry, workers: number): RunningController {
  return startTestController({
    client,
    vault,
    signer,
    registry,
    leaseName,
    watchNamespace: ns,
    workers,
  });
}

async function stopController(): Promise<void> {
  await controller?.stop();
  controller = undefined;
}

const aibomShown = (r: Run): boolean =>
  r.status?.conditions?.some((c) => c.type === ConditionTypes.AIBOMReady && c.status === 'True') ?? false;

const listRuns = async (): Promise<Run[]> =>
  (await admin.request<{ items: Run[] }>({ method: 'GET', path: resourcePath(RUN_TYPE, { namespace: ns }) }))
    .items;

/** A Run created and brought to Succeeded by the pipeline (every step done), as its pipeline would. */
async function finishedRun(name: string): Promise<void> {
  const run = await createRun(ns, name, spec);
  const at = new Date().toISOString();
  const steps = topoOrder(run).map((id) => ({
    id,
    phase: 'Succeeded' as const,
    startedAt: at,
    finishedAt: at,
    output: { result: `output of ${id}` },
  }));
  await applyStatus(
    admin,
    RUN_TYPE,
    { namespace: ns, name },
    { phase: 'Succeeded', steps },
    { fieldManager: PIPELINE_FIELD_MANAGER, force: false },
  );
}

async function inBatches(names: readonly string[], fn: (name: string) => Promise<void>): Promise<void> {
  const queue = [...names];
  await Promise.all(
    Array.from({ length: IN_FLIGHT }, async () => {
      for (let n = queue.shift(); n !== undefined; n = queue.shift()) await fn(n);
    }),
  );
}

/** Leading with a synced informer, then: reconciled at least `n` times and idle. */
async function drained(c: RunningController, registry: Registry, n: number): Promise<void> {
  await waitFor(
    'the controller reconciled every listed Run and is idle',
    async () =>
      c.isLeader() &&
      (await c.ready().then(
        () => true,
        () => false,
      )) &&
      (await reconciles(registry, 'runs')) >= n &&
      (await isIdle(registry, ['runs']))
        ? true
        : undefined,
    400_000,
  );
}

const converged = Array.from({ length: CONVERGED }, (_, i) => `conv-${i}`);
const backlog = Array.from({ length: BACKLOG }, (_, i) => `back-${i}`);
/** Whether a write concerns one of `names` (its path, or a body naming it, e.g. Events, labels). */
const concerns = (w: { path: string; body: string }, names: ReadonlySet<string>): string[] => {
  const found: string[] = [];
  for (const m of `${w.path} ${w.body}`.matchAll(/\b(conv-\d+|back-\d+|fresh)\b/g))
    if (names.has(m[1]!)) found.push(m[1]!);
  return found;
};

beforeAll(async () => {
  const url = await freshDatabase('restart');
  await migrate(url);
  const counting = countingPool(url);
  statements = counting.statements;
  vault = await openVault(counting.pool);
  signer = signerFromPem(await generateDevPki());
  spec = await sampleRunSpec();
  spec.steps = spec.steps.slice(0, 2);
  await createNamespace(ns);
  // The first controller records the converged Runs.
  const registry = new Registry();
  controller = start(kubeClient(kubeAccess('aibom-vault')), registry, 4);
  await inBatches(converged, finishedRun);
  await waitFor(
    `${CONVERGED} Runs recorded`,
    async () => ((await listRuns()).filter(aibomShown).length === CONVERGED ? true : undefined),
    600_000,
    1000,
  );
  await drained(controller, registry, CONVERGED);
  await stopController();
}, 900_000);

afterAll(async () => {
  await stopController();
  await vault?.close();
});

describe('a controller restarting into a cluster of Runs', () => {
  it(`writes nothing for ${CONVERGED} converged Runs (API server and PostgreSQL)`, async () => {
    const before = await listRuns();
    const client = new CountingClient(kubeClient(kubeAccess('aibom-vault')));
    const registry = new Registry();
    statements.length = 0;
    controller = start(client, registry, 4);
    await drained(controller, registry, CONVERGED);
    // It looked at every Run (one reconcile each at least) ...
    expect(await reconciles(registry, 'runs')).toBeGreaterThanOrEqual(CONVERGED);
    expect(client.counts.get('LIST runs')).toBeGreaterThanOrEqual(1);
    expect(statements.length).toBeGreaterThan(0);
    // ... and wrote nothing.
    expect(client.writes()).toEqual({});
    expect(statements.filter((s) => WRITE_SQL.test(s))).toEqual([]);
    const after = await listRuns();
    expect(after.map((r) => r.metadata.resourceVersion)).toEqual(
      before.map((r) => r.metadata.resourceVersion),
    );
    await stopController();
  }, 600_000);

  it('records a backlog of terminal Runs, and a Run finishing after the start goes before that backlog', async () => {
    // The controller is down while the backlog finishes.
    await inBatches(backlog, finishedRun);
    const log = new WriteLog(kubeClient(kubeAccess('aibom-vault')));
    const registry = new Registry();
    const statusWriteOf = (name: string) => (w: { method: string; path: string }) =>
      w.method === 'PATCH' && w.path.endsWith(`/runs/${name}/status`);
    const backlogNames = new Set(backlog);
    const recordedBacklog = (): number =>
      log.writes.filter((w) => w.method === 'PATCH' && /\/runs\/back-\d+\/status$/.test(w.path)).length;
    // One worker: the order of its work is the order of its queue.
    controller = start(log, registry, 1);
    await waitFor('the first backlog Run recorded', () =>
      Promise.resolve(recordedBacklog() >= 1 ? true : undefined),
    );
    await finishedRun('fresh');
    const fresh = await waitFor('the fresh Run has its AIBOM', async () => {
      const r = (await listRuns()).find((x) => x.metadata.name === 'fresh');
      return r && aibomShown(r) ? r : undefined;
    });
    const backlogLeft = (await listRuns()).filter((r) => backlogNames.has(r.metadata.name) && !aibomShown(r));
    const freshWrite = log.writes.findIndex(statusWriteOf('fresh'));
    const backlogAfter = log.writes
      .slice(freshWrite + 1)
      .filter((w) => /\/runs\/back-\d+\/status$/.test(w.path));
    console.log(
      `restart: the fresh Run got its AIBOM with ${backlogLeft.length} of ${BACKLOG} backlog Runs still unrecorded` +
        ` (backlog status writes before it: ${recordedBacklog() - backlogAfter.length})`,
    );
    expect(freshWrite).toBeGreaterThanOrEqual(0);
    expect(fresh.status?.attestations?.count).toBeGreaterThan(0);
    // Order, not time: the backlog had not drained when the fresh Run was recorded.
    expect(backlogLeft.length).toBeGreaterThan(0);

    // The backlog drains; every backlog Run is recorded; no write concerns a converged Run.
    await drained(controller, registry, CONVERGED + BACKLOG + 1);
    const runs = await listRuns();
    expect(runs.filter((r) => !aibomShown(r)).map((r) => r.metadata.name)).toEqual([]);
    const convergedNames = new Set(converged);
    expect(log.writes.flatMap((w) => concerns(w, convergedNames))).toEqual([]);
    // The counter is live: the backlog and the fresh Run were written for.
    for (const name of [...backlog, 'fresh'])
      expect(log.writes.filter(statusWriteOf(name)).length, name).toBeGreaterThanOrEqual(1);
    await stopController();
  }, 900_000);
});
