/**
 * A small TTL cache with a size bound (oldest insertion evicted first) and single-flight loading, so
 * a burst of identical requests makes one upstream review, not one each.
 */
export class TtlCache<K, V> {
  private readonly entries = new Map<K, { value: V; expires: number }>();
  private readonly inflight = new Map<K, Promise<V>>();
  private readonly ttlMs: number;
  private readonly maxEntries: number;

  constructor(ttlMs: number, maxEntries: number) {
    this.ttlMs = ttlMs;
    this.maxEntries = maxEntries;
  }

  async getOrLoad(key: K, load: () => Promise<V>, now = Date.now()): Promise<V> {
    const hit = this.entries.get(key);
    if (hit && hit.expires > now) return hit.value;
    const pending = this.inflight.get(key);
    if (pending) return pending;
    const p = load().then(
      (value) => {
        this.inflight.delete(key);
        this.entries.delete(key);
        if (this.entries.size >= this.maxEntries) {
          const oldest = this.entries.keys().next();
          if (!oldest.done) this.entries.delete(oldest.value);
        }
        this.entries.set(key, { value, expires: Date.now() + this.ttlMs });
        return value;
      },
      (err: unknown) => {
        // Failures (API server unreachable) are not cached.
        this.inflight.delete(key);
        throw err;
      },
    );
    this.inflight.set(key, p);
    return p;
  }

  get size(): number {
    return this.entries.size;
  }
}
