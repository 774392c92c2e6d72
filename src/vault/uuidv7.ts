import { randomFillSync } from 'node:crypto';

/**
 * Monotonic UUIDv7 generator (RFC 9562 §5.7, monotonicity per §6.2 method 1 "fixed bit-length
 * dedicated counter"):
 *
 *   48 bits unix_ts_ms | 4 bits version (0111) | 12 bits rand_a | 2 bits variant (10) | 62 bits rand_b
 *
 * rand_a and the top 30 bits of rand_b form a 42-bit counter; the low 32 bits of rand_b are fresh
 * randomness in every id. A new millisecond seeds the counter with 41 random bits (the top bit is
 * left zero so at least 2^41 increments fit); within the same millisecond, or when the clock goes
 * backwards, the counter increments; on counter overflow the timestamp field moves one millisecond
 * ahead of the clock. Ids are therefore strictly increasing for the life of the generator, whatever
 * the clock does, and `next(floor)` extends that across processes: the result is greater than
 * `floor` (the vault passes the last stored id, read under the chain-head lock).
 */
export class UuidV7Generator {
  #ms = -1;
  #counter = 0;
  readonly #now: () => number;
  readonly #fill: (buf: Uint8Array) => void;
  /** Randomness is drawn from a pool: one getrandom call per 1024 ids instead of one per id. */
  readonly #pool = new Uint8Array(4096);
  #poolPos = this.#pool.length;

  /** `now` and `randomFill` are injectable for tests (frozen or backwards clocks). */
  constructor(options: { now?: () => number; randomFill?: (buf: Uint8Array) => void } = {}) {
    this.#now = options.now ?? Date.now;
    this.#fill = options.randomFill ?? ((buf: Uint8Array) => randomFillSync(buf));
  }

  /** Returns a new UUIDv7 greater than every id this generator returned before, and than `floor`. */
  next(floor?: string | null): string {
    const now = Math.floor(this.#now());
    if (now > this.#ms) {
      this.#ms = now;
      this.#counter = this.#random41();
    } else {
      this.#increment();
    }
    if (floor != null) {
      const f = parseV7(floor);
      if (f !== null && (this.#ms < f.ms || (this.#ms === f.ms && this.#counter <= f.counter))) {
        this.#ms = f.ms;
        this.#counter = f.counter;
        this.#increment();
      }
    }
    return format(this.#ms, this.#counter, this.#randomUint32());
  }

  #increment(): void {
    this.#counter += 1;
    if (this.#counter > MAX_COUNTER) {
      this.#ms += 1;
      this.#counter = this.#random41();
    }
    if (this.#ms > MAX_MS) throw new RangeError('UUIDv7 timestamp overflow');
  }

  #random41(): number {
    // 9 bits from one word, 32 from another: 2^41 fits a double exactly.
    return (this.#randomUint32() & 0x1ff) * 2 ** 32 + this.#randomUint32();
  }

  #randomUint32(): number {
    if (this.#poolPos + 4 > this.#pool.length) {
      this.#fill(this.#pool);
      this.#poolPos = 0;
    }
    const p = this.#pool;
    const i = this.#poolPos;
    this.#poolPos += 4;
    return ((p[i]! << 24) | (p[i + 1]! << 16) | (p[i + 2]! << 8) | p[i + 3]!) >>> 0;
  }
}

const MAX_COUNTER = 2 ** 42 - 1;
const MAX_MS = 2 ** 48 - 1;
const V7 = /^[0-9a-f]{8}-[0-9a-f]{4}-7[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/;

/** True for a lowercase, hyphenated UUID with version 7 and variant 10. */
export function isUuidV7(id: string): boolean {
  return V7.test(id);
}

/** The millisecond timestamp embedded in a UUIDv7. */
export function uuidV7Time(id: string): Date {
  const f = parseV7(id);
  if (f === null) throw new TypeError(`not a UUIDv7: ${id}`);
  return new Date(f.ms);
}

function parseV7(id: string): { ms: number; counter: number } | null {
  const s = id.toLowerCase();
  if (!V7.test(s)) return null;
  const hex = s.replaceAll('-', '');
  const ms = parseInt(hex.slice(0, 12), 16);
  const randA = parseInt(hex.slice(13, 16), 16);
  const hi14 = parseInt(hex.slice(16, 20), 16) & 0x3fff;
  const next16 = parseInt(hex.slice(20, 24), 16);
  return { ms, counter: randA * 2 ** 30 + hi14 * 2 ** 16 + next16 };
}

function format(ms: number, counter: number, low32: number): string {
  const t = ms.toString(16).padStart(12, '0');
  const randA = Math.floor(counter / 2 ** 30);
  const hi30 = counter % 2 ** 30;
  const varHi = (0x8000 | (hi30 >>> 16)).toString(16);
  const mid16 = (hi30 & 0xffff).toString(16).padStart(4, '0');
  return (
    `${t.slice(0, 8)}-${t.slice(8, 12)}-7${randA.toString(16).padStart(3, '0')}-` +
    `${varHi}-${mid16}${low32.toString(16).padStart(8, '0')}`
  );
}
