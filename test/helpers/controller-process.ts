/**
 * The REAL controller binary (src/bin/controller.ts) as a child process against the test stack, plus
 * what the operator tests around it need: a signer Secret, Run helpers over the admin client, polling,
 * scratch MinIO / PostgreSQL servers that a test may stop and start again on the same data dir and
 * port, and vault invariant queries.
 *
 * Every process started here is tracked; `stopAllControllers()` / `stop()` of the scratch servers go
 * in afterEach/afterAll, and an exit hook SIGKILLs leftovers so a crashed test run leaks nothing.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { readdirSync, readFileSync } from 'node:fs';
import { createHash } from 'node:crypto';
import { mkdir, mkdtemp, open, readdir, readFile, readlink, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { CoordinationV1Api, CoreV1Api, CustomObjectsApi, loadYaml } from '@kubernetes/client-node';
import pg from 'pg';
import { expect } from 'vitest';
import { runMinioServer, startMinio } from '../../hack/stack/minio.ts';
import { runPostgresServer, startPostgres } from '../../hack/stack/postgres.ts';
import { isAlive, stopProcess, type Proc } from '../../hack/stack/proc.ts';
import { isFinished, type Condition, type Run, type RunSpec } from '../../src/crd/run.ts';
import { envelopeDigest } from '../../src/attest/index.ts';
import { generateDevPki, toSecretData, type DevPki } from '../../hack/dev-pki.ts';
import { s3BlobStore } from '../../src/blob/store.ts';
import { verifyManifest } from '../../src/c2pa/index.ts';
import type { AibomMetadata } from '../../src/recorder/index.ts';
import { openVault, type ChainReport } from '../../src/vault/index.ts';
import { freshDatabase, kubeConfig, stack, uniqueName } from './stack.ts';

export const REPO_ROOT = fileURLToPath(new URL('../../', import.meta.url));
const BINS = {
  controller: join(REPO_ROOT, 'src/bin/controller.ts'),
  sidecar: join(REPO_ROOT, 'src/bin/sidecar.ts'),
};
export const SYSTEM_NAMESPACE = 'aibom-vault-system';

export const sleep = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));

/** A random integer in [min, max]. */
export const randomBetween = (min: number, max: number): number =>
  min + Math.floor(Math.random() * (max - min + 1));

/**
 * Polls `probe` until it returns a value other than `undefined`/`false`; the timeout is only a
 * failure bound. The error names what was awaited and the last value or error seen.
 */
export async function poll<T>(
  probe: () => Promise<T | undefined | false> | T | undefined | false,
  what: string,
  { timeoutMs = 120_000, intervalMs = 200 }: { timeoutMs?: number; intervalMs?: number } = {},
): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  let last: string;
  for (;;) {
    try {
      const v = await probe();
      if (v !== undefined && v !== false) return v;
      last = '';
    } catch (err) {
      last = ` (last error: ${(err as Error).message})`;
    }
    if (Date.now() > deadline) throw new Error(`timed out after ${timeoutMs} ms waiting for ${what}${last}`);
    await sleep(intervalMs);
  }
}

// ---------------------------------------------------------------------------------------------------
// The controller process
// ---------------------------------------------------------------------------------------------------

/** One pino line of the controller's log. */
export interface LogLine {
  level: number;
  time: string;
  msg: string;
  [key: string]: unknown;
}

export interface ControllerOptions {
  /** POD_NAME (the leader identity is `<name>-<random>`); also names the log file. */
  readonly name: string;
  /** Superuser URL of the vault database; the controller migrates it at start. */
  readonly databaseUrl: string;
  /** WATCH_NAMESPACE: the test's own namespace, so other files' controllers never touch its Runs. */
  readonly watchNamespace: string;
  /** LEADER_ELECTION_LEASE in aibom-vault-system. */
  readonly lease: string;
  /** SIGNER_SECRET as `namespace/name`. */
  readonly signerSecret: string;
  /** Directory of the log file. */
  readonly logDir: string;
  /** Extra or overriding environment (e.g. the S3_* of a scratch MinIO). */
  readonly env?: Readonly<Record<string, string>>;
  /** Which entry point: the controller (default) or the sidecar (API on a random loopback port). */
  readonly bin?: 'controller' | 'sidecar';
}

export interface Exit {
  readonly code: number | null;
  readonly signal: NodeJS.Signals | null;
}

const running = new Set<ControllerProcess>();
let exitHookInstalled = false;

/** A controller started with `startControllerProcess`. */
export class ControllerProcess {
  readonly name: string;
  readonly logFile: string;
  readonly pid: number;
  readonly startedAt: Date;
  /** Resolves when the process has exited (never rejects). */
  readonly exited: Promise<Exit>;
  #child: ChildProcess;
  #exit: Exit | undefined;

  constructor(name: string, logFile: string, child: ChildProcess, startedAt: Date) {
    this.name = name;
    this.logFile = logFile;
    this.#child = child;
    this.pid = child.pid ?? -1;
    this.startedAt = startedAt;
    this.exited = new Promise<Exit>((resolve) => {
      child.once('exit', (code, signal) => {
        this.#exit = { code, signal };
        running.delete(this);
        resolve(this.#exit);
      });
    });
  }

  get alive(): boolean {
    return this.#exit === undefined;
  }

  /** Sends `signal` (no-op when already gone). */
  signal(signal: NodeJS.Signals): void {
    if (this.#exit === undefined) this.#child.kill(signal);
  }

  /** SIGKILL and wait until the process is gone: a crash, no shutdown code runs. */
  async kill(): Promise<Exit> {
    this.signal('SIGKILL');
    return this.exited;
  }

  /** SIGTERM (graceful: stops the workers, releases the lease); SIGKILL if still alive after `graceMs`. */
  async terminate(graceMs = 30_000): Promise<Exit> {
    this.signal('SIGTERM');
    let timer: ReturnType<typeof setTimeout> | undefined;
    const timedOut = new Promise<'timeout'>((r) => (timer = setTimeout(r, graceMs, 'timeout')));
    const result = await Promise.race([this.exited, timedOut]);
    clearTimeout(timer);
    if (result === 'timeout') return this.kill();
    return result;
  }

  /** Waits for the exit, failing after `timeoutMs`. */
  async waitExit(timeoutMs = 60_000): Promise<Exit> {
    let timer: ReturnType<typeof setTimeout> | undefined;
    const timedOut = new Promise<never>(
      (_, reject) =>
        (timer = setTimeout(
          () => reject(new Error(`controller ${this.name} did not exit in ${timeoutMs} ms`)),
          timeoutMs,
        )),
    );
    try {
      return await Promise.race([this.exited, timedOut]);
    } finally {
      clearTimeout(timer);
    }
  }

  /** The JSON lines of the log so far (other lines, e.g. Node warnings, are skipped). */
  async logs(): Promise<LogLine[]> {
    const text = await readFile(this.logFile, 'utf8').catch(() => '');
    const out: LogLine[] = [];
    for (const line of text.split('\n')) {
      if (!line.startsWith('{')) continue;
      try {
        out.push(JSON.parse(line) as LogLine);
      } catch {
        /* a line cut by SIGKILL */
      }
    }
    return out;
  }

  /** The last `n` raw lines of the log, for failure messages. */
  async tail(n = 40): Promise<string> {
    const text = await readFile(this.logFile, 'utf8').catch(() => '');
    return text.trimEnd().split('\n').slice(-n).join('\n');
  }

  /** Waits until the log has at least `count` lines matching `match`; fails at once if the process exits. */
  async waitForLog(
    match: (l: LogLine) => boolean,
    what: string,
    { count = 1, timeoutMs = 120_000 }: { count?: number; timeoutMs?: number } = {},
  ): Promise<LogLine[]> {
    let outcome: { found: LogLine[] } | { exited: Exit };
    try {
      outcome = await poll(
        async () => {
          const found = (await this.logs()).filter(match);
          if (found.length >= count) return { found };
          // Read the log once more after an exit: the line may have been written just before.
          if (this.#exit !== undefined) {
            const again = (await this.logs()).filter(match);
            return again.length >= count ? { found: again } : { exited: this.#exit };
          }
          return undefined;
        },
        `${what} in the log of ${this.name}`,
        { timeoutMs, intervalMs: 100 },
      );
    } catch (err) {
      throw new Error(`${(err as Error).message}\n--- ${this.logFile} ---\n${await this.tail()}`, {
        cause: err,
      });
    }
    if ('exited' in outcome) {
      throw new Error(
        `controller ${this.name} exited (${JSON.stringify(outcome.exited)}) before ${what}\n--- ${this.logFile} ---\n${await this.tail()}`,
      );
    }
    return outcome.found;
  }

  /** Waits for the process to lead for the `term`-th time (1 = first term). */
  async waitLeading(opts: { term?: number; timeoutMs?: number } = {}): Promise<LogLine> {
    const lines = await this.waitForLog(isLeadingLine, 'leadership', {
      count: opts.term ?? 1,
      timeoutMs: opts.timeoutMs ?? 120_000,
    });
    return lines[(opts.term ?? 1) - 1]!;
  }

  /** The leader-election identity (`<POD_NAME>-<hex>`), from the log. */
  async identity(): Promise<string> {
    const lines = await this.waitForLog((l) => typeof l.identity === 'string', 'a line with the identity', {
      timeoutMs: 60_000,
    });
    return lines[0]!.identity as string;
  }

  /**
   * Port of /metrics, /healthz, /readyz (METRICS_PORT=0 picks one): the controller's start line
   * logs it (once it is started), the sidecar's ops server's start line for a sidecar.
   */
  async metricsPort(): Promise<number> {
    const lines = await this.waitForLog(
      (l) => l.msg === 'controller started' || (l.name === 'sidecar' && l.msg === 'ops server listening'),
      'controller started (or the sidecar ops server listening)',
      { timeoutMs: 60_000 },
    );
    return lines[0]!.port as number;
  }

  /** Base URL of the API of a sidecar process (HTTP_PORT=0 picks one; the start line logs it). */
  async apiUrl(): Promise<string> {
    const lines = await this.waitForLog((l) => l.msg === 'sidecar listening', 'sidecar listening', {
      timeoutMs: 60_000,
    });
    return lines[0]!.address as string;
  }

  /** The Prometheus text exposition. */
  async metrics(): Promise<string> {
    const res = await fetch(`http://127.0.0.1:${await this.metricsPort()}/metrics`);
    if (!res.ok) throw new Error(`/metrics answered ${res.status}`);
    return res.text();
  }
}

export const isLeadingLine = (l: LogLine): boolean =>
  l.msg === 'leading: starting the Run informer and workers';

/** The value of one sample of a Prometheus text exposition (0 when absent). */
export function metricValue(text: string, name: string, labels: Record<string, string> = {}): number {
  let sum = 0;
  for (const line of text.split('\n')) {
    if (!line.startsWith(`${name}{`) && !line.startsWith(`${name} `)) continue;
    const ok = Object.entries(labels).every(([k, v]) => line.includes(`${k}="${v}"`));
    if (ok) sum += Number(line.split(' ').pop());
  }
  return sum;
}

/**
 * Starts `node src/bin/controller.ts` (the machine's Node 24 = process.execPath) against the stack.
 * Resolves once the process is spawned; use `waitForLog`/`waitLeading` for readiness. Output (pino
 * JSON, LOG_LEVEL=info) goes to `<logDir>/<name>.log`.
 */
export async function startControllerProcess(opts: ControllerOptions): Promise<ControllerProcess> {
  installExitHook();
  await mkdir(opts.logDir, { recursive: true });
  const logFile = join(opts.logDir, `${opts.name}.log`);
  const log = await open(logFile, 'a');
  const e = stack().env;
  const env: NodeJS.ProcessEnv = {
    PATH: process.env.PATH ?? '/usr/bin:/bin',
    HOME: process.env.HOME ?? tmpdir(),
    LOG_LEVEL: 'info',
    DATABASE_URL: opts.databaseUrl,
    S3_ENDPOINT: e.S3_ENDPOINT,
    S3_ACCESS_KEY: e.S3_ACCESS_KEY,
    S3_SECRET_KEY: e.S3_SECRET_KEY,
    S3_BUCKET: e.S3_BUCKET,
    KUBECONFIG: stack().kube.kubeconfigs['aibom-vault'],
    POD_NAMESPACE: SYSTEM_NAMESPACE,
    POD_NAME: opts.name,
    LEADER_ELECTION_LEASE: opts.lease,
    WATCH_NAMESPACE: opts.watchNamespace,
    SIGNER_SECRET: opts.signerSecret,
    METRICS_PORT: '0',
    ...(opts.bin === 'sidecar' ? { HTTP_HOST: '127.0.0.1', HTTP_PORT: '0' } : {}),
    ...opts.env,
  };
  try {
    const child = spawn(process.execPath, [BINS[opts.bin ?? 'controller']], {
      cwd: REPO_ROOT,
      env,
      stdio: ['ignore', log.fd, log.fd],
    });
    await new Promise<void>((resolve, reject) => {
      child.once('error', reject);
      child.once('spawn', resolve);
    });
    const proc = new ControllerProcess(opts.name, logFile, child, new Date());
    running.add(proc);
    return proc;
  } finally {
    await log.close();
  }
}

/** SIGKILLs every controller still running (afterEach/afterAll). */
export async function stopAllControllers(): Promise<void> {
  await Promise.all([...running].map((p) => p.kill()));
}

function installExitHook(): void {
  if (exitHookInstalled) return;
  exitHookInstalled = true;
  process.once('exit', () => {
    for (const p of running) p.signal('SIGKILL');
  });
}

/** Intervals during which each process led, from the logs ([start, end); end = exit or now). */
export async function leadershipTerms(
  procs: readonly ControllerProcess[],
  endOf: (p: ControllerProcess) => Date,
): Promise<{ name: string; start: number; end: number }[]> {
  const terms: { name: string; start: number; end: number }[] = [];
  for (const p of procs) {
    let open: number | undefined;
    for (const l of await p.logs()) {
      if (l.msg === 'started leading') open = Date.parse(l.time);
      else if (l.msg === 'stopped leading' && open !== undefined) {
        terms.push({ name: p.name, start: open, end: Date.parse(l.time) });
        open = undefined;
      }
    }
    if (open !== undefined) terms.push({ name: p.name, start: open, end: endOf(p).getTime() });
  }
  return terms.sort((a, b) => a.start - b.start);
}

// ---------------------------------------------------------------------------------------------------
// Kubernetes: namespace, signer Secret, Runs, Lease
// ---------------------------------------------------------------------------------------------------

const GROUP = 'vault.service.dev';
const VERSION = 'v1';

export function customObjects(): CustomObjectsApi {
  return kubeConfig('admin').makeApiClient(CustomObjectsApi);
}

/** A fresh namespace holding a kubernetes.io/tls signer Secret from `generateDevPki()`. */
export async function namespaceWithSigner(
  prefix: string,
): Promise<{ namespace: string; signerSecret: string; pki: DevPki }> {
  const namespace = uniqueName(prefix);
  const core = kubeConfig('admin').makeApiClient(CoreV1Api);
  await core.createNamespace({ body: { metadata: { name: namespace } } });
  const pki = await generateDevPki();
  const name = 'operator-test-signer';
  await core.createNamespacedSecret({
    namespace,
    body: { metadata: { name }, type: 'kubernetes.io/tls', data: toSecretData(pki) },
  });
  return { namespace, signerSecret: `${namespace}/${name}`, pki };
}

/** The spec of manifests/samples/run.yaml (three steps: tool, model, tool). */
export async function sampleRunSpec(): Promise<RunSpec> {
  const doc = loadYaml<{ spec: RunSpec }>(
    await readFile(join(REPO_ROOT, 'manifests/samples/run.yaml'), 'utf8'),
  );
  return doc.spec;
}

export async function createRun(namespace: string, name: string, spec: RunSpec): Promise<Run> {
  return (await customObjects().createNamespacedCustomObject({
    group: GROUP,
    version: VERSION,
    namespace,
    plural: 'runs',
    body: { apiVersion: `${GROUP}/${VERSION}`, kind: 'Run', metadata: { name }, spec },
  })) as Run;
}

export async function getRun(namespace: string, name: string): Promise<Run> {
  return (await customObjects().getNamespacedCustomObject({
    group: GROUP,
    version: VERSION,
    namespace,
    plural: 'runs',
    name,
  })) as Run;
}

export function conditionOf(run: Run, type: string): Condition | undefined {
  return run.status?.conditions?.find((c) => c.type === type);
}

/** Polls the Run (admin client) until `pred` holds for its `type` condition; returns the Run. */
export async function waitForCondition(
  namespace: string,
  name: string,
  type: string,
  pred: (c: Condition | undefined, run: Run) => boolean,
  what: string,
  timeoutMs = 120_000,
): Promise<Run> {
  let last: Condition | undefined;
  try {
    return await poll(
      async () => {
        const run = await getRun(namespace, name);
        last = conditionOf(run, type);
        return pred(last, run) ? run : undefined;
      },
      `${namespace}/${name}: ${what}`,
      { timeoutMs, intervalMs: 250 },
    );
  } catch (err) {
    throw new Error(`${(err as Error).message}; last ${type} condition: ${JSON.stringify(last)}`, {
      cause: err,
    });
  }
}

export const aibomReady = (c: Condition | undefined): boolean =>
  c?.status === 'True' && c.reason === 'AIBOMRecorded';

/** The holder of a Lease in aibom-vault-system ('' when released, undefined when absent). */
export async function leaseHolder(lease: string): Promise<string | undefined> {
  try {
    const l = await kubeConfig('admin')
      .makeApiClient(CoordinationV1Api)
      .readNamespacedLease({ namespace: SYSTEM_NAMESPACE, name: lease });
    return l.spec?.holderIdentity ?? '';
  } catch (err) {
    if ((err as { code?: number }).code === 404) return undefined;
    throw err;
  }
}

// ---------------------------------------------------------------------------------------------------
// Scratch servers a test may stop and start again (same data dir, same port)
// ---------------------------------------------------------------------------------------------------

export interface ScratchMinio {
  readonly endpoint: string;
  readonly accessKey: string;
  readonly secretKey: string;
  readonly bucket: string;
  /** S3_* variables for the controller. */
  readonly env: Record<string, string>;
  readonly running: boolean;
  /** SIGTERM, then SIGKILL after a grace period; resolves when the server is gone. */
  stop(): Promise<void>;
  /** Starts the server again on the same data dir and port; resolves when it is ready. */
  start(): Promise<void>;
  /** Stops it for good and removes its data. */
  dispose(): Promise<void>;
  /** SIGSTOP: the server hangs (connections stay open, nothing is answered). */
  pause(): void;
  /** SIGCONT after pause(). */
  resume(): void;
}

/** Every process below `pid` (children, grandchildren, ...), from /proc/<n>/stat. */
function descendants(pid: number): number[] {
  const parent = new Map<number, number>();
  for (const entry of readdirSync('/proc')) {
    if (!/^\d+$/.test(entry)) continue;
    try {
      const stat = readFileSync(`/proc/${entry}/stat`, 'utf8');
      // pid (comm) state ppid ...: comm may contain spaces and parentheses; ppid follows the last ')'.
      const ppid = Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[1]);
      parent.set(Number(entry), ppid);
    } catch {
      /* exited meanwhile */
    }
  }
  const out: number[] = [];
  const walk = (p: number): void => {
    for (const [child, pp] of parent) {
      if (pp === p) {
        out.push(child);
        walk(child);
      }
    }
  };
  walk(pid);
  return out;
}

/**
 * SIGSTOP / SIGCONT to a server and everything below it, so it accepts TCP connections (the kernel
 * does) and answers nothing: a hung dependency, not a down one. The process group is not enough:
 * PostgreSQL puts every backend in a session of its own (setsid), so stopping the postmaster's
 * group leaves open connections served. Stop: the server first (no new children), then its
 * descendants; continue: the other way round.
 */
function signalTree(pid: number, signal: 'SIGSTOP' | 'SIGCONT'): void {
  const kill = (p: number): void => {
    try {
      process.kill(p, signal);
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code !== 'ESRCH') throw err;
    }
  };
  if (signal === 'SIGSTOP') {
    kill(pid);
    for (const p of descendants(pid)) kill(p);
  } else {
    for (const p of descendants(pid)) kill(p);
    kill(pid);
  }
}

const paused = new Set<number>();
process.once('exit', () => {
  for (const pid of paused) {
    try {
      signalTree(pid, 'SIGCONT');
    } catch {
      /* gone */
    }
  }
});

function pauser(current: () => Proc | undefined): {
  pause: () => void;
  resume: () => void;
  wake: () => void;
} {
  return {
    pause: () => {
      const p = current();
      if (!p) throw new Error('server is not running');
      signalTree(p.pid, 'SIGSTOP');
      paused.add(p.pid);
    },
    resume: () => {
      const p = current();
      if (!p) throw new Error('server is not running');
      signalTree(p.pid, 'SIGCONT');
      paused.delete(p.pid);
    },
    /** Before stopping: a stopped process cannot handle SIGTERM. */
    wake: () => {
      const p = current();
      if (p && paused.delete(p.pid)) signalTree(p.pid, 'SIGCONT');
    },
  };
}

/** A second MinIO (hack/stack/minio.ts) in its own temp dir, with its own bucket. */
export async function startScratchMinio(bucket = 'aibom-vault'): Promise<ScratchMinio> {
  const root = await mkdtemp(join(tmpdir(), 'aibom-vault-minio-'));
  const binary = stack().tools.minio;
  let m: Awaited<ReturnType<typeof startMinio>>;
  try {
    m = await startMinio(root, binary, bucket);
  } catch (err) {
    await rm(root, { recursive: true, force: true });
    throw err;
  }
  const port = Number(new URL(m.endpoint).port);
  let proc: Proc | undefined = m.proc;
  const p = pauser(() => proc);
  return {
    pause: p.pause,
    resume: p.resume,
    endpoint: m.endpoint,
    accessKey: m.accessKey,
    secretKey: m.secretKey,
    bucket: m.bucket,
    env: {
      S3_ENDPOINT: m.endpoint,
      S3_ACCESS_KEY: m.accessKey,
      S3_SECRET_KEY: m.secretKey,
      S3_BUCKET: m.bucket,
    },
    get running() {
      return proc !== undefined && isAlive(proc.pid);
    },
    async stop() {
      p.wake();
      if (proc) await stopProcess(proc.pid);
      proc = undefined;
    },
    async start() {
      if (proc && isAlive(proc.pid)) return;
      proc = await runMinioServer(root, binary, port, m.accessKey, m.secretKey);
    },
    async dispose() {
      p.wake();
      if (proc) await stopProcess(proc.pid);
      proc = undefined;
      await rm(root, { recursive: true, force: true });
    },
  };
}

export interface ScratchPostgres {
  /** Superuser URL of its `vault` database. */
  readonly url: string;
  /** Its `vault` database as the owner login (migrations) and as the runtime login (docs/vault.md). */
  readonly ownerUrl: string;
  readonly runtimeUrl: string;
  readonly port: number;
  readonly running: boolean;
  /** Fast shutdown (SIGINT: clients are disconnected at once), SIGKILL fallback. */
  stop(): Promise<void>;
  /** Starts the server again on the same data dir and port; resolves when it accepts queries. */
  start(): Promise<void>;
  dispose(): Promise<void>;
  /** SIGSTOP of the server and its backends: every query hangs. */
  pause(): void;
  /** SIGCONT after pause(). */
  resume(): void;
}

/** A separate PostgreSQL (hack/stack/postgres.ts) in its own temp dir. */
export async function startScratchPostgres(): Promise<ScratchPostgres> {
  const root = await mkdtemp(join(tmpdir(), 'aibom-vault-pg-'));
  let pgInfo: Awaited<ReturnType<typeof startPostgres>>;
  try {
    pgInfo = await startPostgres(root);
  } catch (err) {
    await rm(root, { recursive: true, force: true });
    throw err;
  }
  const { port, url, ownerUrl, runtimeUrl } = pgInfo;
  let proc: Proc | undefined = pgInfo.proc;
  const p = pauser(() => proc);
  const stop = async (): Promise<void> => {
    p.wake();
    if (!proc) return;
    const pid = proc.pid;
    proc = undefined;
    if (!isAlive(pid)) return;
    process.kill(pid, 'SIGINT');
    const deadline = Date.now() + 20_000;
    while (isAlive(pid) && Date.now() < deadline) await sleep(50);
    if (isAlive(pid)) await stopProcess(pid, 1_000);
  };
  return {
    url,
    ownerUrl,
    runtimeUrl,
    port,
    pause: p.pause,
    resume: p.resume,
    get running() {
      return proc !== undefined && isAlive(proc.pid);
    },
    stop,
    async start() {
      if (proc && isAlive(proc.pid)) return;
      proc = await runPostgresServer(root, port, url);
    },
    async dispose() {
      await stop();
      await rm(root, { recursive: true, force: true });
    },
  };
}

// ---------------------------------------------------------------------------------------------------
// Vault invariants (read with the superuser URL)
// ---------------------------------------------------------------------------------------------------

export interface VaultFacts {
  /** artifacts rows of kind aibom per run id. */
  readonly aibomArtifacts: Map<string, number>;
  /** `aibom` attestations per run id. */
  readonly aibomAttestations: Map<string, number>;
  /** `step` attestations per `<run>/<step>`. */
  readonly stepAttestations: Map<string, number>;
  /** `run` attestations per run id. */
  readonly runAttestations: Map<string, number>;
  /** Total attestation rows, and ids referenced by claims (with multiplicity). */
  readonly attestationCount: number;
  readonly claimedIds: string[];
  readonly attestationIds: Set<string>;
  readonly claimKeys: string[];
  readonly chain: ChainReport;
}

/**
 * A short-lived superuser pool. `end()` resolves before the sockets are closed; a server stopped right
 * after would make an idle client emit an error, which with no listener is an uncaught exception.
 */
function quietPool(connectionString: string, max: number): pg.Pool {
  const pool = new pg.Pool({ connectionString, max });
  pool.on('error', () => undefined);
  return pool;
}

const countBy = (rows: { k: string; n: string }[]): Map<string, number> =>
  new Map(rows.map((r) => [r.k, Number(r.n)]));

export async function vaultFacts(databaseUrl: string): Promise<VaultFacts> {
  const pool = quietPool(databaseUrl, 2);
  try {
    const q = async (text: string) => (await pool.query<{ k: string; n: string }>(text)).rows;
    const [aibomArtifacts, aibomAttestations, stepAttestations, runAttestations] = await Promise.all([
      q(`SELECT run_id::text AS k, count(*) AS n FROM artifacts WHERE kind = 'aibom' GROUP BY run_id`),
      q(`SELECT run_id::text AS k, count(*) AS n FROM attestations WHERE kind = 'aibom' GROUP BY run_id`),
      q(
        `SELECT run_id::text || '/' || step_id AS k, count(*) AS n FROM attestations WHERE kind = 'step' GROUP BY run_id, step_id`,
      ),
      q(`SELECT run_id::text AS k, count(*) AS n FROM attestations WHERE kind = 'run' GROUP BY run_id`),
    ]);
    const ids = await pool.query<{ id: string }>('SELECT id::text AS id FROM attestations');
    const claims = await pool.query<{ key: string; ids: string[] }>(
      'SELECT key, attestation_ids::text[] AS ids FROM attestation_claims',
    );
    return {
      aibomArtifacts: countBy(aibomArtifacts),
      aibomAttestations: countBy(aibomAttestations),
      stepAttestations: countBy(stepAttestations),
      runAttestations: countBy(runAttestations),
      attestationCount: ids.rows.length,
      attestationIds: new Set(ids.rows.map((r) => r.id)),
      claimedIds: claims.rows.flatMap((r) => r.ids),
      claimKeys: claims.rows.map((r) => r.key),
      chain: await (await openVault(pool)).attestations.verifyChain({ digestOf: envelopeDigest }),
    };
  } finally {
    await pool.end();
  }
}

export const sha256Digest = (b: Buffer): string => `sha256:${createHash('sha256').update(b).digest('hex')}`;

/** The invariants every operator test ends with: nothing lost, nothing twice, the chain intact. */
export async function expectOneAibomPerRun(url: string, runs: readonly Run[]): Promise<void> {
  const facts = await vaultFacts(url);
  expect(facts.chain.ok, JSON.stringify(facts.chain)).toBe(true);
  expect(facts.claimKeys.length).toBe(new Set(facts.claimKeys).size);
  expect(facts.claimedIds.length).toBe(facts.attestationCount);
  expect(new Set(facts.claimedIds)).toEqual(facts.attestationIds);
  for (const run of runs) {
    const id = run.metadata.uid;
    expect(facts.aibomArtifacts.get(id), `${run.metadata.name}: artifacts rows`).toBe(1);
    expect(facts.aibomAttestations.get(id), `${run.metadata.name}: aibom attestations`).toBe(1);
    expect(facts.runAttestations.get(id), `${run.metadata.name}: run attestations`).toBe(1);
    for (const s of run.status?.steps ?? []) {
      if (!isFinished(s)) continue;
      expect(
        facts.stepAttestations.get(`${id}/${s.id}`),
        `${run.metadata.name}/${s.id}: step attestations`,
      ).toBe(1);
    }
    const finished = (run.status?.steps ?? []).filter(isFinished).length;
    const steps = [...facts.stepAttestations.keys()].filter((k) => k.startsWith(`${id}/`)).length;
    expect(steps).toBe(finished);
  }
}

/**
 * The Kubernetes side agrees with the vault for each Run: status counts and AIBOM digest, and one
 * Attestation resource per vault record of the run (named by the vault id), none extra.
 */
export async function expectKubeMirrorsVault(databaseUrl: string, runs: readonly Run[]): Promise<void> {
  const pool = quietPool(databaseUrl, 1);
  try {
    for (const run of runs) {
      const { name, namespace, uid } = run.metadata;
      const ids = await pool.query<{ id: string }>(
        'SELECT id::text AS id FROM attestations WHERE run_id = $1 ORDER BY seq',
        [uid],
      );
      const art = await pool.query<{ digest: string }>(
        `SELECT digest FROM artifacts WHERE run_id = $1 AND kind = 'aibom'`,
        [uid],
      );
      expect(run.status?.attestations?.count, `${name}: status.attestations.count`).toBe(ids.rows.length);
      expect((run.status?.artifacts?.aibom as { digest?: string } | undefined)?.digest).toBe(
        art.rows[0]?.digest,
      );
      const list = (await customObjects().listNamespacedCustomObject({
        group: GROUP,
        version: VERSION,
        namespace,
        plural: 'attestations',
        labelSelector: `vault.service.dev/run=${name}`,
      })) as { items: { metadata: { name: string } }[] };
      expect(list.items.map((i) => i.metadata.name).sort(), `${name}: Attestation resources`).toEqual(
        ids.rows.map((r) => r.id).sort(),
      );
    }
  } finally {
    await pool.end();
  }
}

/**
 * Runs whose AIBOM attestation names a different C2PA sidecar than the artifacts row: must be none,
 * since both are written in one transaction (src/recorder/aibom.ts).
 */
export async function manifestRefMismatches(databaseUrl: string): Promise<string[]> {
  const pool = quietPool(databaseUrl, 1);
  try {
    const { rows } = await pool.query<{ run_id: string }>(
      `SELECT a.run_id::text AS run_id FROM attestations a JOIN artifacts f ON f.run_id = a.run_id AND f.kind = 'aibom'
       WHERE a.kind = 'aibom'
         AND a.c2pa_manifest_ref IS DISTINCT FROM
             's3://' || (f.metadata #>> '{c2pa_manifest,bucket}') || '/' || (f.metadata #>> '{c2pa_manifest,key}')`,
    );
    return rows.map((r) => r.run_id);
  } finally {
    await pool.end();
  }
}

// ---------------------------------------------------------------------------------------------------
// A test's own corner of the stack, and checks of what the controller stored
// ---------------------------------------------------------------------------------------------------

/**
 * Each test has its own namespace (WATCH_NAMESPACE: Runs another test left behind are not its
 * controller's business) with its own signer Secret, and its own Lease, so a SIGKILLed holder of
 * one test never delays the next. `dbPrefix` null: the test brings its own database.
 */
export async function testEnv(prefix: string, dbPrefix: string | null, logDir: string) {
  const { namespace, signerSecret, pki } = await namespaceWithSigner(prefix);
  const lease = uniqueName(prefix);
  const databaseUrl = dbPrefix === null ? '' : await freshDatabase(dbPrefix);
  const opts = (url = databaseUrl): Omit<ControllerOptions, 'name'> => ({
    databaseUrl: url,
    watchNamespace: namespace,
    lease,
    signerSecret,
    logDir,
  });
  return { namespace, signerSecret, pki, lease, databaseUrl, opts };
}

/** The stack's own S3-compatible store, as S3 options. */
export function stackS3(): { endpoint: string; accessKey: string; secretKey: string; bucket: string } {
  const e = stack().env;
  return {
    endpoint: e.S3_ENDPOINT!,
    accessKey: e.S3_ACCESS_KEY!,
    secretKey: e.S3_SECRET_KEY!,
    bucket: e.S3_BUCKET!,
  };
}

/** The AIBOM blob the record names is the recorded bytes, and its C2PA sidecar verifies. */
export async function expectArtifactVerifies(
  pki: DevPki,
  run: Run,
  s3: { endpoint: string; accessKey: string; secretKey: string; bucket: string },
): Promise<void> {
  const blobs = s3BlobStore(s3);
  const meta = run.status?.artifacts?.aibom as AibomMetadata | undefined;
  expect(meta, `${run.metadata.name}: status.artifacts.aibom`).toBeDefined();
  const blob = await blobs.get(meta!.key);
  expect(blob, `${run.metadata.name}: AIBOM blob`).not.toBeNull();
  expect(sha256Digest(blob!)).toBe(meta!.digest);
  const store = await blobs.get(meta!.c2pa_manifest.key);
  expect(store, `${run.metadata.name}: C2PA sidecar`).not.toBeNull();
  const verified = verifyManifest({ store: store!, asset: blob!, trustAnchors: pki['ca.crt'] });
  expect(verified.problems).toEqual([]);
  expect(verified.ok).toBe(true);
  expect(verified.runId).toBe(run.metadata.uid);
}

/** Events about an object (the core/v1 view `kubectl describe` uses). */
export async function eventsOf(
  namespace: string,
  uid: string,
): Promise<{ type?: string; reason?: string; message?: string; note?: string }[]> {
  const list = await kubeConfig('admin')
    .makeApiClient(CoreV1Api)
    .listNamespacedEvent({ namespace, fieldSelector: `involvedObject.uid=${uid}` });
  return list.items.map((e) => ({
    ...(e.type !== undefined ? { type: e.type } : {}),
    ...(e.reason !== undefined ? { reason: e.reason } : {}),
    ...(e.message !== undefined ? { message: e.message } : {}),
  }));
}

const TCP_ESTABLISHED = '01';

/**
 * TCP connections process `pid` holds to `port` on the loopback, with their kernel state
 * (/proc/<pid>/fd socket inodes matched against /proc/net/tcp{,6}). `established` counts those
 * still open both ways: a request that was really aborted leaves none.
 */
export async function connectionsTo(
  pid: number,
  port: number,
): Promise<{ established: number; all: number }> {
  const fdDir = `/proc/${pid}/fd`;
  const inodes = new Set<string>();
  for (const fd of await readdir(fdDir).catch(() => [] as string[])) {
    const target = await readlink(join(fdDir, fd)).catch(() => '');
    const m = /^socket:\[(\d+)\]$/.exec(target);
    if (m) inodes.add(m[1]!);
  }
  let established = 0;
  let all = 0;
  for (const table of ['/proc/net/tcp', '/proc/net/tcp6']) {
    const text = await readFile(table, 'utf8').catch(() => '');
    for (const line of text.split('\n').slice(1)) {
      const cols = line.trim().split(/\s+/);
      if (cols.length < 10) continue;
      const remotePort = parseInt(cols[2]!.split(':')[1]!, 16);
      if (remotePort !== port || !inodes.has(cols[9]!)) continue;
      all++;
      if (cols[3] === TCP_ESTABLISHED) established++;
    }
  }
  return { established, all };
}
