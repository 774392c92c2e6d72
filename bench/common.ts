/**
 * Shared plumbing of the benchmarks: the run context (scale, lazily started stack, cleanup
 * registry), goals and verdicts, statistics and table printing.
 *
 * Rule of the project: a speed goal is a RATIO against a baseline measured side by side in the same
 * run on the same machine, never a wall-clock threshold. Every benchmark therefore measures its
 * candidate and its baseline in alternating rounds and reports the ratio; verdicts are informational
 * (the process exits 0 either way).
 */
import { randomBytes } from 'node:crypto';
import http from 'node:http';
import pg from 'pg';
import type { StackInfo } from '../hack/stack/stack.ts';

/** `ratio >= value` (throughput goals) or `ratio <= value` (latency goals). */
export interface Goal {
  readonly op: '>=' | '<=';
  readonly value: number;
}

export interface SummaryRow {
  readonly benchmark: string;
  readonly case: string;
  /** What the ratio divides, e.g. "API p50 / SQL p50". */
  readonly ratioOf: string;
  readonly ratio: number;
  readonly goal: Goal;
}

export interface Benchmark {
  readonly name: string;
  /** One line for `--help` and the summary. */
  readonly title: string;
  run(ctx: BenchContext): Promise<SummaryRow[]>;
}

/** Closes one resource; idempotent. */
export type Closer = () => Promise<void>;

export interface BenchContext {
  /** BENCH_SCALE (default 1): multiplies row counts and measuring time. */
  readonly scale: number;
  /** Progress on stderr, so stdout holds only the result tables. */
  log(message: string): void;
  /** Starts the stack on first use (etcd, kube-apiserver, PostgreSQL, MinIO), stopped at exit. */
  stack(): Promise<StackInfo>;
  /** A new, empty database on the stack's PostgreSQL; returns its superuser URL. */
  freshDatabase(prefix: string): Promise<string>;
  /**
   * Registers a resource to close on normal exit, on failure and on SIGINT/SIGTERM (last in, first
   * out). Call the returned closer to close it early; it then no longer runs at exit.
   */
  track(close: () => Promise<void> | void): Closer;
  /** Values shared between benchmarks of one run (the query/get fixture is loaded once). */
  shared<T>(key: string, create: () => Promise<T>): Promise<T>;
  /** Throws once cleanup has started (SIGINT), so long loops stop competing with it. */
  throwIfStopping(): void;
  /** The HTTP client of the read benchmarks (BENCH_HTTP_CLIENT). */
  readonly http: HttpClient;
}

// ---------------------------------------------------------------------------------------------
// HTTP client

export const HTTP_CLIENTS = ['fetch', 'http'] as const;
export type HttpClientKind = (typeof HTTP_CLIENTS)[number];

export interface HttpClient {
  /** `fetch`: Node's global fetch (undici, keep-alive). `http`: node:http with a keep-alive Agent. */
  readonly kind: HttpClientKind;
  request(
    method: 'GET' | 'POST',
    url: string,
    headers: Record<string, string>,
    body?: string,
  ): Promise<{ status: number; body: Buffer }>;
}

/**
 * The load generator runs on the same two vCPUs as the server, so its own cost shows up in the
 * API numbers: global fetch (the default) costs about twice what node:http does per request.
 */
export function httpClient(kind: HttpClientKind): HttpClient {
  if (kind === 'fetch') {
    return {
      kind,
      async request(method, url, headers, body) {
        const res = await fetch(url, { method, headers, ...(body !== undefined ? { body } : {}) });
        return { status: res.status, body: Buffer.from(await res.arrayBuffer()) };
      },
    };
  }
  const agent = new http.Agent({ keepAlive: true, maxSockets: 64 });
  return {
    kind,
    request(method, url, headers, body) {
      return new Promise((resolve, reject) => {
        const req = http.request(url, { method, headers, agent }, (res) => {
          const chunks: Buffer[] = [];
          res.on('data', (c: Buffer) => chunks.push(c));
          res.on('end', () => resolve({ status: res.statusCode ?? 0, body: Buffer.concat(chunks) }));
          res.on('error', reject);
        });
        req.on('error', reject);
        req.end(body);
      });
    },
  };
}

/** Cleanup registry shared by the context and the signal handlers. */
export class Resources {
  readonly #closers = new Map<Closer, number>();
  #closing = false;

  /** True once closeAll has been called. */
  get closing(): boolean {
    return this.#closing;
  }

  /**
   * `timeoutMs` bounds how long closeAll waits for this step (a pool whose client is stuck in a
   * query must not keep the stack from being stopped); Infinity for steps that must finish.
   */
  track(close: () => Promise<void> | void, timeoutMs = 10_000): Closer {
    let done: Promise<void> | undefined;
    const closer: Closer = () => {
      this.#closers.delete(closer);
      done ??= Promise.resolve().then(close);
      return done;
    };
    this.#closers.set(closer, timeoutMs);
    return closer;
  }

  /** Closes everything still open, newest first; reports failures and carries on. */
  async closeAll(): Promise<void> {
    this.#closing = true;
    for (const [closer, timeoutMs] of [...this.#closers].reverse()) {
      let timer: NodeJS.Timeout | undefined;
      const timeout = new Promise<'timeout'>((resolve) => {
        if (Number.isFinite(timeoutMs)) timer = setTimeout(() => resolve('timeout'), timeoutMs);
      });
      try {
        if ((await Promise.race([closer(), timeout])) === 'timeout') {
          console.error(`bench: a cleanup step took over ${timeoutMs} ms; moving on`);
        }
      } catch (err) {
        console.error(`bench: cleanup step failed: ${(err as Error).message}`);
      } finally {
        clearTimeout(timer);
      }
    }
  }
}

export function createContext(
  scale: number,
  resources: Resources,
  startStack: () => Promise<StackInfo>,
  client: HttpClientKind = 'fetch',
): BenchContext {
  let stack: Promise<StackInfo> | undefined;
  const shared = new Map<string, Promise<unknown>>();
  const ctx: BenchContext = {
    scale,
    http: httpClient(client),
    log: (message) => console.error(`[bench] ${message}`),
    stack: () => (stack ??= startStack()),
    async freshDatabase(prefix) {
      // The superuser: benches migrate, compare against raw tables and read as they like.
      const base = (await ctx.stack()).database.superuser;
      const name = `bench_${prefix}_${randomBytes(4).toString('hex')}`;
      const admin = new pg.Client({ connectionString: base });
      admin.on('error', () => undefined);
      await admin.connect();
      try {
        await admin.query(`CREATE DATABASE ${name}`);
      } finally {
        await admin.end();
      }
      const url = new URL(base);
      url.pathname = `/${name}`;
      return url.toString();
    },
    track: (close) => resources.track(close),
    throwIfStopping() {
      if (resources.closing) throw new Error('interrupted: cleaning up');
    },
    shared<T>(key: string, create: () => Promise<T>): Promise<T> {
      let p = shared.get(key) as Promise<T> | undefined;
      if (p === undefined) {
        p = create();
        shared.set(key, p);
      }
      return p;
    },
  };
  return ctx;
}

/** A superuser client for setup work (ANALYZE, counting, sampling); closed at exit. */
export async function adminClient(ctx: BenchContext, url: string): Promise<pg.Client> {
  const client = new pg.Client({ connectionString: url, application_name: 'bench-admin' });
  client.on('error', () => undefined);
  await client.connect();
  ctx.track(() => client.end());
  return client;
}

// ---------------------------------------------------------------------------------------------
// Goals, statistics, formatting

export function meets(ratio: number, goal: Goal): boolean {
  return goal.op === '>=' ? ratio >= goal.value : ratio <= goal.value;
}

export function goalText(goal: Goal): string {
  return `${goal.op === '>=' ? '≥' : '≤'} ${goal.value}×`;
}

export function verdict(ratio: number, goal: Goal): string {
  return meets(ratio, goal) ? 'PASS' : 'BELOW';
}

export function median(values: readonly number[]): number {
  return percentile(values, 50);
}

/** Nearest-rank percentile (p in 0..100) of unsorted values. */
export function percentile(values: readonly number[], p: number): number {
  if (values.length === 0) return Number.NaN;
  const sorted = [...values].sort((a, b) => a - b);
  const rank = Math.ceil((p / 100) * sorted.length);
  return sorted[Math.min(sorted.length - 1, Math.max(0, rank - 1))]!;
}

/** 12345.6 → "12,346"; small values keep three significant digits. */
export function fmtRate(perSecond: number): string {
  if (!Number.isFinite(perSecond)) return 'n/a';
  if (perSecond >= 100) return Math.round(perSecond).toLocaleString('en-US');
  return perSecond.toPrecision(3);
}

/** Milliseconds with a precision that suits the magnitude. */
export function fmtMs(ms: number): string {
  if (!Number.isFinite(ms)) return 'n/a';
  if (ms >= 100) return `${ms.toFixed(0)} ms`;
  if (ms >= 10) return `${ms.toFixed(1)} ms`;
  return `${ms.toFixed(2)} ms`;
}

export function fmtRatio(ratio: number): string {
  return Number.isFinite(ratio) ? `${ratio.toFixed(2)}×` : 'n/a';
}

export function fmtCount(n: number): string {
  return n.toLocaleString('en-US');
}

/** Prints an aligned table with a title; columns whose cells all look numeric are right-aligned. */
export function printTable(
  title: string,
  header: readonly string[],
  rows: readonly (readonly string[])[],
): void {
  const widths = header.map((h, i) => Math.max(h.length, ...rows.map((r) => (r[i] ?? '').length)));
  const numeric = header.map(
    (_, i) => rows.length > 0 && rows.every((r) => /^(?:[-\d.,≤≥×% ]|ms|s|KiB|n\/a)*$/.test(r[i] ?? '')),
  );
  const line = (cells: readonly string[]): string =>
    cells
      .map((c, i) => (numeric[i] ? c.padStart(widths[i]!) : c.padEnd(widths[i]!)))
      .join('  ')
      .trimEnd();
  console.log(`\n${title}`);
  console.log(line(header));
  console.log(widths.map((w) => '-'.repeat(w)).join('  '));
  for (const r of rows) console.log(line(r));
}

/** Clamps `value` into [min, max] and rounds it. */
export function scaled(base: number, scale: number, min: number, max = Number.POSITIVE_INFINITY): number {
  return Math.round(Math.min(max, Math.max(min, base * scale)));
}

/** Lets pending I/O callbacks run between synchronous chunks of work. */
export function yieldToLoop(): Promise<void> {
  return new Promise((resolve) => setImmediate(resolve));
}
