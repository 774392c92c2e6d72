import { ProblemError } from '../problem.ts';

/** Run pages one caller may have in the making at once, per sidecar replica. */
export const PAGES_PER_CALLER = 2;

/** Seconds a refused page is told to wait: about what a large run's page takes to make. */
const RETRY_AFTER_SECONDS = 2;

/**
 * A per-caller budget of run pages in the making (issue 28). A run page reads a page of records
 * and checks their signatures and time-stamps on the sidecar's event loop (src/http/ui/verify.ts
 * slices that work so other requests run in between); without a bound, one caller opening the
 * heaviest run in many tabs at once would make every tenant's requests wait behind all of them
 * and hold all of their records in memory. A caller already making {@link PAGES_PER_CALLER} pages
 * gets 429 `PAGE_BUSY` with Retry-After before any work is done; the slot is released however the
 * page ends.
 */
export class PageBudget {
  readonly perCaller: number;
  private readonly byCaller = new Map<string, number>();

  constructor(perCaller: number = PAGES_PER_CALLER) {
    this.perCaller = perCaller;
    if (!Number.isSafeInteger(perCaller) || perCaller < 1) {
      throw new RangeError('perCaller must be a positive integer');
    }
  }

  /** Pages in the making now, all callers. */
  get inUse(): number {
    let n = 0;
    for (const v of this.byCaller.values()) n += v;
    return n;
  }

  /** Takes a slot for `caller`; returns its release (idempotent), or throws 429 PAGE_BUSY. */
  acquire(caller: string): () => void {
    const mine = this.byCaller.get(caller) ?? 0;
    if (mine >= this.perCaller) {
      throw new ProblemError(
        429,
        'PAGE_BUSY',
        `${mine} run page(s) of yours are still being made (at most ${this.perCaller} at once): wait for ${mine === 1 ? 'it' : 'one'} to load, then reload`,
        { headers: { 'retry-after': String(RETRY_AFTER_SECONDS) } },
      );
    }
    this.byCaller.set(caller, mine + 1);
    let released = false;
    return () => {
      if (released) return;
      released = true;
      const left = (this.byCaller.get(caller) ?? 1) - 1;
      if (left === 0) this.byCaller.delete(caller);
      else this.byCaller.set(caller, left);
    };
  }
}
