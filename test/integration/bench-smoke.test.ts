import { spawn } from 'node:child_process';
import { join } from 'node:path';
import { beforeAll, describe, expect, it } from 'vitest';
import { repoRoot } from '../../hack/stack/stack.ts';

/**
 * Benchmarks that cannot silently break (issue 29, item 5): every benchmark of `npm run bench`
 * runs once at a tiny scale and must print its result table. Only that it runs is asserted —
 * never a ratio, a rate or a verdict (speed goals are measured by bench/, never in a test).
 *
 * One bench process runs them all (`node bench/run.ts <names>`, what `npm run bench -- <names>`
 * runs), so the stack is started once and `query` and `get` share their read fixture. It starts
 * its own stack, apart from the suite's shared one: that is what the benchmarks do.
 * `operator-compare` needs a second checkout to compare with; here its baseline is this checkout
 * itself (the comparison is then meaningless, the code path is the same), with one round.
 */

const SCALE = '0.05';
const PREFILL = 20_000;
const BENCHMARKS = [
  'ingest',
  'sign',
  'query',
  'get',
  'operator',
  'operator-compare',
  'kube-requests',
  'etcd',
  'transparency',
  'formats',
  'export',
  'restart',
] as const;
/**
 * A hang, not a slow run: the whole run took 24–29 min (1,459 s, 1,755 s) at a load average of
 * 24–40 on the 2 shared cores (docs/bench.md, "The smoke test"), so the bound sits well above that.
 */
const RUN_TIMEOUT_MS = 75 * 60_000;

interface BenchRun {
  code: number | null;
  signal: NodeJS.Signals | null;
  stdout: string;
  stderr: string;
  seconds: number;
}

function runBench(names: readonly string[], env: Record<string, string> = {}): Promise<BenchRun> {
  return new Promise((resolve, reject) => {
    const t0 = performance.now();
    const child = spawn(process.execPath, [join(repoRoot, 'bench/run.ts'), ...names], {
      cwd: repoRoot,
      env: {
        ...process.env,
        BENCH_SCALE: SCALE,
        BENCH_OPERATOR_BASELINE: repoRoot,
        BENCH_OPERATOR_ROUNDS: '1',
        // The prefilled-vault path of ingest (a real run uses millions).
        BENCH_INGEST_PREFILL: String(PREFILL),
        ...env,
      },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let stdout = '';
    let stderr = '';
    child.stdout.setEncoding('utf8').on('data', (d: string) => (stdout += d));
    // Progress (stderr) is passed through as it comes, so a slow run shows where it is.
    child.stderr.setEncoding('utf8').on('data', (d: string) => {
      stderr += d;
      process.stderr.write(d);
    });
    // SIGTERM lets the bench stop its stack and remove its temp dir (bench/run.ts); SIGKILL if not.
    const timer = setTimeout(() => {
      child.kill('SIGTERM');
      setTimeout(() => child.kill('SIGKILL'), 60_000).unref();
    }, RUN_TIMEOUT_MS);
    child.on('error', reject);
    child.on('close', (code, signal) => {
      clearTimeout(timer);
      resolve({ code, signal, stdout, stderr, seconds: (performance.now() - t0) / 1000 });
    });
  });
}

/**
 * The tables a benchmark printed: a title line starting with its name (`ingest — …`,
 * `export: …`, optionally after `WHAT-IF `), then a header line, a rule of dashes and at least one
 * row.
 */
function tablesOf(stdout: string, name: string): string[] {
  const lines = stdout.split('\n');
  const title = new RegExp(`^(?:WHAT-IF .*)?${name.replace(/-/g, '\\-')}(?: —|:) `);
  const tables: string[] = [];
  for (let i = 0; i + 3 < lines.length; i++) {
    if (!title.test(lines[i]!)) continue;
    const rule = lines[i + 2]!;
    if (/^[- ]+$/.test(rule) && rule.includes('-') && lines[i + 3]!.trim() !== '') {
      tables.push(lines.slice(i, i + 4).join('\n'));
    }
  }
  return tables;
}

describe(`every benchmark runs at BENCH_SCALE=${SCALE} and prints its table`, () => {
  let run: BenchRun;

  beforeAll(async () => {
    run = await runBench(BENCHMARKS);
    // Its duration is the figure docs/bench.md quotes for this test's cost.
    console.log(
      `bench smoke: ${BENCHMARKS.length} benchmarks in ${run.seconds.toFixed(0)} s (exit ${run.code})`,
    );
  }, RUN_TIMEOUT_MS + 120_000);

  it('the bench process exits 0 and reports no benchmark as failed', () => {
    const failures = run.stderr.split('\n').filter((l) => /^bench: .*fail/.test(l));
    expect({ code: run.code, signal: run.signal, failures }, run.stderr.slice(-4000)).toEqual({
      code: 0,
      signal: null,
      failures: [],
    });
  });

  it.each(BENCHMARKS)('%s printed its result table', (name) => {
    expect(run.stderr, `${name} never started`).toContain(`── ${name}: `);
    expect(run.stderr).not.toContain(`bench: ${name} failed`);
    expect(tablesOf(run.stdout, name), `no table of ${name} in:\n${run.stdout.slice(-3000)}`).not.toEqual([]);
  });

  it('ingest ran into vaults prefilled with BENCH_INGEST_PREFILL records', () => {
    expect(run.stderr).toContain('ingest: prefill copied into the twin');
    expect(run.stdout).toContain(`into vaults prefilled with ${PREFILL.toLocaleString('en-US')} records`);
  });

  it('ends with the summary table', () => {
    expect(run.stdout).toMatch(/\nSummary \(BENCH_SCALE=0\.05, \d+ s; verdicts are informational\)\n/);
  });
});

describe("ingest with BENCH_INGEST_LAYOUT=shared (raw COPY into the full path's own vault)", () => {
  let run: BenchRun;

  beforeAll(async () => {
    run = await runBench(['ingest'], { BENCH_INGEST_LAYOUT: 'shared' });
  }, RUN_TIMEOUT_MS + 120_000);

  it('exits 0 and prints its table, both sides in one prefilled vault', () => {
    expect({ code: run.code, signal: run.signal }, run.stderr.slice(-4000)).toEqual({
      code: 0,
      signal: null,
    });
    expect(tablesOf(run.stdout, 'ingest'), run.stdout.slice(-3000)).not.toEqual([]);
    // The raw side's re-chained rows went through the vault's insert trigger, which refuses any
    // row that does not continue the chain at the head: a broken rechainRows fails the run above.
    expect(run.stderr).toContain(`prefilling the one vault with ${PREFILL.toLocaleString('en-US')} records`);
    expect(run.stdout).toContain(
      `both into one vault prefilled with ${PREFILL.toLocaleString('en-US')} records`,
    );
    expect(run.stderr).not.toContain('copied into the twin');
  });
});
