import v8 from 'node:v8';
import { runInNewContext } from 'node:vm';
import type { Logger } from '../log/index.ts';

/**
 * Gives the pages V8 no longer uses back to the kernel once the heap has shrunk.
 *
 * V8 keeps the 256 KiB pages a garbage collection empties in a pool for reuse, resident: they leave
 * `heapTotal` but not RSS, and neither regular collections nor V8's memory reducer (which waits for
 * an isolate to be "backgrounded", which Node never signals) hand them back. Only a last-resort
 * collection, what V8 runs under memory pressure, releases them. The controller's heap peaks while
 * it lists and records a large cluster after a restart and then shrinks to its cache; the pool kept
 * that peak: 128 MiB of such pages against a 61 MiB heap at 2,775 cached Runs (docs/bench.md,
 * issue 29, seventh round). One process, 143 MiB of live objects: the pool held 82 MiB after a
 * regular collection, and a last-resort one gave it back in 300 ms of pause.
 *
 * So a process samples its heap size, and when it has fallen `thresholdBytes` below the largest it
 * reached since the last release, runs a last-resort collection: at most once per `minGapMs`, so the
 * pauses stay rare (the size falls that far after a large list or backlog, not in steady state).
 */
export interface HeapReleaseOptions {
  readonly logger: Logger;
  /** How often the heap's size is read (default 10 s). */
  readonly intervalMs?: number;
  /** How far below its high-water mark the heap must fall (default 32 MiB). */
  readonly thresholdBytes?: number;
  /** Least time between two releases (default 60 s). */
  readonly minGapMs?: number;
}

/** What the policy reads and does: the process's in startHeapRelease, fakes in its unit test. */
export interface HeapReleaseHooks {
  /** V8's committed heap size, bytes. */
  readonly heapSize: () => number;
  /** Runs a last-resort collection. */
  readonly release: () => void;
  /** Milliseconds, monotonic. */
  readonly now: () => number;
}

export interface HeapRelease {
  /** Reads the heap size once and releases if the policy says so; true when it released. */
  tick(): boolean;
  /** Releases done so far. */
  readonly releases: number;
}

/** The policy alone: the high-water mark since the last release, the threshold and the gap. */
export function heapReleasePolicy(
  hooks: HeapReleaseHooks,
  thresholdBytes: number,
  minGapMs: number,
): HeapRelease {
  let high = hooks.heapSize();
  let last = Number.NEGATIVE_INFINITY;
  let releases = 0;
  return {
    tick(): boolean {
      const size = hooks.heapSize();
      high = Math.max(high, size);
      const at = hooks.now();
      if (high - size < thresholdBytes || at - last < minGapMs) return false;
      hooks.release();
      releases += 1;
      last = at;
      high = hooks.heapSize();
      return true;
    },
    get releases() {
      return releases;
    },
  };
}

type GcFunction = (options: { type: 'major'; execution: 'sync'; flavor: 'last-resort' }) => void;

/**
 * V8's `gc` function without starting Node with `--expose-gc` (the image's `#!` line has room for
 * one flag, src/bin/node-flags.ts): the flag is set, a new context is made (V8 installs `gc` on
 * contexts made while it is set), and the flag is cleared again so no later context gets one.
 * Undefined if this V8 does not give it.
 */
export function lastResortGc(): GcFunction | undefined {
  const given: unknown = globalThis.gc;
  if (typeof given === 'function') return given as GcFunction;
  v8.setFlagsFromString('--expose-gc');
  try {
    const gc: unknown = runInNewContext('typeof gc === "function" ? gc : undefined');
    return typeof gc === 'function' ? (gc as GcFunction) : undefined;
  } finally {
    v8.setFlagsFromString('--no-expose-gc');
  }
}

/** Starts the sampling in this process (unref'd: it never keeps a process alive); returns its stop. */
export function startHeapRelease(options: HeapReleaseOptions): () => void {
  const { logger } = options;
  const gc = lastResortGc();
  if (gc === undefined) {
    logger.warn('V8 gave no gc function: freed heap pages stay resident until the kernel needs them');
    return () => undefined;
  }
  const heapSize = (): number => v8.getHeapStatistics().total_heap_size;
  const policy = heapReleasePolicy(
    {
      heapSize,
      now: () => performance.now(),
      release: () => {
        const before = { rss: process.memoryUsage.rss(), heap: heapSize() };
        const t0 = performance.now();
        gc({ type: 'major', execution: 'sync', flavor: 'last-resort' });
        logger.info(
          {
            pauseMs: Math.round(performance.now() - t0),
            rssBefore: before.rss,
            rssAfter: process.memoryUsage.rss(),
            heapBefore: before.heap,
            heapAfter: heapSize(),
          },
          'released freed heap pages to the kernel',
        );
      },
    },
    options.thresholdBytes ?? 32 * 2 ** 20,
    options.minGapMs ?? 60_000,
  );
  const timer = setInterval(() => policy.tick(), options.intervalMs ?? 10_000);
  timer.unref();
  return () => clearInterval(timer);
}
