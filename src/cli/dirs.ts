import { mkdir, stat } from 'node:fs/promises';
import { dirname, resolve } from 'node:path';
import { CliError } from './command.ts';

/**
 * `mkdir -p` for the CLI's output directories, which never loops: Node's own recursive mkdir
 * (node 24) retries forever where mkdir(2) answers ENOENT for a path whose parent exists, as under
 * /proc (`service-ctl aibom fetch --out /proc/x` hung). Here each level is tried at most twice:
 * once, then again after its parent exists; a second ENOENT is reported, not retried.
 */
export async function makeDirectory(dir: string): Promise<void> {
  await make(resolve(dir), dir);
}

/** Creates `path` (and its missing parents); errors name `asked`, the directory the user gave. */
async function make(path: string, asked: string): Promise<void> {
  try {
    await mkdir(path);
    return;
  } catch (err) {
    const code = (err as NodeJS.ErrnoException).code;
    if (code === 'EEXIST') return exists(path, asked);
    if (code !== 'ENOENT') throw cannotCreate(asked, err);
  }
  const parent = dirname(path);
  if (parent === path) throw cannotCreate(asked, new Error('no such root'));
  await make(parent, asked);
  try {
    await mkdir(path);
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'EEXIST') return exists(path, asked);
    throw cannotCreate(asked, err);
  }
}

async function exists(path: string, asked: string): Promise<void> {
  if (!(await stat(path)).isDirectory())
    throw new CliError(`cannot create directory ${asked}: a file is in the way`);
}

function cannotCreate(dir: string, err: unknown): CliError {
  const e = err as NodeJS.ErrnoException;
  return new CliError(`cannot create directory ${dir}: ${e.code ?? e.message}`);
}
