import { Registry } from 'prom-client';
import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import { ExponentialRateLimiter } from '../../../src/controller/runtime/ratelimit.ts';
import { WorkQueue } from '../../../src/controller/runtime/workqueue.ts';

/** The promise's value if it settles within a few microtask turns, else 'pending' (works with fake timers). */
async function peek<T>(p: Promise<T>): Promise<T | 'pending'> {
  let out: T | 'pending' = 'pending';
  void p.then((v) => (out = v));
  for (let i = 0; i < 10; i++) await Promise.resolve();
  return out;
}

describe('WorkQueue: dedupe and exclusivity', () => {
  it('hands out keys FIFO and holds a queued key once', async () => {
    const q = new WorkQueue();
    q.add('a');
    q.add('b');
    q.add('a');
    expect(q.len()).toBe(2);
    expect(await q.get()).toBe('a');
    expect(await q.get()).toBe('b');
    expect(q.len()).toBe(0);
  });

  it('never hands a processing key to a second worker; a re-add during processing runs once after', async () => {
    const q = new WorkQueue();
    q.add('a');
    const k = await q.get();
    expect(k).toBe('a');
    q.add('a');
    q.add('a');
    expect(q.len()).toBe(0); // dirty, not queued, while processing
    const second = q.get();
    expect(await peek(second)).toBe('pending');
    q.done('a');
    expect(await second).toBe('a');
    q.done('a');
    expect(q.len()).toBe(0);
    expect(await peek(q.get())).toBe('pending');
  });

  it('wakes a waiting worker on add', async () => {
    const q = new WorkQueue();
    const waiting = q.get();
    expect(await peek(waiting)).toBe('pending');
    q.add('x');
    expect(await waiting).toBe('x');
  });

  it('ignores done() for keys it did not hand out', () => {
    const q = new WorkQueue();
    q.add('a');
    q.done('a');
    expect(q.len()).toBe(1);
  });
});

describe('WorkQueue: delays and backoff (fake timers)', () => {
  beforeEach(() => vi.useFakeTimers());
  afterEach(() => vi.useRealTimers());

  it('addAfter adds when the delay elapses; the earliest of several delays wins', async () => {
    const q = new WorkQueue();
    q.addAfter('a', 1000);
    q.addAfter('a', 5000); // later: ignored
    q.addAfter('a', 200); // sooner: replaces
    await vi.advanceTimersByTimeAsync(199);
    expect(q.len()).toBe(0);
    await vi.advanceTimersByTimeAsync(1);
    expect(q.len()).toBe(1);
    expect(await q.get()).toBe('a');
    q.done('a');
    await vi.advanceTimersByTimeAsync(10_000);
    expect(q.len()).toBe(0); // the replaced timers did not fire
  });

  it('addAfter(<= 0) adds at once', () => {
    const q = new WorkQueue();
    q.addAfter('a', 0);
    expect(q.len()).toBe(1);
  });

  it('addRateLimited backs off exponentially per key until forget', async () => {
    const q = new WorkQueue({ rateLimiter: new ExponentialRateLimiter(5, 1_000_000) });
    const seen: number[] = [];
    for (let i = 0; i < 4; i++) {
      const t0 = Date.now();
      q.addRateLimited('a');
      const next = q.get();
      while ((await peek(next)) === 'pending') await vi.advanceTimersByTimeAsync(1);
      seen.push(Date.now() - t0);
      q.done('a');
    }
    expect(seen).toEqual([5, 10, 20, 40]);
    expect(q.numRequeues('a')).toBe(4);
    q.forget('a');
    expect(q.numRequeues('a')).toBe(0);
    q.addRateLimited('a');
    await vi.advanceTimersByTimeAsync(5);
    expect(q.len()).toBe(1);
  });

  it('caps the backoff at 1000 s', async () => {
    const q = new WorkQueue({ rateLimiter: new ExponentialRateLimiter(5, 1_000_000) });
    // While a delayed add is pending the earliest one wins, so these only count failures.
    for (let i = 0; i < 29; i++) q.addRateLimited('b');
    await vi.advanceTimersByTimeAsync(5);
    expect(await q.get()).toBe('b');
    q.done('b');
    q.addRateLimited('b'); // 30th failure: 5 ms × 2^29 is far above the cap
    await vi.advanceTimersByTimeAsync(999_999);
    expect(q.len()).toBe(0);
    await vi.advanceTimersByTimeAsync(1);
    expect(q.len()).toBe(1);
  });

  it('shutDown cancels delayed adds', async () => {
    const q = new WorkQueue();
    q.addAfter('a', 100);
    await q.shutDown();
    await vi.advanceTimersByTimeAsync(1000);
    expect(q.len()).toBe(0);
    expect(vi.getTimerCount()).toBe(0);
  });
});

describe('WorkQueue: shutdown', () => {
  it('drains: queued keys are still handed out, then get() returns undefined', async () => {
    const q = new WorkQueue();
    q.add('a');
    q.add('b');
    const a = await q.get();
    let drained = false;
    const done = q.shutDown().then(() => (drained = true));
    q.add('c'); // refused after shutdown
    expect(await q.get()).toBe('b');
    q.done('b');
    expect(await q.get()).toBeUndefined();
    expect(drained).toBe(false); // 'a' still processing
    q.done(a!);
    await done;
    expect(drained).toBe(true);
  });

  it('re-queues a dirty processing key while draining', async () => {
    const q = new WorkQueue();
    q.add('a');
    await q.get();
    q.add('a'); // dirty
    const done = q.shutDown();
    q.done('a');
    expect(await q.get()).toBe('a');
    q.done('a');
    await done;
  });

  it('without drain drops queued keys and releases waiters', async () => {
    const q = new WorkQueue();
    const waiter = q.get();
    q.add('a');
    q.add('b');
    expect(await waiter).toBe('a');
    q.add('a'); // dirty: must not come back after a non-draining shutdown
    const done = q.shutDown({ drain: false });
    expect(await q.get()).toBeUndefined();
    q.done('a');
    await done;
    expect(q.len()).toBe(0);
  });

  it('releases idle waiters on shutdown', async () => {
    const q = new WorkQueue();
    const w1 = q.get();
    const w2 = q.get();
    await q.shutDown();
    expect(await w1).toBeUndefined();
    expect(await w2).toBeUndefined();
  });
});

describe('WorkQueue: metrics', () => {
  it('exports depth, adds and retries labelled by queue name', async () => {
    const registry = new Registry();
    const q = new WorkQueue({ name: 'runs', registry });
    const other = new WorkQueue({ name: 'other', registry }); // same registry: metrics are shared, not re-registered
    q.add('a');
    q.add('b');
    q.add('a');
    other.add('z');
    let text = await registry.metrics();
    expect(text).toContain('workqueue_depth{name="runs"} 2');
    expect(text).toContain('workqueue_adds_total{name="runs"} 2');
    expect(text).toContain('workqueue_depth{name="other"} 1');
    await q.get();
    q.addRateLimited('a');
    q.done('a');
    text = await registry.metrics();
    expect(text).toContain('workqueue_depth{name="runs"} 1');
    expect(text).toContain('workqueue_retries_total{name="runs"} 1');
    expect(text).toMatch(/workqueue_queue_duration_seconds_count\{name="runs"\} 1/);
    await q.shutDown({ drain: false });
  });
});
