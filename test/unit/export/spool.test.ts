import { spawn } from 'node:child_process';
import { mkdtemp, readdir, rm, stat } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { Spool, type SpoolOptions } from '../../../src/export/spool.ts';
import { openFilesUnder } from '../../helpers/open-files.ts';

/**
 * The spool the export writer collects the `.intoto.jsonl` in (src/export/spool.ts): the same bytes
 * back whether they stayed in memory or went through the temp file, and no file left behind
 * however its use ends. The writer's own use (bytes of a bundle, client abort, failing source) is
 * checked in writer.test.ts.
 */

let parent: string;
beforeEach(async () => {
  parent = await mkdtemp(join(tmpdir(), 'spool-test-'));
});
afterEach(async () => {
  await rm(parent, { recursive: true, force: true });
});

/** Lines of every length around the block sizes below, ASCII and not (1–4 UTF-8 bytes a character). */
const pieces: string[] = [];
for (let i = 0; i < 400; i++) {
  const unit = ['a', 'é', '✓', '😀'][i % 4]!;
  pieces.push(`${i}:${unit.repeat((i * 37) % 300)}\n`);
}
const expected = Buffer.from(pieces.join(''), 'utf8');

/** Writes `pieces` as the writer does (spilling whenever it is over its limit). */
async function fill(spool: Spool): Promise<void> {
  for (const [i, p] of pieces.entries()) {
    // Text and bytes: both ways in.
    if (i % 5 === 0) spool.writeBytes(Buffer.from(p, 'utf8'));
    else spool.write(p);
    if (spool.overLimit) await spool.spill();
  }
}

async function readAll(spool: Spool): Promise<Buffer> {
  const out: Buffer[] = [];
  // Copied: a piece may be reused for the next.
  for await (const piece of spool.read()) out.push(Buffer.from(piece));
  return Buffer.concat(out);
}

describe('export spool', () => {
  it('gives back the same bytes from memory and from its temp file', async () => {
    const cases: [string, SpoolOptions, boolean][] = [
      ['in memory (default limit)', {}, false],
      ['in memory (one block per piece)', { blockSize: 7 }, false],
      ['spilled, no memory', { memoryLimit: 0, blockSize: 1000 }, true],
      ['spilled, tiny blocks', { memoryLimit: 0, blockSize: 13 }, true],
      ['spilled past a limit', { memoryLimit: 10_000, blockSize: 4096 }, true],
      ['spilled, blocks larger than the limit', { memoryLimit: 100, blockSize: 65_536 }, true],
    ];
    for (const [name, options, spills] of cases) {
      const spool = new Spool({ ...options, dir: parent });
      try {
        await fill(spool);
        expect(spool.size, name).toBe(expected.length);
        expect(spool.path !== undefined, name).toBe(spills);
        expect((await readAll(spool)).equals(expected), name).toBe(true);
      } finally {
        await spool.dispose();
      }
      expect(await readdir(parent), name).toEqual([]);
      expect(await openFilesUnder(parent), name).toEqual([]);
    }
  });

  it('keeps its temp file private and nameless: unlinked once open, closed when disposed', async () => {
    const spool = new Spool({ memoryLimit: 0, blockSize: 100, dir: parent });
    await fill(spool);
    const path = spool.path!;
    expect(dirname(dirname(path))).toBe(parent);
    // Spilled: the bytes are on file, but neither the file nor its directory has a name.
    expect(await readdir(parent)).toEqual([]);
    const open = await openFilesUnder(parent);
    expect(open).toHaveLength(1);
    expect(open[0]!.link).toBe(`${path} (deleted)`);
    const st = await stat(`/proc/self/fd/${open[0]!.fd}`);
    expect(st.mode & 0o777).toBe(0o600);
    expect(st.size).toBeGreaterThan(0);
    expect((await readAll(spool)).equals(expected)).toBe(true);
    await spool.dispose();
    expect(await openFilesUnder(parent)).toEqual([]);
    await spool.dispose(); // idempotent
    expect(() => spool.write('x')).toThrow(/after disposed/);
  });

  it('leaves nothing behind when its process is killed mid-export (SIGKILL: no finally runs)', async () => {
    // A child process spills a spool, says so, and waits to be killed.
    const script = `
      import { Spool } from ${JSON.stringify(fileURLToPath(new URL('../../../src/export/spool.ts', import.meta.url)))};
      const spool = new Spool({ memoryLimit: 0, blockSize: 4096, dir: process.argv[1] });
      for (let i = 0; i < 1000; i++) spool.write('x'.repeat(100) + '\\n');
      await spool.spill();
      process.stdout.write('spilled ' + spool.size + '\\n');
      setInterval(() => {}, 1000);
    `;
    const child = spawn(process.execPath, ['--input-type=module', '-e', script, parent], {
      stdio: ['ignore', 'pipe', 'inherit'],
    });
    const said = await new Promise<string>((resolve, reject) => {
      let text = '';
      child.stdout.on('data', (d: Buffer) => {
        text += d.toString();
        if (text.includes('\n')) resolve(text.trim());
      });
      child.on('exit', (code) => reject(new Error(`child exited (${code}) before spilling: ${text}`)));
    });
    expect(said).toMatch(/^spilled \d+$/);
    const held = await openFilesUnder(parent, child.pid);
    expect(held.map((f) => f.link.endsWith(' (deleted)'))).toEqual([true]);
    const exited = new Promise((resolve) => child.on('exit', resolve));
    child.kill('SIGKILL');
    await exited;
    expect(await readdir(parent)).toEqual([]);
  });

  it('removes its temp file when its user fails or stops reading early', async () => {
    // A failure while writing (the records source failing mid-export).
    const failing = new Spool({ memoryLimit: 0, blockSize: 100, dir: parent });
    await expect(
      (async () => {
        try {
          await fill(failing);
          expect(await openFilesUnder(parent)).toHaveLength(1);
          throw new Error('the database went away');
        } finally {
          await failing.dispose();
        }
      })(),
    ).rejects.toThrow('the database went away');
    expect(await openFilesUnder(parent)).toEqual([]);

    // A reader that stops after the first piece (the client going away mid-entry).
    const early = new Spool({ memoryLimit: 0, blockSize: 100, dir: parent });
    try {
      await fill(early);
      for await (const piece of early.read()) {
        expect(piece.length).toBeGreaterThan(0);
        break;
      }
      expect(await openFilesUnder(parent)).toHaveLength(1);
    } finally {
      await early.dispose();
    }
    expect(await openFilesUnder(parent)).toEqual([]);

    // `await using` disposes it too.
    {
      await using scoped = new Spool({ memoryLimit: 0, blockSize: 100, dir: parent });
      await fill(scoped);
      expect(await openFilesUnder(parent)).toHaveLength(1);
    }
    expect(await openFilesUnder(parent)).toEqual([]);
  });

  it('is read once, after the last write', async () => {
    const spool = new Spool({ dir: parent });
    spool.write('a');
    await readAll(spool);
    expect(() => spool.write('b')).toThrow(/after read/);
    await expect(readAll(spool)).rejects.toThrow(/after read/);
    await spool.dispose();
  });
});
