import { execFile } from 'node:child_process';
import { chmod, mkdtemp, readdir, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { afterAll, describe, expect, it } from 'vitest';
import { isAlive } from '../../hack/stack/proc.ts';
import { repoRoot, startStack, type StackInfo } from '../../hack/stack/stack.ts';
import { schema } from '../../src/config/schema.ts';

/**
 * The stack's own lifecycle, on real servers: a start that fails half-way leaves no process and no
 * directory behind, and `up` on a running stack applies the caller's settings. Each case starts a
 * stack of its own in a private temp parent, apart from the suite's shared stack.
 */

const run = promisify(execFile);

/** Pids of every process whose command line or environment mentions `path`. */
async function processesMentioning(path: string): Promise<number[]> {
  const found: number[] = [];
  for (const entry of await readdir('/proc')) {
    if (!/^\d+$/.test(entry) || Number(entry) === process.pid) continue;
    for (const f of ['cmdline', 'environ']) {
      const text = await readFile(`/proc/${entry}/${f}`, 'latin1').catch(() => '');
      if (text.includes(path)) {
        found.push(Number(entry));
        break;
      }
    }
  }
  return found;
}

const parents: string[] = [];
async function privateParent(): Promise<string> {
  // mkdtemp makes it 0700: as root this is the directory PostgreSQL's server user cannot enter.
  const dir = await mkdtemp(join(tmpdir(), 'stack-lifecycle-'));
  parents.push(dir);
  return dir;
}

afterAll(async () => {
  for (const d of parents) await rm(d, { recursive: true, force: true });
});

describe('a stack start that fails half-way', () => {
  it('stops every server it had started and removes its temp dir (PostgreSQL fails while the others start)', async () => {
    const parent = await privateParent();
    // An initdb that fails after the other servers have spawned (and MinIO is ready).
    const bin = join(parent, 'bin');
    await run('mkdir', ['-m', '0755', bin]);
    await chmod(parent, 0o755);
    const initdb = join(bin, 'initdb');
    await writeFile(initdb, '#!/bin/sh\nsleep 3\necho "initdb: simulated failure" >&2\nexit 1\n', {
      mode: 0o755,
    });
    const lines: string[] = [];
    const err = await startStack({
      tmpParent: parent,
      postgresBinaries: { initdb, postgres: join(bin, 'postgres') },
      log: (l) => lines.push(l),
    }).then(
      () => new Error('the stack started'),
      (e: unknown) => e as Error,
    );
    expect(err.message).toMatch(/^postgres failed to start: initdb failed/);
    // The case exercised what it claims: another server was up when PostgreSQL failed.
    expect(lines.some((l) => l.startsWith('minio ready'))).toBe(true);
    expect(await readdir(parent)).toEqual(['bin']);
    expect(await processesMentioning(parent)).toEqual([]);
    // Servers start before the simulated failure: kept well inside an explicit timeout.
  }, 300_000);

  it('stops the servers and the other service when a service refuses its configuration', async () => {
    const parent = await privateParent();
    await chmod(parent, 0o755);
    const err = await startStack({
      tmpParent: parent,
      services: true,
      settings: { SERVICE_TRANSPARENCY_WRITER: 'banana' },
    }).then(
      () => new Error('the stack started'),
      (e: unknown) => e as Error,
    );
    expect(err.message).toMatch(/^(controller|sidecar) failed to start: process exited/);
    expect(err.message).toContain('SERVICE_TRANSPARENCY_WRITER');
    expect(await readdir(parent)).toEqual([]);
    expect(await processesMentioning(parent)).toEqual([]);
    // A whole stack start (31 s in a busy full-suite run): deliberately far from its timeout.
  }, 300_000);
});

describe('npm run stack -- up on a running stack', () => {
  /** The CLI with exactly `settings` as configuration keys (nothing inherited from this process). */
  async function cli(stateDir: string, cmd: string, settings: Record<string, string> = {}) {
    const env: NodeJS.ProcessEnv = {};
    for (const [k, v] of Object.entries(process.env)) if (!(k in schema)) env[k] = v;
    Object.assign(env, settings, { STACK_STATE_DIR: stateDir });
    return run(process.execPath, [join(repoRoot, 'hack/stack/cli.ts'), cmd], { env, timeout: 280_000 }).then(
      (r) => ({ code: 0, out: r.stdout + r.stderr }),
      (e: { code?: number; stdout?: string; stderr?: string }) => ({
        code: e.code ?? -1,
        out: `${e.stdout ?? ''}${e.stderr ?? ''}`,
      }),
    );
  }
  const state = async (dir: string): Promise<StackInfo> =>
    JSON.parse(await readFile(join(dir, 'state.json'), 'utf8')) as StackInfo;
  const pidOf = (info: StackInfo, name: string): number => info.procs.find((p) => p.name === name)!.pid;
  const environOf = async (pid: number): Promise<string[]> =>
    (await readFile(`/proc/${pid}/environ`, 'utf8')).split('\0');

  it('restarts the controller and sidecar with changed settings, keeps the servers, says what changed', async () => {
    const stateDir = join(await privateParent(), 'state');
    let root: string | undefined;
    try {
      const first = await cli(stateDir, 'up');
      expect(first.code, first.out).toBe(0);
      const before = await state(stateDir);
      root = before.root;
      expect(before.settings).toEqual({});

      const same = await cli(stateDir, 'up');
      expect(same.out).toContain('already running with these settings');
      expect(await state(stateDir)).toEqual(before);

      const changed = await cli(stateDir, 'up', { SERVICE_TRANSPARENCY_WRITER: '1' });
      expect(changed.code, changed.out).toBe(0);
      expect(changed.out).toContain('SERVICE_TRANSPARENCY_WRITER: (unset) → "1"');
      const after = await state(stateDir);
      expect(after.settings).toEqual({ SERVICE_TRANSPARENCY_WRITER: '1' });
      // Servers untouched, services replaced, the API on the same address.
      for (const p of before.procs.filter((q) => !['controller', 'sidecar'].includes(q.name))) {
        expect(pidOf(after, p.name), p.name).toBe(p.pid);
      }
      for (const name of ['controller', 'sidecar']) {
        expect(pidOf(after, name), name).not.toBe(pidOf(before, name));
        expect(isAlive(pidOf(before, name)), name).toBe(false);
        expect(await environOf(pidOf(after, name))).toContain('SERVICE_TRANSPARENCY_WRITER=1');
      }
      expect(after.env.SERVICE_API_URL).toBe(before.env.SERVICE_API_URL);
      expect(await readFile(join(after.root, 'controller.log'), 'utf8')).toContain('transparency writer on');

      // A bad value: one clear message, non-zero exit, the servers keep running; a good `up` recovers.
      const bad = await cli(stateDir, 'up', { SERVICE_TRANSPARENCY_WRITER: 'banana' });
      expect(bad.code).toBe(1);
      expect(bad.out).toMatch(/(controller|sidecar) failed to start/);
      expect(bad.out).toContain('the servers keep running without the controller and sidecar');
      const broken = await state(stateDir);
      expect(broken.procs.map((p) => p.name)).not.toContain('controller');
      expect(broken.procs.every((p) => isAlive(p.pid))).toBe(true);
      const fixed = await cli(stateDir, 'up', { SERVICE_TRANSPARENCY_WRITER: '1' });
      expect(fixed.code, fixed.out).toBe(0);
      expect((await state(stateDir)).procs.every((p) => isAlive(p.pid))).toBe(true);
    } finally {
      const down = await cli(stateDir, 'down');
      expect(down.code, down.out).toBe(0);
    }
    expect(await processesMentioning(stateDir)).toEqual([]);
    expect(root).toBeDefined();
    expect(await readdir(root).catch(() => 'gone')).toBe('gone');
    // One whole stack plus four service restarts (60 s alone, 144-149 s in busy full-suite runs):
    // deliberately far from its timeout on a busy 2-core machine.
  }, 900_000);
});
