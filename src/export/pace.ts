/**
 * The pace an export's client must keep to hold its slot (EXPORT_CONCURRENCY slots are few): a
 * client that takes nothing for `idleMs`, or takes the bundle slower than `minBytesPerSecond` over
 * a window of `windowMs` of waiting, is closed. Pure bookkeeping over a caller-given clock, so it is
 * unit-tested without sockets; src/export/service.ts feeds it and acts on its verdict.
 *
 * Invariants:
 * - Only the client's time counts: the clock runs while a prepared chunk waits for the client to
 *   take it (`offered` .. `taken`), never while the service prepares the next one (a slow query).
 * - Bytes count when the client has taken them (the chunk it asked past), in bundle bytes (before
 *   gzip, which the floor's docs say).
 * - The rate is judged only once a whole window of waiting has passed, over the newest such window,
 *   so a start from cold socket buffers or a pause shorter than the idle time is never punished.
 */

export interface PaceLimits {
  /** A chunk not taken within this long closes the export (the client stopped reading). */
  readonly idleMs: number;
  /** The floor over the window; 0 turns the rate check off (the idle check stays). */
  readonly minBytesPerSecond: number;
  /** The span of waiting the rate is judged over. */
  readonly windowMs: number;
}

export type PaceVerdict =
  | { readonly reason: 'idle'; readonly waitedMs: number }
  | { readonly reason: 'slow'; readonly bytesPerSecond: number; readonly overMs: number };

interface Sample {
  readonly waitedMs: number;
  readonly taken: number;
}

export class ExportPace {
  /** Client waiting time so far (closed intervals only). */
  private waitedMs = 0;
  private taken = 0;
  /** Start of the open interval: a chunk offered and not yet taken. */
  private offeredAt: number | null = null;
  private pending = 0;
  /** Samples of (waitedMs, taken), oldest first; trimmed to one window's worth plus one. */
  private readonly samples: Sample[] = [{ waitedMs: 0, taken: 0 }];

  private readonly limits: PaceLimits;

  constructor(limits: PaceLimits) {
    this.limits = limits;
  }

  /** A chunk of `bytes` is ready and waits for the client from `now`. */
  offered(bytes: number, now: number): void {
    this.offeredAt = now;
    this.pending = bytes;
  }

  /** The client took the offered chunk at `now`. */
  tookOffered(now: number): void {
    if (this.offeredAt === null) return;
    this.waitedMs += Math.max(0, now - this.offeredAt);
    this.taken += this.pending;
    this.offeredAt = null;
    this.pending = 0;
  }

  /** Judged on each watchdog tick: null while the client keeps the pace. */
  verdict(now: number): PaceVerdict | null {
    const open = this.offeredAt === null ? 0 : Math.max(0, now - this.offeredAt);
    if (open >= this.limits.idleMs) return { reason: 'idle', waitedMs: open };
    const current: Sample = { waitedMs: this.waitedMs + open, taken: this.taken };
    // Samples are kept at a twentieth of a window apart at least, so their number stays bounded
    // (about 21) however long the export runs.
    const last = this.samples[this.samples.length - 1]!;
    if (current.waitedMs - last.waitedMs >= this.limits.windowMs / 20) this.samples.push(current);
    // The newest sample at least a window of waiting back: the window judged.
    let from: Sample | undefined;
    for (let i = this.samples.length - 1; i >= 0; i--) {
      if (current.waitedMs - this.samples[i]!.waitedMs >= this.limits.windowMs) {
        from = this.samples[i];
        this.samples.splice(0, i);
        break;
      }
    }
    if (from === undefined) return null;
    if (this.limits.minBytesPerSecond <= 0) return null;
    const overMs = current.waitedMs - from.waitedMs;
    const bytesPerSecond = ((current.taken - from.taken) * 1000) / overMs;
    return bytesPerSecond < this.limits.minBytesPerSecond ? { reason: 'slow', bytesPerSecond, overMs } : null;
  }
}

/** Default floor (EXPORT_MIN_BYTES_PER_SECOND): 32 KiB/s, a 256 kbit/s link. */
export const DEFAULT_EXPORT_MIN_BYTES_PER_SECOND = 32 * 1024;

/** The limits of a deployment: the rate is judged over twice the idle time of waiting. */
export function exportPace(
  idleMs: number,
  minBytesPerSecond = DEFAULT_EXPORT_MIN_BYTES_PER_SECOND,
): PaceLimits {
  return { idleMs, minBytesPerSecond, windowMs: 2 * idleMs };
}

/** What the response declares up front (header `x-export-min-rate`), and the CLI repeats on a cut. */
export function paceHeader(limits: PaceLimits): string {
  return `${limits.minBytesPerSecond}; window=${Math.round(limits.windowMs / 1000)}; idle=${Math.round(limits.idleMs / 1000)}`;
}

/** One line for the log and the audit row. */
export function describeVerdict(v: PaceVerdict, limits: PaceLimits): string {
  return v.reason === 'idle'
    ? `the client took no byte for ${Math.round(v.waitedMs / 1000)} s (limit ${Math.round(limits.idleMs / 1000)} s)`
    : `the client read ${Math.round(v.bytesPerSecond)} bytes/s over ${Math.round(v.overMs / 1000)} s of waiting, below the floor of ${limits.minBytesPerSecond} bytes/s`;
}
