/**
 * makeDirectory: `mkdir -p` for the CLI's --out directories that reports, never loops (Node's
 * recursive mkdir spins forever on a new name under /proc). The CLI path is in
 * test/integration/cli.test.ts (aibom fetch --out).
 */
import { existsSync } from 'node:fs';
import { mkdtemp, rm, stat, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { CliError } from '../../../src/cli/command.ts';
import { makeDirectory } from '../../../src/cli/dirs.ts';

let dir: string;
beforeAll(async () => {
  dir = await mkdtemp(join(tmpdir(), 'dirs-'));
});
afterAll(async () => rm(dir, { recursive: true, force: true }));

describe('makeDirectory', () => {
  it('creates every missing level, and an existing directory is fine', async () => {
    const deep = join(dir, 'a', 'b', 'c');
    await makeDirectory(deep);
    expect((await stat(deep)).isDirectory()).toBe(true);
    await makeDirectory(deep);
    await makeDirectory(join(dir, 'a'));
    await makeDirectory(join(dir, 'a', 'b', '..', 'b2'));
    expect((await stat(join(dir, 'a', 'b2'))).isDirectory()).toBe(true);
  });

  it('a file in the way, or under the path, is a CliError naming the directory', async () => {
    const file = join(dir, 'file');
    await writeFile(file, 'x');
    await expect(makeDirectory(file)).rejects.toThrow(
      new CliError(`cannot create directory ${file}: a file is in the way`),
    );
    await expect(makeDirectory(join(file, 'x', 'y'))).rejects.toThrow(
      /cannot create directory .*file\/x\/y: ENOTDIR/,
    );
    await expect(makeDirectory(join(file, 'x', 'y'))).rejects.toBeInstanceOf(CliError);
  });

  it.runIf(existsSync('/proc/self'))('a new name under /proc is refused (ENOENT), not retried', async () => {
    const target = `/proc/aibom-vault-dirs-${process.pid}/x`;
    await expect(makeDirectory(target)).rejects.toThrow(`cannot create directory ${target}: ENOENT`);
  });
});
