/**
 * hack/stack/reaper.ts: a stack does not outlive the process that started it for a test run.
 * vitest exits on SIGINT/SIGTERM without its global teardown, and a SIGKILL runs nothing, so the
 * stack's detached servers would stay behind. Real processes, no stack: a stand-in "server"
 * started the way the stack starts its servers (startProcess: detached, its own process group),
 * a "stray" the state does not list but whose arguments name the stack's temp dir (a server a
 * test restarted under a new pid), and an owner process that is killed.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { mkdtemp, rm, stat } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { watchOwner } from '../../hack/stack/reaper.ts';
import { isAlive, startProcess, stopProcess, type Proc } from '../../hack/stack/proc.ts';
import { poll } from '../helpers/controller-process.ts';

const IDLE = 'setInterval(() => {}, 1000)';
const cleanup: (() => Promise<void>)[] = [];

afterEach(async () => {
  for (const c of cleanup.splice(0).reverse()) await c();
});

/** A long-running process whose command line names `marker` (a path under the stack's root). */
async function server(root: string, name: string): Promise<Proc> {
  const p = await startProcess({
    name,
    command: process.execPath,
    args: ['-e', IDLE, join(root, name)],
    logFile: join(root, `${name}.log`),
  });
  cleanup.push(() => stopProcess(p.pid, 1000));
  return p;
}

/** An owner: a plain child of this process (not detached), killed by the tests. */
function owner(): ChildProcess & { pid: number } {
  const child = spawn(process.execPath, ['-e', IDLE], { stdio: 'ignore' });
  if (child.pid === undefined) throw new Error('the owner process did not start');
  cleanup.push(() => {
    child.kill('SIGKILL');
    return Promise.resolve();
  });
  return child as ChildProcess & { pid: number };
}

const exists = (path: string): Promise<boolean> =>
  stat(path).then(
    () => true,
    () => false,
  );

async function stackRoot(): Promise<string> {
  const root = await mkdtemp(join(tmpdir(), 'reaper-test-'));
  cleanup.push(() => rm(root, { recursive: true, force: true }));
  return root;
}

describe('the reaper of a test stack', () => {
  it('stops the listed servers and a restarted one, and removes the temp dir, once the owner is SIGKILLed', async () => {
    const root = await stackRoot();
    const listed = await server(root, 'etcd-data');
    const reaperOwner = owner();
    const reaper = await watchOwner({ root, procs: [listed] }, reaperOwner.pid);
    // Started after the state was written, as a restarted server is: found by its arguments.
    const stray = await server(root, 'restarted-apiserver');
    expect([isAlive(listed.pid), isAlive(stray.pid), isAlive(reaper)]).toEqual([true, true, true]);

    reaperOwner.kill('SIGKILL');
    await poll(
      async () => (!isAlive(listed.pid) && !isAlive(stray.pid) && !(await exists(root))) || undefined,
      'the servers stopped and the temp dir removed after the owner died',
      { timeoutMs: 30_000, intervalMs: 100 },
    );
    await poll(() => !isAlive(reaper) || undefined, 'the reaper exited', { timeoutMs: 10_000 });
  });

  it('leaves a stack whose owner is alive, and exits once the owner tore it down itself', async () => {
    const root = await stackRoot();
    const listed = await server(root, 'postgres-data');
    const alive = owner();
    const reaper = await watchOwner({ root, procs: [listed] }, alive.pid);
    // Several of its polls (every 500 ms) with the owner alive: nothing is touched.
    await new Promise((r) => setTimeout(r, 1500));
    expect([isAlive(listed.pid), await exists(root), isAlive(reaper)]).toEqual([true, true, true]);

    // The owner's own teardown (stopStack): servers stopped, temp dir removed.
    await stopProcess(listed.pid, 1000);
    await rm(root, { recursive: true, force: true });
    await poll(() => !isAlive(reaper) || undefined, 'the reaper exited after the teardown', {
      timeoutMs: 10_000,
    });
    expect(isAlive(alive.pid)).toBe(true);
  });

  it('refuses bad arguments with a usage line and exit code 2', async () => {
    const child = spawn(process.execPath, [join(import.meta.dirname, '../../hack/stack/reaper.ts'), 'x'], {
      stdio: ['ignore', 'ignore', 'pipe'],
    });
    let stderr = '';
    child.stderr.setEncoding('utf8').on('data', (d: string) => (stderr += d));
    const code = await new Promise<number | null>((r) => child.on('close', r));
    expect({ code, stderr: stderr.trim() }).toEqual({
      code: 2,
      stderr: 'usage: node hack/stack/reaper.ts <owner pid> <state file>',
    });
  });
});
