/**
 * Concurrency limits for upstream reviews: at most `perKey` calls in flight for one key (a caller's
 * identity) and at most `global` in all. Calls over a limit wait in FIFO order; none is refused.
 *
 * A call takes its key's slot first and only then a global one, so the callers of one key never
 * hold more than `perKey` of the global slots or queue positions ahead of other keys: a caller that
 * floods the sidecar waits behind itself, while everyone else keeps `global - perKey` slots.
 */
export interface LimiterOptions {
  readonly perKey: number;
  readonly global: number;
}

/** A counting semaphore with a FIFO queue of waiters. */
class Semaphore {
  #free: number;
  readonly #waiters: Array<() => void> = [];

  constructor(size: number) {
    this.#free = size;
  }

  acquire(): Promise<void> {
    if (this.#free > 0) {
      this.#free -= 1;
      return Promise.resolve();
    }
    return new Promise((resolve) => this.#waiters.push(resolve));
  }

  /** Hands the slot to the oldest waiter, or frees it. */
  release(): void {
    const next = this.#waiters.shift();
    if (next) next();
    else this.#free += 1;
  }

  /** No call holds or waits for a slot. */
  idle(size: number): boolean {
    return this.#free === size && this.#waiters.length === 0;
  }
}

export class KeyedLimiter {
  readonly #perKey: number;
  readonly #all: Semaphore;
  /** Only keys with a call in flight or waiting: the map never outgrows the callers of the moment. */
  readonly #keys = new Map<string, Semaphore>();

  constructor(options: LimiterOptions) {
    for (const [name, n] of Object.entries(options)) {
      if (!(Number.isInteger(n) && n >= 1)) throw new RangeError(`${name} must be a positive integer`);
    }
    this.#perKey = options.perKey;
    this.#all = new Semaphore(options.global);
  }

  async run<T>(key: string, fn: () => Promise<T>): Promise<T> {
    let own = this.#keys.get(key);
    if (!own) {
      own = new Semaphore(this.#perKey);
      this.#keys.set(key, own);
    }
    await own.acquire();
    try {
      await this.#all.acquire();
      try {
        return await fn();
      } finally {
        this.#all.release();
      }
    } finally {
      own.release();
      if (own.idle(this.#perKey)) this.#keys.delete(key);
    }
  }

  /** Keys with calls in flight or waiting (for tests and metrics). */
  get activeKeys(): number {
    return this.#keys.size;
  }
}
