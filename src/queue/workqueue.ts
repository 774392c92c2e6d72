import type { Registry } from 'prom-client';
import { workqueueMetrics } from '../metrics/runtime.ts';
import { defaultControllerRateLimiter, type RateLimiter } from './ratelimit.ts';

export interface WorkQueueOptions {
  /** Label of the queue's metrics (`workqueue_*{name}`). */
  name?: string;
  rateLimiter?: RateLimiter;
  registry?: Registry;
  /**
   * The tenant a key belongs to; keys are handed out round-robin across tenants. Default: the
   * namespace of a `namespace/name` key (`''` for keys without a slash: one FIFO for all).
   */
  shard?: (key: string) => string;
  /**
   * At most this many `backlog` keys are processing at once (default: no limit). With n workers and
   * a limit of n − 1, one worker is always free for a fresh change however long the backlog is.
   */
  backlogLimit?: number;
}

/**
 * `normal`: a change just seen (a watch event, a retry, a repair request). `backlog`: work found by
 * an initial list, a relist or a periodic resync. Normal keys are always handed out first, so a
 * Run that finishes while a restarted controller works through thousands of listed Runs waits for
 * at most the keys in flight, not for the backlog; with a `backlogLimit` below the number of
 * workers it does not wait for a worker at all.
 */
export type Priority = 'normal' | 'backlog';

/** The namespace of a `namespace/name` key; `''` for cluster-scoped or plain keys. */
export const namespaceOf = (key: string): string => {
  const slash = key.indexOf('/');
  return slash < 0 ? '' : key.slice(0, slash);
};

/**
 * A keyed work queue with client-go's semantics, fair across tenants.
 *
 * Invariants:
 * - A key is at most once in the queue (`dirty` = queued or to be re-queued): adding a queued key
 *   is a no-op, so a burst of events for one object costs one reconcile.
 * - A key is never handed to two workers at once (`processing`). Adding it while it is processing
 *   only marks it dirty; `done()` puts it back so it is processed once more, after the current run.
 * - Fairness: each shard (tenant: a namespace) has its own FIFO, and `get()` serves the shards
 *   round-robin, one key per turn. A shard served goes to the back of the line, so a key of a shard
 *   with nothing queued waits for at most one key of each other shard, however many keys one tenant
 *   queues (or re-queues: a reconcile that stops after a bounded batch re-adds its key behind them).
 * - Priority: a `normal` key is handed out before any `backlog` key (each level is fair across
 *   shards as above). Adding a queued backlog key as normal moves it to the normal level; adding a
 *   queued normal key as backlog leaves it normal. A key processing when re-added keeps the higher
 *   of the priorities asked for until `done()` puts it back.
 * - Backlog limit: at most `backlogLimit` keys handed out at the backlog level are processing at
 *   once (counted by the level a key was handed out at, until its `done()`). Queued backlog keys
 *   beyond it wait, and so do the workers asking for them, while any normal key goes out at once.
 * - Waiters exist only while nothing queued may be handed out (the queue is empty, or holds only
 *   backlog keys over the limit); a key that may goes straight to the oldest waiter.
 * - After `shutDown()` nothing new is accepted; queued keys are still handed out when draining,
 *   and `get()` returns undefined once the queue is empty.
 */
export class WorkQueue {
  readonly name: string;
  readonly #rateLimiter: RateLimiter;
  readonly #metrics: ReturnType<typeof workqueueMetrics> | undefined;
  readonly #shardOf: (key: string) => string;
  /** Per priority level: non-empty shards in turn order (Map insertion order), each a FIFO of keys. */
  readonly #levels: Record<Priority, Map<string, string[]>> = { normal: new Map(), backlog: new Map() };
  /** The level of every queued key and of every dirty processing key (the one it goes back to). */
  readonly #priority = new Map<string, Priority>();
  #length = 0;
  readonly #enqueuedAt = new Map<string, number>();
  readonly #dirty = new Set<string>();
  readonly #processing = new Set<string>();
  readonly #backlogLimit: number;
  /** Processing keys handed out at the backlog level (what the limit counts). */
  readonly #backlogProcessing = new Set<string>();
  readonly #waiters: Array<(key: string | undefined) => void> = [];
  readonly #delayed = new Map<string, { at: number; timer: ReturnType<typeof setTimeout> }>();
  #shuttingDown = false;
  #drained: Array<() => void> = [];

  constructor(options: WorkQueueOptions = {}) {
    this.name = options.name ?? 'default';
    this.#rateLimiter = options.rateLimiter ?? defaultControllerRateLimiter();
    this.#metrics = options.registry ? workqueueMetrics(options.registry) : undefined;
    this.#shardOf = options.shard ?? namespaceOf;
    const limit = options.backlogLimit ?? Infinity;
    if (!(limit === Infinity || (Number.isInteger(limit) && limit >= 1)))
      throw new RangeError(`backlogLimit must be a whole number of at least 1, not ${limit}`);
    this.#backlogLimit = limit;
  }

  get shuttingDown(): boolean {
    return this.#shuttingDown;
  }

  /** Keys waiting for a worker (not those being processed or scheduled for later). */
  len(): number {
    return this.#length;
  }

  /** Keys waiting at `priority`. */
  lenAt(priority: Priority): number {
    let n = 0;
    for (const keys of this.#levels[priority].values()) n += keys.length;
    return n;
  }

  /** The level a processing key was handed out at (undefined when it is not processing). */
  processingLevel(key: string): Priority | undefined {
    if (this.#backlogProcessing.has(key)) return 'backlog';
    return this.#processing.has(key) ? 'normal' : undefined;
  }

  add(key: string, priority: Priority = 'normal'): void {
    if (this.#shuttingDown) return;
    if (this.#dirty.has(key)) {
      if (priority === 'normal' && this.#priority.get(key) === 'backlog') this.#promote(key);
      return;
    }
    this.#dirty.add(key);
    this.#metrics?.adds.inc({ name: this.name });
    this.#priority.set(key, priority);
    if (this.#processing.has(key)) return; // done() re-queues it
    this.#push(key);
  }

  /** A queued (or dirty processing) backlog key becomes normal. */
  #promote(key: string): void {
    this.#priority.set(key, 'normal');
    if (this.#processing.has(key)) return; // done() re-queues it at its new level
    const shard = this.#shardOf(key);
    const keys = this.#levels.backlog.get(shard);
    const at = keys?.indexOf(key) ?? -1;
    if (keys === undefined || at < 0) return;
    keys.splice(at, 1);
    if (keys.length === 0) this.#levels.backlog.delete(shard);
    this.#length -= 1;
    this.#enqueue(key);
  }

  /**
   * Adds `key` after `ms`. Of several pending delays for one key the earliest wins, so a long
   * backoff never postpones an explicit sooner request (and vice versa no duplicate timers pile up).
   */
  addAfter(key: string, ms: number): void {
    if (this.#shuttingDown) return;
    if (ms <= 0) {
      this.add(key);
      return;
    }
    const at = Date.now() + ms;
    const pending = this.#delayed.get(key);
    if (pending !== undefined) {
      if (pending.at <= at) return;
      clearTimeout(pending.timer);
    }
    const timer = setTimeout(() => {
      this.#delayed.delete(key);
      this.add(key);
    }, ms);
    this.#delayed.set(key, { at, timer });
  }

  /** Adds `key` after its rate-limited backoff (one more failure of `key`). */
  addRateLimited(key: string): void {
    if (this.#shuttingDown) return;
    this.#metrics?.retries.inc({ name: this.name });
    this.addAfter(key, this.#rateLimiter.when(key));
  }

  /** Resets the backoff of `key`; call it when `key` was reconciled successfully. */
  forget(key: string): void {
    this.#rateLimiter.forget(key);
  }

  numRequeues(key: string): number {
    return this.#rateLimiter.numRequeues(key);
  }

  /** The next key to process, or undefined once shut down and empty. Call `done(key)` after. */
  get(): Promise<string | undefined> {
    const next = this.#next();
    if (next !== undefined) return Promise.resolve(this.#take(next));
    if (this.#shuttingDown && this.#length === 0) return Promise.resolve(undefined);
    return new Promise((resolve) => this.#waiters.push(resolve));
  }

  /** Ends processing of `key`; if it was added meanwhile it goes back into the queue. */
  done(key: string): void {
    if (!this.#processing.delete(key)) return;
    const slotFreed = this.#backlogProcessing.delete(key);
    if (this.#dirty.has(key)) this.#push(key);
    // A backlog slot is free again: a worker waiting for one may take a queued backlog key.
    else if (slotFreed) this.#dispatch();
    this.#checkDrained();
  }

  /**
   * Stops accepting keys and cancels delayed adds. With `drain` (default) workers still receive the
   * keys already queued; without it those are dropped. Resolves when no key is queued or processing.
   */
  shutDown(options: { drain?: boolean } = {}): Promise<void> {
    this.#shuttingDown = true;
    for (const { timer } of this.#delayed.values()) clearTimeout(timer);
    this.#delayed.clear();
    if (options.drain === false) {
      this.#levels.normal.clear();
      this.#levels.backlog.clear();
      this.#priority.clear();
      this.#length = 0;
      this.#enqueuedAt.clear();
      this.#dirty.clear(); // also keeps processing keys from coming back
      this.#setDepth();
    }
    // Workers waiting now would wait forever, or for backlog slots: those processing drain the rest.
    for (const w of this.#waiters.splice(0)) w(undefined);
    const drained = new Promise<void>((resolve) => this.#drained.push(resolve));
    this.#checkDrained();
    return drained;
  }

  #push(key: string): void {
    this.#enqueuedAt.set(key, Date.now());
    this.#enqueue(key);
  }

  /** Hands queued keys to waiting workers while there are both (and the backlog limit allows). */
  #dispatch(): void {
    while (this.#waiters.length > 0) {
      const next = this.#next();
      if (next === undefined) return;
      this.#waiters.shift()!(this.#take(next));
    }
  }

  /**
   * Appends `key` to its shard's FIFO at its priority level, then hands out what a waiting worker
   * may take (a new key, or one promoted to normal past a worker waiting for a backlog slot).
   */
  #enqueue(key: string): void {
    const shards = this.#levels[this.#priority.get(key) ?? 'normal'];
    const shard = this.#shardOf(key);
    const keys = shards.get(shard);
    if (keys) keys.push(key);
    else shards.set(shard, [key]);
    this.#length += 1;
    this.#setDepth();
    this.#dispatch();
  }

  /**
   * The first key of the shard whose turn it is, normal level first (the backlog only below its
   * limit), with the level it was queued at; that shard goes to the back of its level's line.
   */
  #next(): { key: string; level: Priority } | undefined {
    for (const level of ['normal', 'backlog'] as const) {
      if (level === 'backlog' && this.#backlogProcessing.size >= this.#backlogLimit) break;
      const shards = this.#levels[level];
      const first = shards.entries().next();
      if (first.done) continue;
      const [shard, keys] = first.value;
      const key = keys.shift()!;
      shards.delete(shard);
      if (keys.length > 0) shards.set(shard, keys);
      this.#length -= 1;
      return { key, level };
    }
    return undefined;
  }

  #take({ key, level }: { key: string; level: Priority }): string {
    const since = this.#enqueuedAt.get(key);
    this.#enqueuedAt.delete(key);
    this.#dirty.delete(key);
    this.#priority.delete(key);
    this.#processing.add(key);
    if (level === 'backlog') this.#backlogProcessing.add(key);
    if (this.#metrics && since !== undefined) {
      this.#metrics.queueDuration.observe({ name: this.name }, (Date.now() - since) / 1000);
    }
    this.#setDepth();
    return key;
  }

  #setDepth(): void {
    this.#metrics?.depth.set({ name: this.name }, this.#length);
  }

  #checkDrained(): void {
    if (!this.#shuttingDown || this.#length > 0) return;
    // Workers that waited for a backlog slot while draining: nothing is left for them.
    for (const w of this.#waiters.splice(0)) w(undefined);
    if (this.#processing.size > 0) return;
    for (const resolve of this.#drained.splice(0)) resolve();
  }
}
