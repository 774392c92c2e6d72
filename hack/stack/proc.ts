import { spawn, type SpawnOptions } from 'node:child_process';
import { createServer } from 'node:net';
import { readFileSync } from 'node:fs';
import { open, readFile } from 'node:fs/promises';

/** A started server process: its own process group, output in `logFile`. */
export interface Proc {
  readonly name: string;
  readonly pid: number;
  readonly logFile: string;
  /**
   * When it started (processStartMs, ms since the epoch): which process `pid` named, once the
   * kernel may have given the number to another (pid_max is 32,768 here; a test run spawns
   * thousands). Absent in states written before it was recorded: the pid alone then.
   */
  readonly started?: number;
}

export interface StartOptions {
  readonly name: string;
  readonly command: string;
  readonly args: readonly string[];
  readonly logFile: string;
  readonly env?: NodeJS.ProcessEnv;
  readonly cwd?: string;
  readonly uid?: number;
  readonly gid?: number;
  /** Told about the process the moment it exists, before it is ready (see Launch). */
  readonly onSpawn?: (proc: Proc) => void;
}

/**
 * How a start reports what it spawned and learns that it should give up. A stack start records
 * every process here as soon as it is spawned (not when its component is ready), so a start that
 * fails half-way stops exactly what exists; `signal` aborts the readiness waits of components
 * still starting once another one has failed.
 */
export interface Launch {
  readonly onSpawn?: (proc: Proc) => void;
  readonly signal?: AbortSignal;
}

/**
 * Starts a server detached in its own process group so `stack down` (a different process) can stop
 * the whole group, and so `stack up` can exit while the servers keep running.
 */
export async function startProcess(opts: StartOptions): Promise<Proc> {
  const log = await open(opts.logFile, 'a');
  const spawnOpts: SpawnOptions = {
    detached: true,
    stdio: ['ignore', log.fd, log.fd],
    env: opts.env ?? process.env,
    ...(opts.cwd !== undefined ? { cwd: opts.cwd } : {}),
    ...(opts.uid !== undefined ? { uid: opts.uid } : {}),
    ...(opts.gid !== undefined ? { gid: opts.gid } : {}),
  };
  const child = spawn(opts.command, opts.args, spawnOpts);
  // Listen before any await: 'spawn' and 'error' fire on the next tick.
  const spawned = new Promise<number>((resolve, reject) => {
    child.once('error', (err) =>
      reject(new StartError(opts.name, `cannot execute ${opts.command}: ${err.message}`, '')),
    );
    child.once('spawn', () => resolve(child.pid ?? -1));
  });
  try {
    const pid = await spawned;
    const started = processStartMs(pid);
    const proc = {
      name: opts.name,
      pid,
      logFile: opts.logFile,
      ...(started !== undefined ? { started } : {}),
    };
    opts.onSpawn?.(proc);
    return proc;
  } finally {
    child.unref();
    await log.close();
  }
}

/** USER_HZ: /proc reports process start times in these ticks (fixed at 100 by the kernel ABI). */
const TICKS_PER_S = 100;
/** btime is whole seconds and moves with clock adjustments: starts this close are the same. */
export const START_SLACK_MS = 2_000;

/** When the process `pid` started (ms since the epoch), or undefined when there is none (or a zombie). */
export function processStartMs(pid: number): number | undefined {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    const sys = readFileSync('/proc/stat', 'utf8');
    // The fields after the command (which may hold spaces and parentheses): state is field 3,
    // starttime field 22.
    const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
    const ticks = Number(fields[19]);
    const btime = Number(/^btime (\d+)$/m.exec(sys)?.[1]);
    if (!Number.isFinite(ticks) || !Number.isFinite(btime) || fields[0] === 'Z') return undefined;
    return btime * 1000 + (ticks * 1000) / TICKS_PER_S;
  } catch {
    return undefined;
  }
}

/** Whether `p` still runs: its pid is alive and is the process started then, not a later one. */
export function isRunning(p: Pick<Proc, 'pid' | 'started'>): boolean {
  if (p.started === undefined) return isAlive(p.pid);
  const now = processStartMs(p.pid);
  return now !== undefined && Math.abs(now - p.started) <= START_SLACK_MS;
}

/** stopProcess for a process of a stack, unless it is gone and its pid names someone else's now. */
export async function stopProc(p: Pick<Proc, 'pid' | 'started'>, graceMs?: number): Promise<void> {
  if (isRunning(p)) await stopProcess(p.pid, graceMs);
}

export function isAlive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (err) {
    return (err as NodeJS.ErrnoException).code === 'EPERM';
  }
}

/** SIGTERM to the process group, then SIGKILL after `graceMs`; resolves when the leader is gone. */
export async function stopProcess(pid: number, graceMs = 10_000): Promise<void> {
  const signalGroup = (sig: NodeJS.Signals): void => {
    try {
      process.kill(-pid, sig);
    } catch {
      try {
        process.kill(pid, sig);
      } catch {
        /* already gone */
      }
    }
  };
  if (!isAlive(pid)) return;
  signalGroup('SIGTERM');
  const deadline = Date.now() + graceMs;
  while (isAlive(pid) && Date.now() < deadline) await sleep(50);
  if (isAlive(pid)) {
    signalGroup('SIGKILL');
    while (isAlive(pid)) await sleep(20);
  }
}

export const sleep = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));

/**
 * Ports handed out by this process, never handed out twice: two components started side by side
 * would otherwise be able to get the same port between the probe and their own bind.
 */
const handedOut = new Set<number>();

/** The kernel's ephemeral range (outgoing connections take their local port from it). */
function ephemeralRange(): readonly [number, number] {
  try {
    const [lo, hi] = readFileSync('/proc/sys/net/ipv4/ip_local_port_range', 'utf8')
      .trim()
      .split(/\s+/)
      .map(Number);
    if (lo !== undefined && hi !== undefined && Number.isInteger(lo) && Number.isInteger(hi)) return [lo, hi];
  } catch {
    // not Linux: assume the IANA dynamic range
  }
  return [49152, 65535];
}

function bindable(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const srv = createServer();
    srv.unref();
    srv.once('error', () => resolve(false));
    srv.listen(port, '127.0.0.1', () => srv.close(() => resolve(true)));
  });
}

/**
 * A free TCP port on 127.0.0.1 for a server the caller starts right after. Chosen at random from
 * 10000-32767 minus the kernel's ephemeral range, never from it: a port from the ephemeral range
 * (what binding to port 0 returns) can be taken by any outgoing connection in the moment between
 * this probe and the server's bind (CI once lost a MinIO start to "port already in use" that way,
 * while etcd and kube-apiserver were opening connections beside it).
 */
export async function freePort(): Promise<number> {
  const [ephLo, ephHi] = ephemeralRange();
  const candidates = (p: number) => p < ephLo || p > ephHi;
  for (let attempt = 0; attempt < 200; attempt++) {
    const port = 10_000 + Math.floor(Math.random() * 22_768);
    if (!candidates(port) || handedOut.has(port)) continue;
    if (await bindable(port)) {
      handedOut.add(port);
      return port;
    }
  }
  throw new Error('no free TCP port found on 127.0.0.1 in 10000-32767');
}

/** Failure to start one component: names it and carries the tail of its log. */
export class StartError extends Error {
  readonly component: string;
  constructor(component: string, message: string, logTail: string) {
    super(
      `${component} failed to start: ${message}${logTail ? `\n--- last lines of ${component} log ---\n${logTail}` : ''}`,
    );
    this.name = 'StartError';
    this.component = component;
  }
}

export async function tail(file: string, lines = 30): Promise<string> {
  try {
    const text = await readFile(file, 'utf8');
    return text.trimEnd().split('\n').slice(-lines).join('\n');
  } catch {
    return '';
  }
}

/**
 * Polls `probe` until it resolves true, the process dies, `signal` aborts or `timeoutMs` passes;
 * then throws a StartError naming the component with its log tail.
 */
export async function waitReady(
  proc: Proc,
  probe: () => Promise<boolean>,
  timeoutMs: number,
  signal?: AbortSignal,
): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  let lastError = '';
  while (Date.now() < deadline) {
    if (signal?.aborted) throw new StartError(proc.name, 'start abandoned: another component failed', '');
    if (!isAlive(proc.pid)) throw new StartError(proc.name, 'process exited', await tail(proc.logFile));
    try {
      if (await probe()) return;
    } catch (err) {
      lastError = (err as Error).message;
      if (process.env.STACK_DEBUG) console.error(`[${proc.name}] probe: ${lastError}`);
    }
    await sleep(100);
  }
  throw new StartError(
    proc.name,
    `not ready after ${timeoutMs} ms${lastError ? ` (last probe error: ${lastError})` : ''}`,
    await tail(proc.logFile),
  );
}
