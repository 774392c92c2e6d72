/**
 * `npm run stack -- restart controller`: SIGTERM to the running controller (its process group, as
 * `down` does), then the same command with the same environment, read from the running process
 * itself (/proc/<pid>/cmdline and environ), so the new process has exactly the old one's settings,
 * metrics port included. Waits for its /readyz; the servers and the sidecar keep running.
 */
import { readFile } from 'node:fs/promises';
import { isRunning, startProcess, stopProcess, waitReady, type Proc } from './proc.ts';

export interface ProcessSpec {
  readonly command: string;
  readonly args: string[];
  readonly env: Record<string, string>;
}

/** NUL-separated strings of a /proc file (a trailing NUL ends the last one). */
const nulList = (bytes: Buffer): string[] => bytes.toString('utf8').split('\0').slice(0, -1);

/** How `pid` was started: its argv and environment (Linux /proc). */
export async function processSpec(pid: number): Promise<ProcessSpec> {
  const [argv, environ] = await Promise.all([
    readFile(`/proc/${pid}/cmdline`),
    readFile(`/proc/${pid}/environ`),
  ]);
  const [command, ...args] = nulList(argv);
  if (command === undefined) throw new Error(`process ${pid} has no command line (a zombie?)`);
  const env: Record<string, string> = {};
  for (const entry of nulList(environ)) {
    const eq = entry.indexOf('=');
    if (eq > 0) env[entry.slice(0, eq)] = entry.slice(eq + 1);
  }
  return { command, args, env };
}

/** Restarts the process named `name` of `procs`; returns `procs` with the new process in its place. */
export async function restartService(procs: readonly Proc[], name: 'controller'): Promise<Proc[]> {
  const old = procs.find((p) => p.name === name);
  if (old === undefined || !isRunning(old))
    throw new Error(`the ${name} is not running: \`npm run stack -- up\` starts it`);
  const spec = await processSpec(old.pid);
  const metricsPort = spec.env.METRICS_PORT;
  if (metricsPort === undefined)
    throw new Error(`the ${name} has no METRICS_PORT: cannot tell when it is ready`);
  await stopProcess(old.pid);
  const proc = await startProcess({ name, ...spec, logFile: old.logFile });
  await waitReady(proc, async () => (await fetch(`http://127.0.0.1:${metricsPort}/readyz`)).ok, 60_000);
  return procs.map((p) => (p === old ? proc : p));
}
