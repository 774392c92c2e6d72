/**
 * The machine's one node: which stack holds it. The bridge, the nftables tables and the kubelet's
 * kernel settings are host-wide, so one stack at a time owns them; its owner file names the stack
 * (its temp dir) and, once the node starts, the node's state (index.ts writeOwner).
 */
import { readFile, rm, stat, writeFile } from 'node:fs/promises';
import { isRunning, processStartMs, START_SLACK_MS } from '../proc.ts';

/** What the owner file says about the stack that holds the node (index.ts Owner). */
export interface ClaimOwner {
  readonly root: string;
  /** The process that claimed it (`up`, a test run). */
  readonly pid: number;
  /** The stack's server processes, once started (with their start times, proc.ts Proc). */
  readonly procs?: readonly { readonly pid: number; readonly started?: number }[];
}

export interface ClaimOptions<O extends ClaimOwner> {
  /** The owner file (index.ts OWNER_FILE; a temp file in tests). */
  readonly file: string;
  /** How long to wait for a live owner to stop; 0 refuses at once. */
  readonly waitMs: number;
  /** How often to look again while waiting (default 5 s). */
  readonly pollMs?: number;
  readonly log?: (line: string) => void;
  /** Whether a stale owner (or none) left host state behind that `cleanup` must remove first. */
  readonly leftovers: (stale: O | undefined) => Promise<boolean>;
  /** Removes a stale owner's host state; throws when it cannot. */
  readonly cleanup: (stale: O | undefined) => Promise<void>;
}

/**
 * The owner file, whether the stack it names is live (isLive), and whether the process that
 * claimed it still runs (a test run holding the stack, an `up` still starting); undefined
 * without one.
 */
export async function readClaim<O extends ClaimOwner>(
  file: string,
): Promise<{ owner: O; live: boolean; claimantRuns: boolean } | undefined> {
  const read = await readOwner<O>(file);
  if (!read) return undefined;
  const live = await isLive(read.owner, read.writtenMs);
  return { owner: read.owner, live, claimantRuns: live && startedBefore(read.owner.pid, read.writtenMs) };
}

/** The owner file as written, and when it was last written; undefined without one. */
export async function readOwner<O>(file: string): Promise<{ owner: O; writtenMs: number } | undefined> {
  try {
    const [text, st] = await Promise.all([readFile(file, 'utf8'), stat(file)]);
    return { owner: JSON.parse(text) as O, writtenMs: st.mtimeMs };
  } catch {
    return undefined;
  }
}

/** How long a claimant may take to write the file it just created (it is empty until then). */
const WRITE_GRACE_MS = 10_000;

/**
 * Whether the owner file exists but holds no owner, and has for longer than a claimant takes to
 * write it: a write cut short (its writer killed, the disk full). Left alone, every later claim
 * would find it, fail to create its own, and loop.
 */
async function unreadableOwnerFile(file: string): Promise<boolean> {
  const st = await stat(file).catch(() => undefined);
  return st !== undefined && Date.now() - st.mtimeMs > WRITE_GRACE_MS;
}

/** Whether `pid` runs a process that started before the owner file was last written. */
function startedBefore(pid: number, writtenMs: number): boolean {
  const started = processStartMs(pid);
  return started !== undefined && started <= writtenMs + START_SLACK_MS;
}

/**
 * An owner is live while its stack dir exists and one of its processes still runs: the claimant
 * (a test run holding the stack) or a server (`up` exits and leaves them running). A process that
 * started after the owner file was last written is not one it lists but a later one given a
 * recycled pid, so it does not count: a stack killed with its session (dir left behind, processes
 * gone) is stale, not waited for until the wait runs out.
 */
async function isLive(owner: ClaimOwner, writtenMs: number): Promise<boolean> {
  if (!(await stat(owner.root).catch(() => undefined))) return false;
  if (startedBefore(owner.pid, writtenMs)) return true;
  // A server with its start time recorded is known exactly; one without, as the claimant is.
  return (owner.procs ?? []).some((p) =>
    p.started === undefined ? startedBefore(p.pid, writtenMs) : isRunning(p),
  );
}

/**
 * Claims the node for the stack in `root`. An owner whose stack is gone (its temp dir removed
 * without `down`, its processes killed, a crash) is stale: its leftovers are cleaned up and its
 * file replaced. A live one is waited for up to `waitMs`, so two test runs on one machine (a CI
 * run beside a check of the same tree) take turns instead of the second failing.
 *
 * The file is created exclusively: of two claimants that both saw the node released (`down`
 * removes the file), one writes it and the other finds it and waits again.
 */
export async function claimNode<O extends ClaimOwner>(root: string, opts: ClaimOptions<O>): Promise<void> {
  const deadline = Date.now() + opts.waitMs;
  let told = false;
  for (;;) {
    const read = await readOwner<O>(opts.file);
    if (!read && (await unreadableOwnerFile(opts.file))) {
      opts.log?.(`the node's owner file ${opts.file} is unreadable (a write cut short): removing it`);
      await rm(opts.file, { force: true });
    }
    const owner = read?.owner;
    if (owner && (await isLive(owner, read.writtenMs))) {
      const held = `a node is already running on this machine for the stack in ${owner.root} (one per machine)`;
      if (Date.now() >= deadline) {
        const waited = opts.waitMs > 0 ? ` (waited ${Math.round(opts.waitMs / 1000)} s)` : '';
        throw new Error(`${held}; stop it first (npm run stack -- down in that checkout)${waited}`);
      }
      if (!told) opts.log?.(`${held}: waiting up to ${Math.round(opts.waitMs / 1000)} s for it to stop`);
      told = true;
      await new Promise((r) =>
        setTimeout(r, Math.min(opts.pollMs ?? 5_000, Math.max(0, deadline - Date.now()))),
      );
      continue;
    }
    if (await opts.leftovers(owner)) {
      if (owner)
        opts.log?.(
          `the node of the stack in ${owner.root} was left behind (its processes are gone): removing it`,
        );
      await opts.cleanup(owner);
    }
    if (owner) await rm(opts.file, { force: true });
    const wrote = await writeFile(opts.file, JSON.stringify({ root, pid: process.pid }), {
      mode: 0o600,
      flag: 'wx',
    }).then(
      () => true,
      (e: NodeJS.ErrnoException) => {
        if (e.code === 'EEXIST') return false;
        throw e;
      },
    );
    if (wrote) return;
    // Another claimant created it first (and may still be writing it): look again shortly.
    await new Promise((r) => setTimeout(r, 50));
  }
}
