/**
 * Claiming the machine's one node (hack/stack/node/claim.ts) against a temp owner file: a live
 * owner is refused or waited for, a stale one is cleaned up and replaced, and of two claimants
 * only one holds the node. The host-wide cleanup is injected, so nothing here touches the host.
 */
import { spawnSync } from 'node:child_process';
import { mkdir, mkdtemp, readFile, rm, utimes, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { claimNode, readClaim, type ClaimOptions } from '../../../hack/stack/node/claim.ts';
import { isRunning, processStartMs } from '../../../hack/stack/proc.ts';

interface TestOwner {
  readonly root: string;
  readonly pid: number;
  readonly node?: string;
  readonly procs?: readonly { readonly pid: number }[];
}

/** The pid of a process that has exited (and been reaped). */
const deadPid = (): number => spawnSync(process.execPath, ['-e', 'process.exit(0)']).pid;

let dir: string;
let file: string;
let cleaned: (TestOwner | undefined)[];

beforeEach(async () => {
  dir = await mkdtemp(join(tmpdir(), 'node-claim-'));
  file = join(dir, 'owner.json');
  cleaned = [];
});
afterEach(async () => {
  await rm(dir, { recursive: true, force: true });
});

function opts(waitMs: number, lines: string[] = []): ClaimOptions<TestOwner> {
  return {
    file,
    waitMs,
    pollMs: 10,
    log: (l) => lines.push(l),
    leftovers: (o) => Promise.resolve(Boolean(o?.node)),
    cleanup: (o) => {
      cleaned.push(o);
      return Promise.resolve();
    },
  };
}

async function stackRoot(name: string): Promise<string> {
  const root = join(dir, name);
  await mkdir(root);
  return root;
}

const holder = async (): Promise<string> => (JSON.parse(await readFile(file, 'utf8')) as TestOwner).root;

describe('claimNode', () => {
  it('takes a free node and writes its owner file', async () => {
    await claimNode('/stack/a', opts(0));
    expect(await holder()).toBe('/stack/a');
    expect(cleaned).toEqual([]);
  });

  it('refuses a live owner at once without a wait, naming its stack', async () => {
    const live = await stackRoot('live');
    await writeFile(file, JSON.stringify({ root: live, pid: 1 }));
    await expect(claimNode('/stack/b', opts(0))).rejects.toThrow(
      `a node is already running on this machine for the stack in ${live}`,
    );
    expect(await holder()).toBe(live);
  });

  it('gives up on a live owner when the wait runs out, saying how long it waited', async () => {
    const live = await stackRoot('live');
    await writeFile(file, JSON.stringify({ root: live, pid: 1 }));
    const lines: string[] = [];
    await expect(claimNode('/stack/b', opts(50, lines))).rejects.toThrow(/waited 0 s/);
    expect(lines).toHaveLength(1);
    expect(lines[0]).toMatch(/waiting up to 0 s for it to stop/);
    expect(await holder()).toBe(live);
  });

  it('waits for a live owner to go down, then holds the node', async () => {
    const live = await stackRoot('live');
    await writeFile(file, JSON.stringify({ root: live, pid: 1, node: 'up' }));
    const claiming = claimNode('/stack/b', opts(60_000));
    await new Promise((r) => setTimeout(r, 50));
    expect(await holder(), 'still held while the owner lives').toBe(live);
    // `down`: the node goes, then the owner file.
    await rm(file);
    await claiming;
    expect(await holder()).toBe('/stack/b');
    expect(cleaned, 'a released node leaves nothing to clean').toEqual([]);
  });

  it('cleans up a stale owner (its stack dir gone) and replaces it', async () => {
    const stale = { root: join(dir, 'gone'), pid: 1, node: 'left-behind' };
    await writeFile(file, JSON.stringify(stale));
    await claimNode('/stack/c', opts(0));
    expect(cleaned).toEqual([stale]);
    expect(await holder()).toBe('/stack/c');
  });

  it('does not replace a stale owner whose leftovers cannot be removed', async () => {
    const stale = { root: join(dir, 'gone'), pid: 1, node: 'stuck' };
    await writeFile(file, JSON.stringify(stale));
    const failing: ClaimOptions<TestOwner> = {
      ...opts(0),
      cleanup: () => Promise.reject(new Error('leftovers of an earlier node could not be removed')),
    };
    await expect(claimNode('/stack/d', failing)).rejects.toThrow(/could not be removed/);
    expect(await holder()).toBe(stale.root);
  });

  it('of two claimants waiting on one owner, one holds the node when it is released, the other waits on', async () => {
    const live = await stackRoot('live');
    await writeFile(file, JSON.stringify({ root: live, pid: 1 }));
    const roots = { x: await stackRoot('x'), y: await stackRoot('y') };
    const settled = new Set<string>();
    const claims = Object.fromEntries(
      Object.entries(roots).map(([k, root]) => [
        k,
        claimNode(root, opts(60_000)).then(() => settled.add(k) && k),
      ]),
    );
    await new Promise((r) => setTimeout(r, 30));
    await rm(file);
    const first = await Promise.race(Object.values(claims));
    const second = first === 'x' ? 'y' : 'x';
    expect(await holder()).toBe(roots[first as 'x' | 'y']);
    // A few polls later the other is still waiting: it found the winner's file, not a free node.
    await new Promise((r) => setTimeout(r, 100));
    expect(settled.has(second)).toBe(false);
    expect(await holder()).toBe(roots[first as 'x' | 'y']);
    await rm(file);
    await claims[second];
    expect(await holder()).toBe(roots[second]);
  });

  it('cleans up an owner whose dir is still there but whose processes are all gone (killed with its session)', async () => {
    const left = await stackRoot('killed');
    const stale = { root: left, pid: deadPid(), procs: [{ pid: deadPid() }], node: 'left-behind' };
    await writeFile(file, JSON.stringify(stale));
    const lines: string[] = [];
    await claimNode('/stack/e', opts(60_000, lines));
    expect(cleaned).toEqual([stale]);
    expect(lines, 'a dead owner is not waited for, and its removal is said').toEqual([
      `the node of the stack in ${left} was left behind (its processes are gone): removing it`,
    ]);
    expect(await holder()).toBe('/stack/e');
  });

  it('keeps an owner whose claimant is gone while one of its servers runs (`up` exits, its servers stay)', async () => {
    const live = await stackRoot('up');
    await writeFile(
      file,
      JSON.stringify({
        root: live,
        pid: deadPid(),
        procs: [{ pid: deadPid() }, { pid: process.pid, started: processStartMs(process.pid) }],
      }),
    );
    await expect(claimNode('/stack/f', opts(0))).rejects.toThrow(/already running .* in .*up/);
    expect(cleaned).toEqual([]);
  });

  it('does not count a server whose recorded start time is not that of the process its pid names now', async () => {
    const left = await stackRoot('reused');
    const started = processStartMs(process.pid)!;
    const procs = [{ pid: process.pid, started: started - 60_000 }];
    await writeFile(file, JSON.stringify({ root: left, pid: deadPid(), procs, node: 'left-behind' }));
    await claimNode('/stack/h', opts(0));
    expect(cleaned).toHaveLength(1);
    expect(await holder()).toBe('/stack/h');
  });

  it('does not count a process that started after the owner file was written (a recycled pid)', async () => {
    const left = await stackRoot('recycled');
    await writeFile(file, JSON.stringify({ root: left, pid: process.pid, node: 'left-behind' }));
    const started = processStartMs(process.pid)!;
    const before = new Date(started - 60_000);
    await utimes(file, before, before);
    await claimNode('/stack/g', opts(0));
    expect(cleaned).toHaveLength(1);
    expect(await holder()).toBe('/stack/g');
  });
});

describe('claimNode and a cut-short owner file', () => {
  it('removes an owner file that holds no owner once it is older than a write takes, and takes the node', async () => {
    await writeFile(file, '{"root":');
    const old = new Date(Date.now() - 60_000);
    await utimes(file, old, old);
    const lines: string[] = [];
    await claimNode('/stack/i', opts(0, lines));
    expect(await holder()).toBe('/stack/i');
    expect(lines).toEqual([`the node's owner file ${file} is unreadable (a write cut short): removing it`]);
  });

  it('leaves a fresh empty owner file alone (another claimant is writing it) and waits', async () => {
    await writeFile(file, '');
    const claiming = claimNode('/stack/j', opts(60_000));
    await new Promise((r) => setTimeout(r, 50));
    expect(await readFile(file, 'utf8'), 'not removed').toBe('');
    await writeFile(file, JSON.stringify({ root: '/stack/other-gone', pid: 1 }));
    await claiming;
    expect(await holder()).toBe('/stack/j');
  });
});

describe('processStartMs, isRunning', () => {
  it('reads when this process started, and nothing for one that has exited', () => {
    const started = processStartMs(process.pid);
    const expected = Date.now() - process.uptime() * 1000;
    expect(started).toBeDefined();
    // btime is whole seconds; the clock reads are a few ms apart.
    expect(Math.abs(started! - expected)).toBeLessThan(3_000);
    expect(processStartMs(deadPid())).toBeUndefined();
  });

  it('tells a running process from a later one given its pid, and from one that is gone', () => {
    const started = processStartMs(process.pid)!;
    expect(isRunning({ pid: process.pid, started })).toBe(true);
    expect(
      isRunning({ pid: process.pid, started: started - 60_000 }),
      'the pid now names a later process',
    ).toBe(false);
    expect(isRunning({ pid: deadPid(), started })).toBe(false);
    expect(isRunning({ pid: process.pid }), 'a state without start times: the pid alone').toBe(true);
  });
});

describe('readClaim', () => {
  it('tells a node held by a running claimant (a test run) from one whose `up` exited and left its servers, and from a stale one', async () => {
    const root = await stackRoot('held');
    const me = { pid: process.pid, started: processStartMs(process.pid) };
    await writeFile(file, JSON.stringify({ root, pid: process.pid }));
    expect(await readClaim(file)).toMatchObject({ live: true, claimantRuns: true });
    await writeFile(file, JSON.stringify({ root, pid: deadPid(), procs: [me] }));
    expect(await readClaim(file)).toMatchObject({ live: true, claimantRuns: false });
    await writeFile(file, JSON.stringify({ root, pid: deadPid(), procs: [{ pid: deadPid() }] }));
    expect(await readClaim(file)).toMatchObject({ live: false, claimantRuns: false });
    await rm(file);
    expect(await readClaim(file)).toBeUndefined();
  });
});
