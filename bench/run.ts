/**
 * `npm run bench [-- <name>...]`: runs the benchmarks (all by default) and prints, for each, its
 * measurements, the ratio against a baseline measured side by side in the same run, the goal and a
 * PASS/BELOW verdict, then a summary of all ratios. Verdicts are informational: exit code 0 either
 * way (1 only when a benchmark could not run, 2 for usage errors, 130/143 on SIGINT/SIGTERM).
 *
 * BENCH_SCALE (default 1) multiplies row counts and measuring time: 0.05 for a quick smoke run,
 * 10 for the 10M-row query fixture. Progress goes to stderr, results to stdout. See docs/bench.md.
 */
import { startStack, stopStack, type StackInfo } from '../hack/stack/stack.ts';
import {
  createContext,
  fmtRatio,
  HTTP_CLIENTS,
  goalText,
  meets,
  printTable,
  Resources,
  type Benchmark,
  type HttpClientKind,
  type SummaryRow,
} from './common.ts';
import { controllerMemoryBenchmark } from './controller-memory.ts';
import { etcdBenchmark } from './etcd.ts';
import { exportBenchmark } from './export.ts';
import { formatsBenchmark } from './formats.ts';
import { getBenchmark } from './get.ts';
import { ingestBenchmark, ingestPrefill } from './ingest.ts';
import { kubeRequestsBenchmark } from './kube-requests.ts';
import { operatorBenchmark } from './operator.ts';
import { operatorCompareBenchmark } from './operator-compare.ts';
import { queryBenchmark } from './query.ts';
import { restartBenchmark } from './restart.ts';
import { signBenchmark } from './sign.ts';
import { transparencyBenchmark } from './transparency.ts';

const BENCHMARKS: readonly Benchmark[] = [
  ingestBenchmark,
  signBenchmark,
  queryBenchmark,
  getBenchmark,
  operatorBenchmark,
  operatorCompareBenchmark,
  kubeRequestsBenchmark,
  etcdBenchmark,
  transparencyBenchmark,
  formatsBenchmark,
  exportBenchmark,
  controllerMemoryBenchmark,
  restartBenchmark,
];

function usage(): string {
  return [
    'usage: npm run bench [-- <name>...]',
    '',
    'benchmarks:',
    ...BENCHMARKS.map((b) => `  ${b.name.padEnd(8)} ${b.title}`),
    '',
    'env: BENCH_SCALE=<number> (default 1) scales rows and measuring time; 10 loads 10M query rows.',
    '     BENCH_HTTP_CLIENT=http|fetch (default http): HTTP client of the query and get benchmarks.',
    '     BENCH_INGEST_PREFILL=<records> (default 0): ingest measured into vaults already holding them.',
    '     BENCH_INGEST_LAYOUT=twin|shared (default twin): raw COPY into a twin database, or into the same vault.',
    '     BENCH_OPERATOR_BASELINE=<checkout>: the controller operator-compare measures this one against',
    '     (operator-compare runs only when named).',
    '     BENCH_OPERATOR_ROUNDS, BENCH_PPROF_DIR (+ STACK_KUBE_PROFILING=1), BENCH_CANDIDATE_WITHOUT:',
    '     operator-compare rounds, API server profiles, what-ifs (docs/bench.md "Running").',
    "     BENCH_RESTART_HEAP_SNAPSHOT=<file>: restart writes the restarted controller's heap snapshot",
    '     there once it is idle (its memory figures then include what writing it took).',
  ].join('\n');
}

function parseScale(): number {
  const raw = process.env.BENCH_SCALE;
  if (raw === undefined || raw === '') return 1;
  const scale = Number(raw);
  if (!Number.isFinite(scale) || scale <= 0) {
    console.error(`BENCH_SCALE must be a positive number, got ${JSON.stringify(raw)}`);
    process.exit(2);
  }
  return scale;
}

function parseClient(): HttpClientKind {
  // node:http by default: the load generator shares the two cores with the server and PostgreSQL,
  // and undici's fetch costs about twice its CPU per request, which would be counted as API cost.
  const raw = process.env.BENCH_HTTP_CLIENT ?? 'http';
  if (!(HTTP_CLIENTS as readonly string[]).includes(raw)) {
    console.error(`BENCH_HTTP_CLIENT must be one of ${HTTP_CLIENTS.join(', ')}, got ${JSON.stringify(raw)}`);
    process.exit(2);
  }
  return raw as HttpClientKind;
}

function select(args: readonly string[]): Benchmark[] {
  if (args.includes('-h') || args.includes('--help')) {
    console.log(usage());
    process.exit(0);
  }
  // operator-compare needs a second checkout: only when asked for by name.
  if (args.length === 0) return BENCHMARKS.filter((b) => b !== operatorCompareBenchmark);
  const unknown = args.filter((a) => !BENCHMARKS.some((b) => b.name === a));
  if (unknown.length > 0) {
    console.error(`unknown benchmark ${unknown.join(', ')}\n\n${usage()}`);
    process.exit(2);
  }
  // Keep the canonical order (query before get, so get reuses the query fixture).
  return BENCHMARKS.filter((b) => args.includes(b.name));
}

/** Set once a signal (or a stray rejection) started the cleanup; the process exits when it ends. */
let shutdown: Promise<void> | undefined;

async function main(): Promise<number> {
  const selected = select(process.argv.slice(2));
  const scale = parseScale();
  const client = parseClient();
  // Checked before anything starts, like BENCH_SCALE: a usage error, not a failed benchmark.
  try {
    ingestPrefill();
  } catch (err) {
    console.error((err as Error).message);
    process.exit(2);
  }
  const resources = new Resources();

  // Cleanup on signals: stop the stack (and with it its temp dir) whatever is in flight.
  let stopping = false;
  const stop = (code: number): void => {
    stopping = true;
    shutdown = resources.closeAll().finally(() => process.exit(code));
  };
  const onSignal = (signal: NodeJS.Signals): void => {
    const code = signal === 'SIGINT' ? 130 : 143;
    if (stopping) {
      console.error(`bench: ${signal} again, exiting without waiting for cleanup`);
      process.exit(code);
    }
    console.error(`\nbench: ${signal}, stopping the stack and cleaning up…`);
    stop(code);
  };
  process.on('SIGINT', onSignal);
  process.on('SIGTERM', onSignal);
  // In-flight queries fail once the servers go away during cleanup: that is expected, not a crash.
  process.on('unhandledRejection', (err) => {
    if (stopping) return;
    console.error('bench: unhandled rejection', err);
    stop(1);
  });

  const ctx = createContext(
    scale,
    resources,
    async (): Promise<StackInfo> => {
      const t0 = performance.now();
      const starting = startStack({ log: (line) => console.error(`[stack] ${line}`) });
      // Registered before it is up, so a signal during start-up still stops what was started.
      resources.track(async () => {
        const info = await starting.catch(() => undefined);
        if (info === undefined) return; // startStack cleans up after itself when it fails
        console.error('[stack] stopping');
        await stopStack(info);
      }, Number.POSITIVE_INFINITY);
      const info = await starting;
      ctx.log(`stack up in ${((performance.now() - t0) / 1000).toFixed(1)} s (root ${info.root})`);
      return info;
    },
    client,
  );

  ctx.log(
    `BENCH_SCALE=${scale}, BENCH_HTTP_CLIENT=${client}; running ${selected.map((b) => b.name).join(', ')} ` +
      `(node ${process.version}, ${process.platform}/${process.arch})`,
  );
  const summary: SummaryRow[] = [];
  const failed: string[] = [];
  const t0 = performance.now();
  try {
    for (const bench of selected) {
      const started = performance.now();
      ctx.log(`── ${bench.name}: ${bench.title}`);
      try {
        summary.push(...(await bench.run(ctx)));
      } catch (err) {
        if (stopping) return 130;
        failed.push(bench.name);
        console.error(`bench: ${bench.name} failed:`, err);
      }
      ctx.log(`── ${bench.name} took ${((performance.now() - started) / 1000).toFixed(1)} s`);
    }
  } finally {
    if (!stopping) await resources.closeAll();
  }

  printTable(
    `Summary (BENCH_SCALE=${scale}, ${((performance.now() - t0) / 1000).toFixed(0)} s; verdicts are informational)`,
    ['benchmark', 'case', 'ratio of', 'ratio', 'goal', 'verdict'],
    summary.map((r) => [
      r.benchmark,
      r.case,
      r.ratioOf,
      fmtRatio(r.ratio),
      goalText(r.goal),
      meets(r.ratio, r.goal) ? 'PASS' : 'BELOW',
    ]),
  );
  if (failed.length > 0) {
    console.error(`bench: failed to run: ${failed.join(', ')}`);
    return 1;
  }
  return 0;
}

const code = await main();
// After a signal, main returns early: let the cleanup finish (it exits the process itself).
if (shutdown !== undefined) await shutdown;
// Exit explicitly: keep-alive sockets of the HTTP client must not keep a finished run alive.
process.exit(code);
