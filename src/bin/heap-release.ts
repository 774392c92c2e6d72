import v8 from 'node:v8';
import { runInNewContext } from 'node:vm';
import type { Logger } from '../log/index.ts';

/**
 * Gives the pages V8 no longer uses back to the kernel.
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
 * The pool is what RSS holds beyond V8's heap and external memory ("slack"), less what that was
 * after the last release (malloc's arenas, the binary's pages, thread stacks). So a process samples
 * the three every few seconds, and when the slack has grown `thresholdBytes` since, runs a
 * last-resort collection while the event loop is mostly idle, or once it has grown
 * `busyThresholdBytes` in any case; at most once per `minGapMs`, so the pauses stay rare. Slack that
 * a release does not give back (malloc's) becomes the new baseline, so it is not chased again.
 */
export interface HeapReleaseOptions {
  readonly logger: Logger;
  /** How often memory is read (default 5 s). */
  readonly intervalMs?: number;
  /** Growth of the slack that is released while idle (default 32 MiB). */
  readonly thresholdBytes?: number;
  /** Growth of the slack that is released however busy the process is (default 128 MiB). */
  readonly busyThresholdBytes?: number;
  /** Event-loop utilisation over the last interval below which the process counts as idle (0.25). */
  readonly idleBelow?: number;
  /** Least time between two releases (default 60 s). */
  readonly minGapMs?: number;
}

/** One reading of the process's memory, bytes, and its event loop's utilisation since the last. */
export interface MemorySample {
  readonly rss: number;
  /** V8's committed heap (`heapTotal`). */
  readonly heap: number;
  readonly external: number;
  /** 0–1: the event loop's utilisation since the previous sample. */
  readonly busy: number;
}

/** What the policy reads and does: the process's in startHeapRelease, fakes in its unit test. */
export interface HeapReleaseHooks {
  readonly sample: () => MemorySample;
  /** Runs a last-resort collection. */
  readonly release: () => void;
  /** Milliseconds, monotonic. */
  readonly now: () => number;
}

export interface HeapReleaseLimits {
  readonly thresholdBytes: number;
  readonly busyThresholdBytes: number;
  readonly idleBelow: number;
  readonly minGapMs: number;
}

export interface HeapRelease {
  /** Reads memory once and releases if the policy says so; true when it released. */
  tick(): boolean;
  /** Releases done so far. */
  readonly releases: number;
}

const slackOf = (s: MemorySample): number => s.rss - s.heap - s.external;

/** The policy alone: the slack's baseline, the thresholds (idle or not) and the gap. */
export function heapReleasePolicy(hooks: HeapReleaseHooks, limits: HeapReleaseLimits): HeapRelease {
  let base = slackOf(hooks.sample());
  let last = Number.NEGATIVE_INFINITY;
  let releases = 0;
  return {
    tick(): boolean {
      const sample = hooks.sample();
      const slack = slackOf(sample);
      // What the process gives back by itself (malloc trimming) lowers the baseline.
      base = Math.min(base, slack);
      const need = sample.busy < limits.idleBelow ? limits.thresholdBytes : limits.busyThresholdBytes;
      const at = hooks.now();
      if (slack - base < need || at - last < limits.minGapMs) return false;
      hooks.release();
      releases += 1;
      last = at;
      base = slackOf(hooks.sample());
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

export interface HeapReleaseHandle {
  stop(): void;
  /** Releases done so far. */
  readonly releases: number;
}

/** Starts the sampling in this process (unref'd: it never keeps a process alive). */
export function startHeapRelease(options: HeapReleaseOptions): HeapReleaseHandle {
  const { logger } = options;
  const gc = lastResortGc();
  if (gc === undefined) {
    logger.warn('V8 gave no gc function: freed heap pages stay resident until the kernel needs them');
    return { stop: () => undefined, releases: 0 };
  }
  let loop = performance.eventLoopUtilization();
  const sample = (): MemorySample => {
    const m = process.memoryUsage();
    const now = performance.eventLoopUtilization();
    const busy = performance.eventLoopUtilization(now, loop).utilization;
    loop = now;
    return { rss: m.rss, heap: m.heapTotal, external: m.external, busy };
  };
  const policy = heapReleasePolicy(
    {
      sample,
      now: () => performance.now(),
      release: () => {
        const before = process.memoryUsage();
        const t0 = performance.now();
        gc({ type: 'major', execution: 'sync', flavor: 'last-resort' });
        const pauseMs = Math.round(performance.now() - t0);
        const after = process.memoryUsage();
        logger.info(
          {
            pauseMs,
            rssBefore: before.rss,
            rssAfter: after.rss,
            heapBefore: before.heapTotal,
            heapAfter: after.heapTotal,
          },
          'released freed heap pages to the kernel',
        );
      },
    },
    {
      thresholdBytes: options.thresholdBytes ?? 32 * 2 ** 20,
      busyThresholdBytes: options.busyThresholdBytes ?? 128 * 2 ** 20,
      idleBelow: options.idleBelow ?? 0.25,
      minGapMs: options.minGapMs ?? 60_000,
    },
  );
  const timer = setInterval(() => policy.tick(), options.intervalMs ?? 5_000);
  timer.unref();
  return {
    stop: () => clearInterval(timer),
    get releases() {
      return policy.releases;
    },
  };
}
