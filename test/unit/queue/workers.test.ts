import { pino } from 'pino';
import { Registry } from 'prom-client';
import { describe, expect, it } from 'vitest';
import { ExponentialRateLimiter } from '../../../src/queue/ratelimit.ts';
import { runWorkers } from '../../../src/queue/workers.ts';
import { WorkQueue } from '../../../src/queue/workqueue.ts';

const logger = pino({ level: 'silent' });
const tick = (ms = 0) => new Promise((r) => setTimeout(r, ms));

async function until(cond: () => boolean, ms = 2000): Promise<void> {
  const end = Date.now() + ms;
  while (!cond()) {
    if (Date.now() > end) throw new Error('condition not met in time');
    await tick(2);
  }
}

function metricValue(text: string, line: RegExp): number {
  const m = text.split('\n').find((l) => line.test(l));
  return m === undefined ? 0 : Number(m.split(' ').pop());
}

describe('runWorkers: bounded reconciles and fair turns', () => {
  it('a reconcile that returns more goes behind other namespaces: a small key is done long before big ones', async () => {
    const q = new WorkQueue({ rateLimiter: new ExponentialRateLimiter(1, 10) });
    const batchesLeft = new Map(Array.from({ length: 5 }, (_, i) => [`hog/big-${i}`, 20]));
    const order: string[] = [];
    const done = runWorkers(
      q,
      2,
      async (key) => {
        await tick(1);
        const left = batchesLeft.get(key);
        if (left === undefined || left === 1) {
          order.push(key);
          return undefined;
        }
        batchesLeft.set(key, left - 1);
        return { more: true };
      },
      { logger },
    );
    for (const k of batchesLeft.keys()) q.add(k);
    await until(() => [...batchesLeft.values()].some((n) => n < 18));
    q.add('small/tiny');
    await until(() => order.length === 6, 10_000);
    expect(order[0]).toBe('small/tiny');
    await q.shutDown();
    await done;
  });
});

describe('runWorkers: a backlog limit below the workers', () => {
  it('a fresh key starts while every backlog reconcile it may run beside is still held, and the held ones keep their limit', async () => {
    const q = new WorkQueue({ backlogLimit: 2 });
    const release = new Map<string, () => void>();
    const started: string[] = [];
    const done = runWorkers(
      q,
      3,
      (key) =>
        new Promise<void>((resolve) => {
          started.push(key);
          release.set(key, resolve);
        }),
      { logger },
    );
    for (let i = 0; i < 10; i++) q.add(`old/${i}`, 'backlog');
    await until(() => started.length === 2);
    await tick(5);
    expect(started).toEqual(['old/0', 'old/1']); // the third worker is kept for fresh changes
    q.add('new/0');
    await until(() => started.length === 3);
    expect(started[2]).toBe('new/0'); // no backlog reconcile had to finish first
    release.get('new/0')!();
    await tick(5);
    expect(started).toHaveLength(3);
    release.get('old/0')!();
    await until(() => started.length === 4);
    expect(started[3]).toBe('old/2');
    const stopped = q.shutDown({ drain: false });
    for (const r of release.values()) r();
    await stopped;
    await done;
  });
});

describe('runWorkers: the rest of a bounded reconcile keeps its level', () => {
  it('a backlog key that returns more stays backlog: a fresh key added meanwhile goes before its next batch', async () => {
    const q = new WorkQueue();
    const order: string[] = [];
    let batches = 3;
    let release: (() => void) | undefined;
    const done = runWorkers(
      q,
      1,
      async (key) => {
        order.push(key);
        if (key === 'old/big' && batches === 3) await new Promise<void>((r) => (release = r));
        if (key === 'old/big' && --batches > 0) return { more: true };
        return undefined;
      },
      { logger },
    );
    q.add('old/big', 'backlog');
    q.add('old/other', 'backlog');
    await until(() => release !== undefined);
    q.add('new/0'); // a fresh change while the first batch runs
    release!();
    await until(() => order.length === 5);
    // The fresh key first; the rest of old/big behind old/other, in the backlog's FIFO (at the normal
    // level it would have gone before old/other).
    expect(order).toEqual(['old/big', 'new/0', 'old/other', 'old/big', 'old/big']);
    await q.shutDown();
    await done;
  });
});

describe('runWorkers', () => {
  it('never runs one key on two workers at once, and re-runs a key added during its reconcile', async () => {
    const q = new WorkQueue({ rateLimiter: new ExponentialRateLimiter(1, 10) });
    let running = 0;
    let maxParallelForA = 0;
    let runsOfA = 0;
    const done = runWorkers(
      q,
      4,
      async (key) => {
        if (key === 'a') {
          running++;
          runsOfA++;
          maxParallelForA = Math.max(maxParallelForA, running);
          if (runsOfA === 1) for (let i = 0; i < 5; i++) q.add('a'); // five events while processing
          await tick(10);
          running--;
        }
      },
      { logger },
    );
    q.add('a');
    q.add('b');
    await until(() => runsOfA === 2 && q.len() === 0);
    await tick(30);
    expect(runsOfA).toBe(2); // once, plus exactly once more for the events during the first run
    expect(maxParallelForA).toBe(1);
    await q.shutDown();
    await done;
  });

  it('turns throws (sync and async) into rate-limited retries and keeps going; success forgets the backoff', async () => {
    const registry = new Registry();
    const q = new WorkQueue({ name: 'runs', registry, rateLimiter: new ExponentialRateLimiter(1, 10) });
    const attempts = new Map<string, number>();
    const done = runWorkers(
      q,
      2,
      (key) => {
        const n = (attempts.get(key) ?? 0) + 1;
        attempts.set(key, n);
        if (key === 'sync' && n < 3) throw new Error('sync boom');
        if (key === 'async' && n < 4) return Promise.reject(new Error('async boom'));
        return undefined;
      },
      { logger, registry },
    );
    q.add('sync');
    q.add('async');
    q.add('ok');
    await until(() => attempts.get('sync') === 3 && attempts.get('async') === 4);
    await until(() => q.numRequeues('async') === 0);
    expect(q.numRequeues('sync')).toBe(0);
    const text = await registry.metrics();
    expect(metricValue(text, /^controller_runtime_reconcile_errors_total\{controller="runs"\}/)).toBe(5);
    expect(metricValue(text, /^controller_runtime_reconcile_total\{controller="runs",result="error"\}/)).toBe(
      5,
    );
    expect(
      metricValue(text, /^controller_runtime_reconcile_total\{controller="runs",result="success"\}/),
    ).toBe(3);
    expect(metricValue(text, /^controller_runtime_reconcile_time_seconds_count\{controller="runs"\}/)).toBe(
      8,
    );
    expect(metricValue(text, /^workqueue_retries_total\{name="runs"\}/)).toBe(5);
    await q.shutDown();
    await done;
  });

  it('honours requeue and requeueAfterMs', async () => {
    const q = new WorkQueue({ rateLimiter: new ExponentialRateLimiter(1, 10) });
    const times: number[] = [];
    const done = runWorkers(
      q,
      1,
      (key) => {
        times.push(Date.now());
        if (key === 'after' && times.length === 1) return { requeueAfterMs: 50 };
        if (key === 'after' && times.length === 2) return { requeue: true };
        return undefined;
      },
      { logger },
    );
    q.add('after');
    await until(() => times.length === 3);
    expect(times[1]! - times[0]!).toBeGreaterThanOrEqual(45);
    expect(q.numRequeues('after')).toBe(0); // the final success forgot it
    await q.shutDown();
    await done;
  });

  it('stops on abort: the queue is not drained and the reconciler sees the signal', async () => {
    const q = new WorkQueue();
    const ac = new AbortController();
    const seen: string[] = [];
    let sawAbort = false;
    const done = runWorkers(
      q,
      1,
      async (key, signal) => {
        seen.push(key);
        await new Promise<void>((resolve) =>
          signal.addEventListener('abort', () => resolve(), { once: true }),
        );
        sawAbort = signal.aborted;
        throw new Error('aborted midway'); // not retried: we are shutting down
      },
      { logger, signal: ac.signal },
    );
    q.add('a');
    q.add('b');
    await until(() => seen.length === 1);
    ac.abort();
    await done;
    expect(seen).toEqual(['a']);
    expect(sawAbort).toBe(true);
    expect(q.shuttingDown).toBe(true);
  });

  it('rejects a worker count below one', async () => {
    await expect(runWorkers(new WorkQueue(), 0, () => undefined, { logger })).rejects.toThrow(RangeError);
  });
});
