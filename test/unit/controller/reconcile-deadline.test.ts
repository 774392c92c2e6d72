/**
 * "A hung reconcile must not hold a worker forever" (issue 10, item 3): with ONE worker, a Run whose
 * reconcile never returns is given up after the deadline and the worker goes on to the other Runs;
 * the hung key is retried with backoff, but never reconciled twice at once while the first attempt
 * still runs. Real WorkQueue and runWorkers; the reconciler is a function of the test.
 */
import { pino } from 'pino';
import { Registry } from 'prom-client';
import { describe, expect, it } from 'vitest';
import { ReconcileTimeoutError, withReconcileDeadline } from '../../../src/queue/deadline.ts';
import { runWorkers, WorkQueue } from '../../../src/queue/index.ts';

describe('reconcile deadline', () => {
  it('one worker: a reconcile that never returns does not stop the others; the key is not run twice at once', async () => {
    const registry = new Registry();
    const queue = new WorkQueue({ name: 'runs', registry });
    const started: string[] = [];
    const done = new Set<string>();
    let concurrentHung = 0;
    let hungRunning = 0;
    let release: () => void = () => undefined;
    const hung = new Promise<void>((r) => (release = r));
    const overruns: string[] = [];
    const reconcile = withReconcileDeadline(
      async (key) => {
        started.push(key);
        if (key === 'ns/hung') {
          hungRunning++;
          concurrentHung = Math.max(concurrentHung, hungRunning);
          await hung;
          hungRunning--;
          return;
        }
        done.add(key);
      },
      100,
      (key) => overruns.push(key),
    );
    const stop = new AbortController();
    const workers = runWorkers(queue, 1, reconcile, {
      logger: pino({ level: 'silent' }),
      registry,
      name: 'runs',
      signal: stop.signal,
    });
    queue.add('ns/hung');
    for (let i = 0; i < 5; i++) queue.add(`ns/other-${i}`);
    // Every other Run is reconciled by the single worker while the first reconcile still hangs.
    await waitUntil(() => done.size === 5);
    expect(hungRunning).toBe(1);
    expect(overruns).toContain('ns/hung');
    // The hung key comes back (backoff) while its first attempt runs: requeued, not started again.
    await waitUntil(() => queue.numRequeues('ns/hung') >= 2);
    expect(concurrentHung).toBe(1);
    expect(started.filter((k) => k === 'ns/hung')).toHaveLength(1);
    const errors = await registry.getSingleMetric('controller_runtime_reconcile_errors_total')?.get();
    expect(errors?.values.find((v) => v.labels.controller === 'runs')?.value).toBe(1);
    // Once the first attempt ends, the key is reconciled again.
    release();
    await waitUntil(() => started.filter((k) => k === 'ns/hung').length === 2);
    stop.abort();
    await workers;
  });

  it('a reconcile within its deadline returns (or throws) as it would without one', async () => {
    const ok = withReconcileDeadline(
      () => Promise.resolve(),
      1_000,
      () => undefined,
    );
    await expect(ok('a')).resolves.toBeUndefined();
    const boom = new Error('boom');
    const failing = withReconcileDeadline(
      () => Promise.reject(boom),
      1_000,
      () => undefined,
    );
    await expect(failing('a')).rejects.toBe(boom);
    const slow = withReconcileDeadline(
      () => new Promise<void>(() => undefined),
      20,
      () => undefined,
    );
    await expect(slow('b')).rejects.toBeInstanceOf(ReconcileTimeoutError);
    await expect(slow('b')).resolves.toEqual({ requeue: true });
  });
});

async function waitUntil(cond: () => boolean): Promise<void> {
  while (!cond()) await new Promise((r) => setTimeout(r, 10));
}
