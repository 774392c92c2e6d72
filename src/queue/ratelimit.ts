/**
 * Rate limiters for requeues, as in client-go's `workqueue.DefaultControllerRateLimiter`: the delay
 * of a key is the larger of its own exponential backoff and the wait for a token of a bucket shared by
 * all keys. The per-key part stops one broken object from hot-looping; the bucket caps the total retry
 * rate when many objects fail at once (an API outage), whatever their individual backoff.
 */

export interface RateLimiter {
  /** Delay in ms before `key` may be retried; every call counts as one more failure of `key`. */
  when(key: string): number;
  /** The key succeeded: its backoff starts over. */
  forget(key: string): void;
  /** Failures recorded for `key` since the last `forget`. */
  numRequeues(key: string): number;
}

/** `baseMs * 2^failures`, capped at `maxMs` (defaults 5 ms → 1000 s, client-go's values). */
export class ExponentialRateLimiter implements RateLimiter {
  readonly #baseMs: number;
  readonly #maxMs: number;
  readonly #failures = new Map<string, number>();

  constructor(baseMs = 5, maxMs = 1_000_000) {
    if (!(baseMs > 0 && maxMs >= baseMs)) throw new RangeError('need 0 < baseMs <= maxMs');
    this.#baseMs = baseMs;
    this.#maxMs = maxMs;
  }

  when(key: string): number {
    const n = this.#failures.get(key) ?? 0;
    this.#failures.set(key, n + 1);
    // 2^n overflows to Infinity past n≈1023; min() keeps the cap exact either way.
    return Math.min(this.#baseMs * 2 ** n, this.#maxMs);
  }

  forget(key: string): void {
    this.#failures.delete(key);
  }

  numRequeues(key: string): number {
    return this.#failures.get(key) ?? 0;
  }
}

/**
 * Token bucket of `qps` tokens per second holding at most `burst`, with reservation semantics (Go's
 * `rate.Limiter.Reserve`): a caller always gets a slot, tokens may go negative, and the delay is the
 * time until its token exists. Per-key state is not kept, so forget/numRequeues are no-ops.
 */
export class BucketRateLimiter implements RateLimiter {
  readonly #qps: number;
  readonly #burst: number;
  readonly #now: () => number;
  #tokens: number;
  #last: number;

  constructor(qps = 10, burst = 100, now: () => number = Date.now) {
    if (!(qps > 0 && burst >= 1)) throw new RangeError('need qps > 0 and burst >= 1');
    this.#qps = qps;
    this.#burst = burst;
    this.#now = now;
    this.#tokens = burst;
    this.#last = now();
  }

  when(_key: string): number {
    const now = this.#now();
    this.#tokens = Math.min(this.#burst, this.#tokens + ((now - this.#last) / 1000) * this.#qps);
    this.#last = now;
    this.#tokens -= 1;
    return this.#tokens >= 0 ? 0 : Math.ceil((-this.#tokens / this.#qps) * 1000);
  }

  forget(_key: string): void {}

  numRequeues(_key: string): number {
    return 0;
  }
}

/** The largest delay of its members; requeue counts come from the first member that keeps them. */
export class MaxOfRateLimiter implements RateLimiter {
  readonly #limiters: readonly RateLimiter[];

  constructor(...limiters: RateLimiter[]) {
    if (limiters.length === 0) throw new RangeError('need at least one limiter');
    this.#limiters = limiters;
  }

  when(key: string): number {
    // Every member must see the failure (no short-circuit), so each keeps its own state right.
    return Math.max(...this.#limiters.map((l) => l.when(key)));
  }

  forget(key: string): void {
    for (const l of this.#limiters) l.forget(key);
  }

  numRequeues(key: string): number {
    return Math.max(...this.#limiters.map((l) => l.numRequeues(key)));
  }
}

/** client-go's default: per-key 5 ms → 1000 s, overall 10 qps with a burst of 100. */
export function defaultControllerRateLimiter(
  now: () => number = Date.now,
  maxBackoffMs = 1_000_000,
): RateLimiter {
  return new MaxOfRateLimiter(
    new ExponentialRateLimiter(5, maxBackoffMs),
    new BucketRateLimiter(10, 100, now),
  );
}
