import fc from 'fast-check';
import { Registry } from 'prom-client';
import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import { ExponentialRateLimiter } from '../../../src/queue/ratelimit.ts';
import { WorkQueue } from '../../../src/queue/workqueue.ts';

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

describe('WorkQueue: fair across namespaces', () => {
  const drain = async (q: WorkQueue, n: number): Promise<string[]> => {
    const out: string[] = [];
    for (let i = 0; i < n; i++) {
      const k = (await q.get())!;
      out.push(k);
      q.done(k);
    }
    return out;
  };

  it('serves namespaces round-robin, FIFO within each', async () => {
    const q = new WorkQueue();
    for (let i = 0; i < 4; i++) q.add(`hog/r${i}`);
    q.add('b/one');
    q.add('c/one');
    q.add('c/two');
    expect(q.len()).toBe(7);
    expect(await drain(q, 7)).toEqual(['hog/r0', 'b/one', 'c/one', 'hog/r1', 'c/two', 'hog/r2', 'hog/r3']);
  });

  it('a key of a quiet namespace waits for at most one key of each busy one, however many they re-queue', async () => {
    const q = new WorkQueue();
    for (let i = 0; i < 50; i++) q.add(`hog/r${i}`);
    const first = (await q.get())!;
    q.add('small/run');
    // The hog's reconcile yields and re-queues itself (a bounded batch): it goes behind the small key.
    q.add(first);
    q.done(first);
    expect(await drain(q, 2)).toEqual(['hog/r1', 'small/run']);
  });

  it('keys without a namespace share one FIFO (the transparency queue of run ids)', async () => {
    const q = new WorkQueue();
    for (const k of ['u1', 'u2', 'u3']) q.add(k);
    expect(await drain(q, 3)).toEqual(['u1', 'u2', 'u3']);
  });

  it('shards by the given function', async () => {
    const q = new WorkQueue({ shard: (k) => k[0]! });
    for (const k of ['a1', 'a2', 'b1']) q.add(k);
    expect(await drain(q, 3)).toEqual(['a1', 'b1', 'a2']);
  });

  it('property: whatever is queued, every key comes out once, FIFO per namespace, and no namespace is skipped', async () => {
    await fc.assert(
      fc.asyncProperty(
        fc.array(fc.tuple(fc.constantFrom('a', 'b', 'c', 'd'), fc.integer({ min: 0, max: 20 })), {
          maxLength: 60,
        }),
        async (adds) => {
          const q = new WorkQueue();
          const keys = [...new Set(adds.map(([ns, n]) => `${ns}/k${n}`))];
          for (const k of keys) q.add(k);
          const out = await drain(q, keys.length);
          expect([...out].sort()).toEqual([...keys].sort());
          const byNs = (list: string[], ns: string) => list.filter((k) => k.startsWith(`${ns}/`));
          for (const ns of ['a', 'b', 'c', 'd']) expect(byNs(out, ns)).toEqual(byNs(keys, ns));
          // Between two keys of one namespace, every other namespace with keys left is served once.
          const left = new Map(['a', 'b', 'c', 'd'].map((ns) => [ns, byNs(keys, ns).length]));
          const since = new Map<string, Set<string>>();
          for (const k of out) {
            const ns = k.split('/')[0]!;
            const seen = since.get(ns);
            if (seen) {
              for (const [other, n] of left) if (other !== ns && n > 0) expect(seen.has(other)).toBe(true);
            }
            left.set(ns, left.get(ns)! - 1);
            since.set(ns, new Set());
            for (const [other, set] of since) if (other !== ns) set.add(ns);
          }
        },
      ),
    );
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

describe('WorkQueue: fresh changes before the backlog', () => {
  it('hands out every normal key before any backlog key, whenever they were added', async () => {
    const q = new WorkQueue();
    for (let i = 0; i < 5; i++) q.add(`old/${i}`, 'backlog');
    q.add('ns/fresh');
    expect(q.lenAt('backlog')).toBe(5);
    expect(q.lenAt('normal')).toBe(1);
    expect(await q.get()).toBe('ns/fresh');
    expect(await q.get()).toBe('old/0');
    q.add('ns/fresh2');
    expect(await q.get()).toBe('ns/fresh2');
    expect(await q.get()).toBe('old/1');
    expect(q.len()).toBe(3);
  });

  it('a queued backlog key added as normal moves ahead once; a normal key added as backlog stays normal', async () => {
    const q = new WorkQueue();
    q.add('a/1', 'backlog');
    q.add('a/2', 'backlog');
    q.add('a/3', 'backlog');
    q.add('b/1');
    q.add('a/3'); // its Run changed: promoted, and still queued once
    q.add('b/1', 'backlog'); // a resync of a key already queued as fresh does not demote it
    expect(q.len()).toBe(4);
    expect(q.lenAt('normal')).toBe(2);
    const order: string[] = [];
    for (let i = 0; i < 4; i++) order.push((await q.get())!);
    expect(order).toEqual(['b/1', 'a/3', 'a/1', 'a/2']);
    expect(q.len()).toBe(0);
  });

  it('a processing key re-added goes back at the highest priority asked for meanwhile', async () => {
    const q = new WorkQueue();
    q.add('a/1', 'backlog');
    expect(await q.get()).toBe('a/1');
    q.add('a/1', 'backlog');
    q.add('a/1'); // fresh change while processing
    q.add('z/9', 'backlog');
    q.done('a/1');
    expect(await q.get()).toBe('a/1');
    q.done('a/1');
    q.add('a/2', 'backlog');
    expect(await q.get()).toBe('z/9');
  });

  it('is fair across namespaces within each level', async () => {
    const q = new WorkQueue();
    for (let i = 0; i < 3; i++) q.add(`big/${i}`, 'backlog');
    q.add('small/0', 'backlog');
    for (let i = 0; i < 3; i++) q.add(`loud/${i}`);
    q.add('quiet/0');
    const order: string[] = [];
    for (let i = 0; i < 8; i++) order.push((await q.get())!);
    expect(order).toEqual(['loud/0', 'quiet/0', 'loud/1', 'loud/2', 'big/0', 'small/0', 'big/1', 'big/2']);
  });

  it('never loses or duplicates a key, and hands out normal before backlog (random adds)', async () => {
    await fc.assert(
      fc.asyncProperty(
        fc.array(fc.tuple(fc.integer({ min: 0, max: 7 }), fc.boolean()), { maxLength: 60 }),
        async (ops) => {
          const q = new WorkQueue();
          const level = new Map<string, 'normal' | 'backlog'>();
          for (const [k, fresh] of ops) {
            const key = `ns${k % 3}/k${k}`;
            if (fresh || !level.has(key)) level.set(key, fresh ? 'normal' : (level.get(key) ?? 'backlog'));
            q.add(key, fresh ? 'normal' : 'backlog');
          }
          expect(q.len()).toBe(level.size);
          const out: string[] = [];
          for (let i = 0; i < level.size; i++) out.push((await q.get())!);
          expect(new Set(out)).toEqual(new Set(level.keys()));
          expect(out).toHaveLength(level.size);
          const normals = [...level.values()].filter((l) => l === 'normal').length;
          expect(out.slice(0, normals).every((k) => level.get(k) === 'normal')).toBe(true);
        },
      ),
    );
  });
});

describe('WorkQueue: a backlog limit keeps workers free for fresh changes', () => {
  it('refuses a limit that is not a whole number of at least 1', () => {
    for (const bad of [0, -1, 1.5, Number.NaN])
      expect(() => new WorkQueue({ backlogLimit: bad })).toThrow(/backlogLimit must be a whole number/);
  });

  it('a queued backlog key that changes goes to a worker waiting for a backlog slot at once', async () => {
    const q = new WorkQueue({ backlogLimit: 1 });
    q.add('a/1', 'backlog');
    q.add('a/2', 'backlog');
    expect(await q.get()).toBe('a/1');
    const w = q.get();
    expect(await peek(w)).toBe('pending');
    q.add('a/2'); // a watch event for the queued backlog key: it is fresh now
    expect(await w).toBe('a/2');
  });

  it('hands out at most the limit of backlog keys at once; a worker waiting then takes the next fresh key at once', async () => {
    const q = new WorkQueue({ backlogLimit: 2 });
    for (let i = 0; i < 5; i++) q.add(`old/${i}`, 'backlog');
    expect(await q.get()).toBe('old/0');
    expect(await q.get()).toBe('old/1');
    const third = q.get();
    expect(await peek(third)).toBe('pending'); // two backlog keys processing: the limit
    expect(q.len()).toBe(3);
    q.add('new/0');
    expect(await third).toBe('new/0');
    const fourth = q.get();
    expect(await peek(fourth)).toBe('pending');
    q.done('new/0'); // a fresh key's done frees no backlog slot
    expect(await peek(fourth)).toBe('pending');
    q.done('old/0');
    expect(await fourth).toBe('old/2');
  });

  it('counts a key by the level it was handed out at, until done, whatever it is re-added as meanwhile', async () => {
    const q = new WorkQueue({ backlogLimit: 1 });
    q.add('a/1', 'backlog');
    q.add('a/2', 'backlog');
    expect(await q.get()).toBe('a/1');
    q.add('a/1'); // a change while processing: dirty, at normal
    const next = q.get();
    expect(await peek(next)).toBe('pending'); // a/1 still holds the one backlog slot
    q.done('a/1'); // back at normal, and the slot is free: a/1 goes first
    expect(await next).toBe('a/1');
    expect(await q.get()).toBe('a/2'); // a/1 now counts as normal: the backlog slot is free
  });

  it('drains a limited backlog on shutdown and then releases the workers that waited for a slot', async () => {
    const q = new WorkQueue({ backlogLimit: 1 });
    q.add('a/1', 'backlog');
    q.add('a/2', 'backlog');
    expect(await q.get()).toBe('a/1');
    const drained = q.shutDown();
    const idle = q.get(); // a second worker, after the shutdown: waits for the slot
    expect(await peek(idle)).toBe('pending');
    q.done('a/1');
    expect(await idle).toBe('a/2');
    const last = q.get();
    q.done('a/2');
    expect(await last).toBeUndefined();
    await drained;
  });

  it('property: never more than the limit of backlog keys processing, no key lost or handed out twice, and no worker waits while a key it may take is queued', async () => {
    await fc.assert(
      fc.asyncProperty(
        fc.integer({ min: 1, max: 3 }),
        fc.array(
          fc.oneof(
            fc.record({
              op: fc.constant('add' as const),
              k: fc.integer({ min: 0, max: 9 }),
              fresh: fc.boolean(),
            }),
            fc.record({ op: fc.constant('get' as const) }),
            fc.record({ op: fc.constant('done' as const), pick: fc.nat() }),
          ),
          { maxLength: 80 },
        ),
        async (limit, ops) => {
          const q = new WorkQueue({ backlogLimit: limit });
          const processing = new Map<string, 'normal' | 'backlog'>(); // key → level handed out at
          const queuedLevel = new Map<string, 'normal' | 'backlog'>(); // what the model expects queued
          const dirty = new Map<string, 'normal' | 'backlog'>(); // re-added while processing
          const waiting: Array<Promise<string | undefined>> = [];
          const handedOut: string[] = [];
          const backlogCount = (): number => [...processing.values()].filter((l) => l === 'backlog').length;
          const receive = (key: string): void => {
            expect(processing.has(key)).toBe(false); // never to two workers at once
            const level = queuedLevel.get(key);
            expect(level).toBeDefined(); // never a key that was not queued
            queuedLevel.delete(key);
            // A backlog key only starts below the limit that applies when it is handed out.
            if (level === 'backlog') expect(backlogCount()).toBeLessThan(limit);
            processing.set(key, level!);
            handedOut.push(key);
          };
          const settle = async (): Promise<void> => {
            for (let i = 0; i < waiting.length;) {
              const got = await peek(waiting[i]!);
              if (got === 'pending') i++;
              else {
                receive(got!);
                void waiting.splice(i, 1);
              }
            }
          };
          for (const o of ops) {
            if (o.op === 'add') {
              const key = `ns${o.k % 3}/k${o.k}`;
              const level = o.fresh ? 'normal' : 'backlog';
              const raise = (m: Map<string, 'normal' | 'backlog'>): void => {
                if (m.get(key) !== 'normal') m.set(key, level);
              };
              if (processing.has(key)) raise(dirty);
              else raise(queuedLevel);
              q.add(key, level);
            } else if (o.op === 'get') {
              waiting.push(q.get());
            } else if (processing.size > 0) {
              const key = [...processing.keys()][o.pick % processing.size]!;
              processing.delete(key);
              const back = dirty.get(key);
              dirty.delete(key);
              if (back !== undefined) queuedLevel.set(key, back);
              q.done(key);
            }
            await settle();
            const inBacklog = backlogCount();
            expect(inBacklog).toBeLessThanOrEqual(limit);
            if (waiting.length > 0) {
              // A worker waits: nothing fresh is queued, and backlog keys only when the limit is reached.
              expect([...queuedLevel.values()].includes('normal')).toBe(false);
              if (queuedLevel.size > 0) expect(inBacklog).toBe(limit);
            }
            expect(q.len()).toBe(queuedLevel.size);
          }
        },
      ),
      { numRuns: 2000 },
    );
  });
});
