import { Registry } from 'prom-client';
import { describe, expect, it } from 'vitest';
import { conditionsEqual, setCondition, type Condition } from '../../../src/kube/conditions.ts';
import { Informer, objectKey, splitKey } from '../../../src/kube/informer.ts';
import { resourcePath } from '../../../src/kube/client.ts';
import { kubeListerWatcher } from '../../../src/kube/listwatch.ts';
import { applyStatus } from '../../../src/kube/status.ts';
import { runWorkers } from '../../../src/queue/workers.ts';
import { WorkQueue } from '../../../src/queue/workqueue.ts';
import {
  RUNS,
  adminClient,
  createRun,
  freshNamespace,
  getRun,
  labelRun,
  logger,
  metric,
  waitFor,
  type RunObject,
} from './helpers.ts';

/**
 * The primitives composed the way the Run reconciler will use them: informer → queue → workers →
 * conditions → SSA status. Proves the loop converges and then stays quiet: our own status writes come
 * back as watch events, and a reconcile that finds nothing to change must not write again.
 */
describe('informer + workqueue + workers + SSA status', () => {
  it('converges on every Run and makes no further writes once converged', async () => {
    const client = adminClient();
    const ns = await freshNamespace(client, 'loop');
    const registry = new Registry();
    const informer = new Informer<RunObject>({
      name: 'runs',
      listerWatcher: kubeListerWatcher(client, resourcePath(RUNS, { namespace: ns })),
      logger,
      registry,
      watchdogSeconds: 30,
      watchTimeoutSeconds: 20,
    });
    const queue = new WorkQueue({ name: 'runs', registry });
    informer.addHandler({
      onAdd: (o) => queue.add(objectKey(o)),
      onUpdate: (_, o) => queue.add(objectKey(o)),
      onDelete: (o) => queue.add(objectKey(o)),
    });
    let writes = 0;
    const reconcile = async (key: string) => {
      const run = informer.get(key);
      if (run === undefined) return; // deleted
      const current = (run.status?.conditions ?? []) as Condition[];
      const labelled = run.metadata.labels?.ready === 'yes';
      const desired = setCondition(
        current,
        {
          type: 'Ready',
          status: labelled ? 'True' : 'False',
          reason: labelled ? 'Labelled' : 'Waiting',
          message: labelled ? 'label ready=yes present' : 'waiting for label ready=yes',
          observedGeneration: run.metadata.generation ?? 0,
        },
        new Date(),
      );
      if (conditionsEqual(current, desired)) return; // write status only when it changed
      writes++;
      const { namespace, name } = splitKey(key);
      await applyStatus(
        client,
        RUNS,
        { namespace, name },
        { conditions: desired },
        { fieldManager: 'test-controller' },
      );
    };
    informer.start();
    const stop = new AbortController();
    await informer.waitForSync();
    const workers = runWorkers(queue, 2, reconcile, { logger, registry, signal: stop.signal });

    try {
      for (const n of ['r1', 'r2', 'r3']) await createRun(client, ns, n);
      const condition = (name: string) =>
        (informer.get(`${ns}/${name}`)?.status?.conditions as Condition[] | undefined)?.[0];
      await waitFor(
        () => ['r1', 'r2', 'r3'].every((n) => condition(n)?.reason === 'Waiting'),
        20_000,
        'convergence',
      );
      const firstTransition = condition('r2')!.lastTransitionTime;

      await labelRun(client, ns, 'r2', { ready: 'yes' });
      await waitFor(() => condition('r2')?.status === 'True', 20_000, 'r2 ready');
      expect((await getRun(client, ns, 'r2')).status?.conditions).toHaveLength(1);
      expect(condition('r2')!.lastTransitionTime >= firstTransition).toBe(true);

      // Quiet period: every write above echoed back as an event and was reconciled without a write.
      await new Promise((r) => setTimeout(r, 1500));
      const settled = writes;
      await new Promise((r) => setTimeout(r, 1500));
      expect(writes).toBe(settled);
      expect(writes).toBe(4); // three initial conditions and one flip
      const text = await registry.metrics();
      expect(metric(text, 'controller_runtime_reconcile_errors_total', 'controller="runs"')).toBe(0);
      expect(
        metric(text, 'controller_runtime_reconcile_total', 'controller="runs",result="success"'),
      ).toBeGreaterThanOrEqual(8);
      expect(metric(text, 'workqueue_depth', 'name="runs"')).toBe(0);
    } finally {
      stop.abort();
      await workers;
      await informer.stop();
    }
  });
});
