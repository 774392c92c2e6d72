import { readdir, readlink } from 'node:fs/promises';

/**
 * The files process `pid` (default: this one) holds open that were created under `dir`, as
 * /proc/<pid>/fd shows them: the fd and its link (`<path> (deleted)` once the name is gone). Linux.
 */
export async function openFilesUnder(
  dir: string,
  pid: number | 'self' = 'self',
): Promise<{ fd: string; link: string }[]> {
  const out: { fd: string; link: string }[] = [];
  for (const fd of await readdir(`/proc/${pid}/fd`)) {
    const link = await readlink(`/proc/${pid}/fd/${fd}`).catch(() => '');
    if (link.startsWith(`${dir}/`)) out.push({ fd, link });
  }
  return out;
}
