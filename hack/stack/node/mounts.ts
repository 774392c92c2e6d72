import { readFile } from 'node:fs/promises';
import { trySh } from './host.ts';

/** Decodes the octal escapes of /proc/self/mountinfo (`\040` for a space, ...). */
const unescape = (s: string): string =>
  s.replace(/\\([0-7]{3})/g, (_, o: string) => String.fromCharCode(parseInt(o, 8)));

/** Mount points at or below `dir`, deepest (last mounted) first. */
export async function mountsUnder(dir: string): Promise<string[]> {
  const text = await readFile('/proc/self/mountinfo', 'utf8');
  const prefix = dir.endsWith('/') ? dir : `${dir}/`;
  return text
    .split('\n')
    .map((l) => l.split(' ')[4])
    .filter((m): m is string => m !== undefined)
    .map(unescape)
    .filter((m) => m === dir || m.startsWith(prefix))
    .reverse();
}

/**
 * Unmounts everything mounted at or below `dir` (pod volumes, container root filesystems, the
 * sandboxes' /dev/shm and network namespace files), deepest first; lazily, so a mount still busy
 * goes as soon as its last user does. Returns the mount points still there afterwards.
 */
export async function unmountUnder(dir: string): Promise<string[]> {
  for (let round = 0; round < 5; round++) {
    const mounts = await mountsUnder(dir);
    if (mounts.length === 0) return [];
    for (const m of mounts) await trySh('umount', ['--lazy', m]);
  }
  return mountsUnder(dir);
}
