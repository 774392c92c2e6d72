import { beforeAll, describe, expect, it } from 'vitest';
import { conditionsEqual, setCondition, type Condition } from '../../../src/kube/conditions.ts';
import { EventRecorder } from '../../../src/kube/events.ts';
import { KubeApiError, isConflict, type KubeClient } from '../../../src/kube/client.ts';
import { addFinalizer, applyStatus, hasFinalizer, removeFinalizer } from '../../../src/kube/status.ts';
import {
  RUNS,
  adminClient,
  createRun,
  deleteRun,
  freshNamespace,
  getRun,
  logger,
  waitFor,
  type RunObject,
} from './helpers.ts';

let client: KubeClient;
let ns: string;
beforeAll(async () => {
  client = adminClient();
  ns = await freshNamespace(client, 'status');
});

const PIPELINE = 'pipeline';
const CONTROLLER = 'aibom-vault-controller';

function managers(run: RunObject): string[] {
  return (run.metadata.managedFields ?? [])
    .filter((m) => m.subresource === 'status' && m.operation === 'Apply')
    .map((m) => m.manager)
    .sort();
}

describe('applyStatus (server-side apply on /status)', () => {
  it('a pipeline and the controller own disjoint status fields and never overwrite each other', async () => {
    await createRun(client, ns, 'ssa');
    const ref = { namespace: ns, name: 'ssa' };
    const now = new Date('2026-03-01T10:00:00.456Z');

    await applyStatus(
      client,
      RUNS,
      ref,
      { phase: 'Running', steps: [{ id: 'summarise', phase: 'Running' }] },
      { fieldManager: PIPELINE, force: false },
    );
    const conditions = setCondition(
      [],
      {
        type: 'AIBOMReady',
        status: 'False',
        reason: 'RunNotFinished',
        message: 'waiting',
        observedGeneration: 1,
      },
      now,
    );
    await applyStatus(
      client,
      RUNS,
      ref,
      { conditions, artifacts: { aibom: { digest: 'sha256:00' } } },
      { fieldManager: CONTROLLER },
    );

    // The pipeline's next apply carries only its own fields: the controller's stay.
    await applyStatus(
      client,
      RUNS,
      ref,
      { phase: 'Succeeded', steps: [{ id: 'summarise', phase: 'Succeeded' }] },
      { fieldManager: PIPELINE, force: false },
    );
    let run = await getRun(client, ns, 'ssa');
    expect(run.status).toMatchObject({
      phase: 'Succeeded',
      steps: [{ id: 'summarise', phase: 'Succeeded' }],
      artifacts: { aibom: { digest: 'sha256:00' } },
    });
    expect(conditionsEqual(run.status!.conditions as Condition[], conditions)).toBe(true);

    // The controller's next apply carries only its own fields: the pipeline's stay.
    const ready = setCondition(
      conditions,
      { type: 'AIBOMReady', status: 'True', reason: 'Stored', message: 'ok', observedGeneration: 1 },
      new Date('2026-03-01T10:01:00Z'),
    );
    run = await applyStatus<RunObject>(
      client,
      RUNS,
      ref,
      { conditions: ready, artifacts: { aibom: { digest: 'sha256:11' } } },
      { fieldManager: CONTROLLER },
    );
    expect(run.status).toMatchObject({
      phase: 'Succeeded',
      steps: [{ id: 'summarise', phase: 'Succeeded' }],
      artifacts: { aibom: { digest: 'sha256:11' } },
    });
    // What we computed is exactly what the server stores (second-precision times): no rewrite loop.
    expect(conditionsEqual(run.status!.conditions as Condition[], ready)).toBe(true);
    expect(managers(run)).toEqual([CONTROLLER, PIPELINE]);
  });

  it('a field another manager owns is a 409 without force; force takes it over (controller-owned fields only)', async () => {
    await createRun(client, ns, 'conflict');
    const ref = { namespace: ns, name: 'conflict' };
    await applyStatus(client, RUNS, ref, { phase: 'Running' }, { fieldManager: PIPELINE, force: false });
    const err = await applyStatus(
      client,
      RUNS,
      ref,
      { phase: 'Failed' },
      { fieldManager: CONTROLLER, force: false },
    ).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(KubeApiError);
    expect(isConflict(err)).toBe(true);
    expect((await getRun(client, ns, 'conflict')).status?.phase).toBe('Running');
    // With force the controller would win; that is why it must only ever send its own fields.
    const forced = await applyStatus<RunObject>(
      client,
      RUNS,
      ref,
      { phase: 'Failed' },
      { fieldManager: CONTROLLER },
    );
    expect(forced.status?.phase).toBe('Failed');
  });

  it('dropping a field from the next apply removes it (the apply body is the full desired state)', async () => {
    await createRun(client, ns, 'prune');
    const ref = { namespace: ns, name: 'prune' };
    await applyStatus(
      client,
      RUNS,
      ref,
      { transparency: { state: 'queued', queued: 2 } },
      { fieldManager: CONTROLLER },
    );
    const run = await applyStatus<RunObject>(
      client,
      RUNS,
      ref,
      { transparency: { state: 'queued' } },
      { fieldManager: CONTROLLER },
    );
    expect(run.status?.transparency).toEqual({ state: 'queued' });
  });

  it('answers 404 for a missing object (SSA on /status does not create)', async () => {
    const err = await applyStatus(
      client,
      RUNS,
      { namespace: ns, name: 'absent' },
      { phase: 'Running' },
      { fieldManager: CONTROLLER },
    ).catch((e: unknown) => e);
    expect((err as KubeApiError).code).toBe(404);
  });
});

describe('finalizers', () => {
  it('adds and removes guarded by the list as read; a stale read gets 409 and leaves the other finalizer alone', async () => {
    const created = await createRun(client, ns, 'fin');
    const withOurs = await addFinalizer(client, RUNS, created, 'vault.service.dev/attestations');
    expect(withOurs.metadata.finalizers).toEqual(['vault.service.dev/attestations']);
    expect(await addFinalizer(client, RUNS, withOurs, 'vault.service.dev/attestations')).toBe(withOurs); // no-op, no request

    // Someone else adds theirs; our copy is now stale.
    const theirs = await addFinalizer(client, RUNS, withOurs, 'example.com/other');
    const err = await removeFinalizer(client, RUNS, withOurs, 'vault.service.dev/attestations').catch(
      (e: unknown) => e,
    );
    expect(isConflict(err)).toBe(true);
    expect((await getRun(client, ns, 'fin')).metadata.finalizers).toEqual([
      'vault.service.dev/attestations',
      'example.com/other',
    ]);

    // Re-read and retry, as a requeue would.
    const fresh = await removeFinalizer(client, RUNS, theirs, 'vault.service.dev/attestations');
    expect(fresh.metadata.finalizers).toEqual(['example.com/other']);
    expect(hasFinalizer(fresh, 'vault.service.dev/attestations')).toBe(false);

    // Deletion waits for the last finalizer, then completes once it is removed.
    await deleteRun(client, ns, 'fin');
    const deleting = await getRun(client, ns, 'fin');
    expect(deleting.metadata).toHaveProperty('deletionTimestamp');
    await removeFinalizer(client, RUNS, deleting, 'example.com/other');
    await waitFor(
      () =>
        getRun(client, ns, 'fin').then(
          () => false,
          (e: unknown) => (e as KubeApiError).code === 404,
        ),
      10_000,
      'deletion',
    );
  });
});

describe('EventRecorder', () => {
  interface CoreEvent {
    reason: string;
    message: string;
    type: string;
    involvedObject: { uid: string; name: string; kind: string };
    series?: { count: number };
    reportingComponent: string;
  }

  it('creates Events about a Run that kubectl describe finds, and folds repeats into a series', async () => {
    const run = await createRun(client, ns, 'evented');
    const rec = new EventRecorder({
      client,
      reportingController: 'vault.service.dev/controller',
      reportingInstance: 'test-pod',
      logger,
      fieldManager: CONTROLLER,
      seriesIntervalMs: 60_000,
    });
    await rec.event(run, 'Normal', 'AIBOMStored', 'stored at s3://bucket/x');
    for (let i = 0; i < 50; i++) await rec.event(run, 'Warning', 'SigningFailed', 'key not found');
    await rec.close();

    // The core/v1 view with the field selector `kubectl describe run` uses.
    const list = await client.request<{ items: CoreEvent[] }>({
      method: 'GET',
      path: `/api/v1/namespaces/${ns}/events`,
      query: { fieldSelector: `involvedObject.uid=${run.metadata.uid}` },
    });
    const byReason = Object.fromEntries(list.items.map((e) => [e.reason, e]));
    expect(list.items).toHaveLength(2);
    expect(byReason.AIBOMStored).toMatchObject({
      type: 'Normal',
      message: 'stored at s3://bucket/x',
      reportingComponent: 'vault.service.dev/controller',
    });
    expect(byReason.AIBOMStored!.series).toBeUndefined();
    expect(byReason.SigningFailed).toMatchObject({
      type: 'Warning',
      involvedObject: { name: 'evented', kind: 'Run' },
      series: { count: 50 },
    });
  });
});
