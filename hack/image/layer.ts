import { createHash } from 'node:crypto';
import { lstat, readdir, readFile, readlink } from 'node:fs/promises';
import { join } from 'node:path';
import { gzipSync } from 'node:zlib';
import { pack, type Header } from 'tar-stream';

/**
 * One file-system entry of a layer. Paths are relative to the image root, without a leading `/`.
 * Ownership is root's unless `uid`/`gid` say otherwise.
 */
export type Entry =
  | { readonly path: string; readonly type: 'directory'; readonly mode?: number }
  | { readonly path: string; readonly type: 'file'; readonly data: Buffer; readonly mode: number }
  | { readonly path: string; readonly type: 'symlink'; readonly target: string };

export interface Layer {
  /** sha256 of the uncompressed tar (the config's diff_id). */
  readonly diffId: string;
  /** sha256 of the gzip blob (the manifest's layer digest). */
  readonly digest: string;
  readonly gz: Buffer;
  readonly files: number;
}

/**
 * The tree under `dir` as entries rooted at `prefix`. Only the executable bit of a file's mode is
 * kept (0755 or 0644); directories are 0755; hard links become plain files; sockets and devices
 * are refused.
 */
export async function entriesOf(dir: string, prefix: string): Promise<Entry[]> {
  const out: Entry[] = [{ path: prefix, type: 'directory' }];
  for (const name of await readdir(dir)) {
    const src = join(dir, name);
    const path = `${prefix}/${name}`;
    const st = await lstat(src);
    if (st.isSymbolicLink()) out.push({ path, type: 'symlink', target: await readlink(src) });
    else if (st.isDirectory()) out.push(...(await entriesOf(src, path)));
    else if (st.isFile()) {
      out.push({ path, type: 'file', data: await readFile(src), mode: st.mode & 0o111 ? 0o755 : 0o644 });
    } else throw new Error(`${src}: not a file, directory or symlink`);
  }
  return out;
}

/**
 * A deterministic layer: entries sorted by path, each parent directory present, every timestamp
 * the Unix epoch, owner root:root with empty user and group names, no extended attributes, gzip
 * at a fixed level with a zero header mtime. The same entries give the same bytes, whatever the
 * build machine's clock, umask or file order.
 */
export async function buildLayer(entries: readonly Entry[]): Promise<Layer> {
  const byPath = new Map<string, Entry>();
  for (const e of entries) {
    const path = e.path.replace(/^\/+|\/+$/g, '');
    if (path === '') continue;
    const prev = byPath.get(path);
    if (prev && !(prev.type === 'directory' && e.type === 'directory')) {
      throw new Error(`layer: ${path} given twice`);
    }
    byPath.set(path, { ...e, path });
    // Parents first-class: an extracting runtime must not invent their modes.
    for (let i = path.indexOf('/'); i > 0; i = path.indexOf('/', i + 1)) {
      const parent = path.slice(0, i);
      if (!byPath.has(parent)) byPath.set(parent, { path: parent, type: 'directory' });
    }
  }
  const sorted = [...byPath.values()].sort((a, b) => (a.path < b.path ? -1 : a.path > b.path ? 1 : 0));
  const tar = pack();
  const chunks: Buffer[] = [];
  tar.on('data', (c: unknown) => void chunks.push(c as Buffer));
  const ended = new Promise<void>((resolve, reject) => {
    tar.on('end', resolve);
    tar.on('error', reject);
  });
  const base = { mtime: new Date(0), uid: 0, gid: 0, uname: '', gname: '' } satisfies Partial<Header>;
  for (const e of sorted) {
    const header = (
      e.type === 'directory'
        ? { ...base, name: `${e.path}/`, type: 'directory', mode: e.mode ?? 0o755 }
        : e.type === 'symlink'
          ? { ...base, name: e.path, type: 'symlink', linkname: e.target, mode: 0o777 }
          : { ...base, name: e.path, type: 'file', mode: e.mode, size: e.data.length }
    ) as Header;
    await new Promise<void>((resolve, reject) => {
      const done = (err?: Error | null): void => (err ? reject(err) : resolve());
      if (e.type === 'file') tar.entry(header, e.data, done);
      else tar.entry(header, done);
    });
  }
  tar.finalize();
  await ended;
  const raw = Buffer.concat(chunks);
  const gz = gzipSync(raw, { level: 9 });
  return { diffId: sha256(raw), digest: sha256(gz), gz, files: sorted.length };
}

export const sha256 = (b: Uint8Array): string => `sha256:${createHash('sha256').update(b).digest('hex')}`;
