import { ProblemError } from '../http/problem.ts';

/** Default of EXPORT_CONCURRENCY: exports streaming at once per sidecar replica. */
export const DEFAULT_EXPORT_CONCURRENCY = 2;

/** Seconds a refused export is told to wait (about what a large export takes on a small node). */
const RETRY_AFTER_SECONDS = 30;

/**
 * How many exports stream at once: `total` per replica, and at most half of them (at least one)
 * for one caller. An export keeps a CPU core busy, reads PostgreSQL batch after batch and holds its
 * spool's temp space (docs/export.md) for as long as its client reads; without a bound, one tenant starting exports
 * in parallel starves everyone else's and can fill the API's `/tmp` until the pod is evicted. A
 * refused export gets 429 `EXPORT_BUSY` with Retry-After before any work is done. Slots are held
 * from the acquisition until the response stream closes, however it ends.
 */
export class ExportSlots {
  readonly total: number;
  readonly perCaller: number;
  private running = 0;
  private readonly byCaller = new Map<string, number>();

  constructor(total: number = DEFAULT_EXPORT_CONCURRENCY) {
    if (!Number.isSafeInteger(total) || total < 1) throw new RangeError('total must be a positive integer');
    this.total = total;
    this.perCaller = Math.max(1, Math.floor(total / 2));
  }

  /** Exports streaming now. */
  get inUse(): number {
    return this.running;
  }

  /** Takes a slot for `caller`; returns its release (idempotent), or throws 429 EXPORT_BUSY. */
  acquire(caller: string): () => void {
    const mine = this.byCaller.get(caller) ?? 0;
    if (mine >= this.perCaller) {
      throw busy(
        `${mine} export(s) of yours are still streaming (at most ${this.perCaller} per caller): wait for ${mine === 1 ? 'it' : 'one'} to end`,
      );
    }
    if (this.running >= this.total) {
      throw busy(`${this.running} exports are streaming (at most ${this.total} at once): try again shortly`);
    }
    this.running++;
    this.byCaller.set(caller, mine + 1);
    let released = false;
    return () => {
      if (released) return;
      released = true;
      this.running--;
      const left = (this.byCaller.get(caller) ?? 1) - 1;
      if (left === 0) this.byCaller.delete(caller);
      else this.byCaller.set(caller, left);
    };
  }
}

function busy(detail: string): ProblemError {
  return new ProblemError(429, 'EXPORT_BUSY', detail, {
    headers: { 'retry-after': String(RETRY_AFTER_SECONDS) },
  });
}
