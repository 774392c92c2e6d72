/**
 * One copy of each equal string among the objects a controller caches.
 *
 * JSON.parse gives every string value its own heap copy, while most strings of a cached Run repeat:
 * across Runs (the API version, the pipeline's step ids, tools and models, condition reasons and
 * messages, the signer's key id, media types) and within one (the AIBOM's attestation ids are listed
 * twice). Sharing them took a converged Run in the cache from 7.7 KB to 4.8 KB of heap
 * (docs/bench.md, issue 29, sixth round). Strings are immutable, so sharing changes nothing a
 * reader can see.
 *
 * Bounded: at most `capacity` strings of at most `maxLength` characters are held; when the table is
 * full it is emptied and refilled by what comes next, so a string that stopped recurring (a deleted
 * Run's ids) is held at most until then, and a recurring one is shared again at its next sighting.
 */
export class StringTable {
  readonly #strings = new Map<string, string>();
  readonly #capacity: number;
  readonly #maxLength: number;

  constructor(options: { capacity?: number; maxLength?: number } = {}) {
    this.#capacity = Math.max(1, options.capacity ?? 20_000);
    this.#maxLength = options.maxLength ?? 256;
  }

  /** Strings held now. */
  get size(): number {
    return this.#strings.size;
  }

  /** The table's copy of `s` (`s` itself the first time, or when it is too long to hold). */
  string(s: string): string {
    if (s.length > this.#maxLength) return s;
    const held = this.#strings.get(s);
    if (held !== undefined) return held;
    if (this.#strings.size >= this.#capacity) this.#strings.clear();
    this.#strings.set(s, s);
    return s;
  }

  /**
   * Replaces every string value in a JSON tree (parsed JSON: plain objects, arrays, primitives; no
   * cycles) with the table's copy, in place; returns `value`. Member names need nothing: V8 already
   * keeps one copy of each.
   */
  values<T>(value: T): T {
    this.#walk(value);
    return value;
  }

  #walk(node: unknown): void {
    if (Array.isArray(node)) {
      const items = node as unknown[];
      for (let i = 0; i < items.length; i++) {
        const item = items[i];
        if (typeof item === 'string') items[i] = this.string(item);
        else if (typeof item === 'object' && item !== null) this.#walk(item);
      }
    } else if (typeof node === 'object' && node !== null) {
      const obj = node as Record<string, unknown>;
      for (const key of Object.keys(obj)) {
        const member = obj[key];
        if (typeof member === 'string') obj[key] = this.string(member);
        else if (typeof member === 'object' && member !== null) this.#walk(member);
      }
    }
  }
}

/** The table every controller cache of this process shares (slimForCache). */
export const cacheStrings = new StringTable();
