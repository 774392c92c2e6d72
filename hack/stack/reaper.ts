/**
 * A stack that does not outlive its owner. The servers of a stack run detached in their own
 * process groups (proc.ts: so that `npm run stack -- up` can exit and leave them running), which
 * also means nothing stops them when the process that started them for a test run dies without
 * its teardown: vitest exits 1 ms after SIGINT or SIGTERM (a Ctrl-C, a cancelled CI job) without
 * running global teardowns, and a SIGKILL runs nothing at all. etcd, the API server, PostgreSQL,
 * the object store and, with a node, its pods and kernel settings would stay behind.
 *
 * `watchOwner(info)` writes the stack's state into its temp dir and starts a reaper: a detached
 * process (its own session, so a kill of the owner's process group does not reach it) that checks
 * every half second whether the owner is alive. When the owner is gone and the state file is still
 * there, it stops the stack as `stopStack` does (node first, then every server, then the temp dir).
 * When the state file is gone, the owner's own teardown removed the temp dir: the reaper exits.
 *
 * Run as a script: `node hack/stack/reaper.ts <owner pid> <state file>`.
 */
import { spawn } from 'node:child_process';
import { existsSync } from 'node:fs';
import { open, readdir, readFile, rm, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { isAlive, sleep, stopProcess } from './proc.ts';
import { stopStack, type StackInfo } from './stack.ts';

const POLL_MS = 500;
const STATE = 'owner-state.json';
const LOG = 'reaper.log';

type Reaped = Pick<StackInfo, 'procs' | 'root' | 'node'>;

/**
 * Starts the reaper of `info`'s stack for the owner `ownerPid` (this process by default). Returns
 * its pid. Call it once the stack is up; the owner's normal teardown (`stopStack`) needs nothing
 * more: removing the temp dir removes the state file, and the reaper exits.
 */
export async function watchOwner(info: Reaped, ownerPid = process.pid): Promise<number> {
  const state = join(info.root, STATE);
  const reaped: Reaped = { root: info.root, procs: info.procs, ...(info.node ? { node: info.node } : {}) };
  await writeFile(state, JSON.stringify(reaped), { mode: 0o600 });
  const log = await open(join(info.root, LOG), 'a');
  try {
    const child = spawn(process.execPath, [fileURLToPath(import.meta.url), String(ownerPid), state], {
      detached: true,
      stdio: ['ignore', log.fd, log.fd],
    });
    const pid = await new Promise<number>((resolve, reject) => {
      child.once('error', reject);
      child.once('spawn', () => resolve(child.pid ?? -1));
    });
    child.unref();
    return pid;
  } finally {
    await log.close();
  }
}

async function readReaped(file: string): Promise<Reaped | undefined> {
  try {
    return JSON.parse(await readFile(file, 'utf8')) as Reaped;
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'ENOENT') return undefined;
    throw err;
  }
}

/**
 * Processes other than this one whose command line names a path under `root`: a server restarted
 * by a test after the state was written (test/e2e/helpers/cluster.ts restartServer) has a new pid
 * but the same data directory in its arguments (etcd --data-dir, postgres -D, minio server …).
 */
async function strays(root: string): Promise<number[]> {
  const under = `${root}/`;
  const pids: number[] = [];
  for (const entry of await readdir('/proc').catch(() => [] as string[])) {
    const pid = Number(entry);
    if (!Number.isInteger(pid) || pid === process.pid) continue;
    const cmdline = await readFile(`/proc/${pid}/cmdline`, 'utf8').catch(() => '');
    if (cmdline.split('\0').some((arg) => arg.includes(under))) pids.push(pid);
  }
  return pids;
}

/** Gone, or a zombie nobody reaped yet (its parent may be stuck: it will never run again either). */
async function gone(pid: number): Promise<boolean> {
  if (!isAlive(pid)) return true;
  const stat = await readFile(`/proc/${pid}/stat`, 'utf8').catch(() => '');
  // pid (comm) state …: comm may hold spaces and parentheses, the state follows the last ')'.
  return stat.slice(stat.lastIndexOf(')') + 2, stat.lastIndexOf(')') + 3) === 'Z';
}

/** The reaper's loop: returns when the owner's teardown ran, or after stopping what it left. */
async function reap(ownerPid: number, stateFile: string): Promise<void> {
  // Written once by watchOwner; afterwards only whether it still exists matters.
  const reaped = await readReaped(stateFile);
  if (reaped === undefined) return;
  // The file first: an owner whose teardown removed it and then exited is not a dead owner.
  for (;;) {
    if (!existsSync(stateFile)) return;
    if (await gone(ownerPid)) break;
    await sleep(POLL_MS);
  }
  console.log(`${new Date().toISOString()} owner ${ownerPid} is gone: stopping the stack in ${reaped.root}`);
  const left = await stopStack(reaped);
  for (const l of left) console.log(`left behind: ${l}`);
  const more = await strays(reaped.root);
  if (more.length > 0) console.log(`stopping ${more.length} more process(es) under it: ${more.join(', ')}`);
  for (const pid of more) await stopProcess(pid);
  await rm(reaped.root, { recursive: true, force: true });
}

if (process.argv[1] === fileURLToPath(import.meta.url)) {
  const [owner, state] = process.argv.slice(2);
  const ownerPid = Number(owner);
  if (!Number.isInteger(ownerPid) || ownerPid <= 0 || state === undefined) {
    console.error('usage: node hack/stack/reaper.ts <owner pid> <state file>');
    process.exit(2);
  }
  await reap(ownerPid, state);
}
