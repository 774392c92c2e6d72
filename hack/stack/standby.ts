/**
 * PostgreSQL with a streaming standby, reached through one address (hack/stack/proxy.ts), and the
 * failover a managed service performs: the primary dies (SIGKILL of every process of it, as a lost
 * host), the standby is promoted, the address moves to it.
 *
 *   synchronous   synchronous_standby_names = 'ANY 1 (aibom_standby)', synchronous_commit = on:
 *                 a commit returns only once the standby has it (Patroni's quorum commit): RPO 0
 *   asynchronous  the standby streams behind the primary and may miss the last transactions
 *
 * The base backup is taken with PostgreSQL's low-level backup API (pg_backup_start, a file copy,
 * pg_backup_stop, backup_label): the npm package's binaries have no pg_basebackup. A physical
 * replication slot created first keeps every WAL segment the standby still needs.
 *
 * After a failover the promoted server runs alone (what RDS Multi-AZ and Patroni do until a new
 * standby is built): its synchronous_standby_names is empty, so commits do not wait for a standby
 * that does not exist.
 */
import { readdirSync, readFileSync } from 'node:fs';
import {
  appendFile,
  chown,
  copyFile,
  lstat,
  mkdir,
  readdir,
  readlink,
  symlink,
  writeFile,
} from 'node:fs/promises';
import { join } from 'node:path';
import pg from 'pg';
import {
  runPostgresServer,
  serverUser,
  startPostgres,
  type Binaries,
  type Postgres,
  type ServerUser,
} from './postgres.ts';
import { freePort, isAlive, sleep, StartError, type Launch, type Proc } from './proc.ts';
import { holdLink, moveProxy, startProxy, type Proxy } from './proxy.ts';

export type StandbyMode = 'sync' | 'async';
export const STANDBY_MODES: readonly StandbyMode[] = ['sync', 'async'];

/** application_name of the standby's WAL receiver, as synchronous_standby_names names it. */
export const STANDBY_NAME = 'aibom_standby';
const SLOT = 'aibom_standby';

/** Settings of both servers: every commit is durable locally; fsync stays off (throwaway data). */
const SERVER_SETTINGS = { synchronous_commit: 'on', wal_level: 'replica', max_wal_senders: '4' } as const;

/** What a failover needs, serialisable (the stack's state file). */
export interface Replication {
  readonly mode: StandbyMode | 'none';
  /** The server clients reach now (direct port, pid). */
  readonly primary: { readonly pid: number; readonly port: number };
  /** The standby, until a failover promotes it. */
  readonly standby: { readonly pid: number; readonly port: number } | null;
  readonly proxy: { readonly pid: number; readonly listen: number; readonly control: number };
  /** Superuser password of the cluster (the same on both: the standby is a copy). */
  readonly password: string;
}

export interface ReplicatedPostgres extends Postgres {
  readonly replication: Replication;
  readonly procs: Proc[];
}

const directUrl = (password: string, port: number, database = 'postgres'): string =>
  `postgresql://postgres:${encodeURIComponent(password)}@127.0.0.1:${port}/${database}`;

/** `url` on another port (the proxy's). */
function viaPort(url: string, port: number): string {
  const u = new URL(url);
  u.port = String(port);
  return u.toString();
}

async function withClient<T>(url: string, fn: (c: pg.Client) => Promise<T>): Promise<T> {
  const c = new pg.Client({ connectionString: url, connectionTimeoutMillis: 5_000 });
  c.on('error', () => undefined);
  await c.connect();
  try {
    return await fn(c);
  } finally {
    await c.end().catch(() => undefined);
  }
}

async function poll<T>(what: string, probe: () => Promise<T | undefined>, timeoutMs: number): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  let last = '';
  for (;;) {
    try {
      const v = await probe();
      if (v !== undefined) return v;
    } catch (err) {
      last = ` (last error: ${(err as Error).message})`;
    }
    if (Date.now() > deadline)
      throw new StartError('postgres-standby', `timed out waiting for ${what}${last}`, '');
    await sleep(100);
  }
}

/** Directories whose contents a base backup leaves out (as pg_basebackup does); pg_wal is fetched by streaming. */
const EMPTIED = new Set([
  'pg_wal',
  'pg_replslot',
  'pg_stat_tmp',
  'pg_dynshmem',
  'pg_notify',
  'pg_serial',
  'pg_snapshots',
  'pg_subtrans',
]);
/** Files a base backup leaves out. */
const LEFT_OUT = new Set(['postmaster.pid', 'postmaster.opts', 'backup_label.old', 'tablespace_map.old']);

const isGone = (err: unknown): boolean => (err as NodeJS.ErrnoException).code === 'ENOENT';

/** `fn()`, or `fallback` when what it reads vanished meanwhile. */
async function unlessGone<T>(fn: () => Promise<T>, fallback: T): Promise<T> {
  try {
    return await fn();
  } catch (err) {
    if (isGone(err)) return fallback;
    throw err;
  }
}

/**
 * Copies a live data directory: a file that vanishes while it is copied (a recycled WAL segment, a
 * temporary statistics file) is skipped, as pg_basebackup does; WAL replay from the backup's start
 * makes every copied page consistent (full-page writes are forced during a backup).
 */
async function copyLive(src: string, dst: string, user: ServerUser | undefined, top = true): Promise<void> {
  const own = async (path: string): Promise<void> => {
    if (user) await chown(path, user.uid, user.gid);
  };
  for (const name of await unlessGone(() => readdir(src), [] as string[])) {
    if (top && LEFT_OUT.has(name)) continue;
    const [from, to] = [join(src, name), join(dst, name)];
    const st = await unlessGone(() => lstat(from), null);
    if (st === null) continue;
    if (st.isDirectory()) {
      await mkdir(to, { mode: st.mode & 0o7777 });
      await own(to);
      if (top && EMPTIED.has(name)) {
        if (name === 'pg_wal') {
          await mkdir(join(to, 'archive_status'), { mode: 0o700 });
          await own(join(to, 'archive_status'));
        }
        continue;
      }
      await copyLive(from, to, user, false);
    } else if (st.isSymbolicLink()) {
      await symlink(await readlink(from), to);
    } else if (st.isFile()) {
      if (await unlessGone(() => copyFile(from, to).then(() => true), false)) await own(to);
    }
  }
}

/**
 * A base backup of the running primary into `<standbyRoot>/postgres/data` (low-level API): the
 * session that starts the backup stops it, the copy excludes what PostgreSQL's own pg_basebackup
 * excludes, and the backup_label that pg_backup_stop returns goes into the copy.
 */
async function baseBackup(
  primaryData: string,
  standbyData: string,
  adminUrl: string,
  user: ServerUser | undefined,
): Promise<void> {
  await withClient(adminUrl, async (c) => {
    await c.query(`SELECT pg_create_physical_replication_slot($1, true)`, [SLOT]);
    await c.query(`SELECT pg_backup_start('aibom-vault standby', true)`);
    await copyLive(primaryData, standbyData, user);
    const { rows } = await c.query<{ labelfile: string; spcmapfile: string | null }>(
      'SELECT labelfile, spcmapfile FROM pg_backup_stop(false)',
    );
    const files: [string, string][] = [
      ['backup_label', rows[0]!.labelfile],
      ['standby.signal', ''],
      ...(rows[0]!.spcmapfile ? ([['tablespace_map', rows[0]!.spcmapfile]] as [string, string][]) : []),
    ];
    for (const [name, text] of files) {
      await writeFile(join(standbyData, name), text, { mode: 0o600 });
      if (user) await chown(join(standbyData, name), user.uid, user.gid);
    }
  });
}

/**
 * Primary (`<root>/postgres`, initdb'd and set up by startPostgres: roles, the vault database),
 * the proxy, and a standby (`<root>/standby/postgres`) streaming from the primary over the proxy's
 * replication link. Returns the URLs through the proxy (what DATABASE_URL is).
 */
export async function startReplicatedPostgres(
  root: string,
  mode: StandbyMode,
  launch: Launch = {},
  override?: Binaries,
): Promise<ReplicatedPostgres> {
  const procs: Proc[] = [];
  const spawned: Launch = {
    onSpawn: (p) => {
      procs.push(p);
      launch.onSpawn?.(p);
    },
    ...(launch.signal ? { signal: launch.signal } : {}),
  };
  const primary = await startPostgres(root, spawned, override, { settings: SERVER_SETTINGS });
  const password = decodeURIComponent(new URL(primary.url).password);
  const proxy: Proxy = await startProxy(
    root,
    { name: 'postgres-proxy', target: primary.port, linkTarget: primary.port },
    spawned,
  );
  const user = await serverUser();
  const standbyRoot = join(root, 'standby');
  const standbyDir = join(standbyRoot, 'postgres');
  const standbyData = join(standbyDir, 'data');
  await mkdir(standbyData, { recursive: true, mode: 0o700 });
  if (user) {
    for (const d of [standbyRoot, standbyDir, standbyData]) await chown(d, user.uid, user.gid);
  }
  await baseBackup(join(root, 'postgres', 'data'), standbyData, directUrl(password, primary.port), user);
  const conninfo = [
    'host=127.0.0.1',
    `port=${proxy.ports.linkListen}`,
    'user=postgres',
    `password=${password.replaceAll('\\', '\\\\').replaceAll("'", "\\'")}`,
    `application_name=${STANDBY_NAME}`,
  ].join(' ');
  await appendFile(
    join(standbyData, 'postgresql.auto.conf'),
    `primary_conninfo = '${conninfo.replaceAll("'", "''")}'\nprimary_slot_name = '${SLOT}'\n`,
  );
  const standbyPort = await freePort();
  const standby = await runPostgresServer(
    standbyRoot,
    standbyPort,
    directUrl(password, standbyPort),
    60_000,
    spawned,
    override,
    { name: 'postgres-standby', settings: { ...SERVER_SETTINGS, hot_standby: 'on' } },
  );
  await withClient(directUrl(password, primary.port), async (c) => {
    const streaming = async (): Promise<true | undefined> => {
      const { rows } = await c.query<{ state: string; sync_state: string }>(
        'SELECT state, sync_state FROM pg_stat_replication WHERE application_name = $1',
        [STANDBY_NAME],
      );
      const ok =
        rows[0]?.state === 'streaming' &&
        (mode === 'async' || ['quorum', 'sync'].includes(rows[0].sync_state));
      return ok ? true : undefined;
    };
    if (mode === 'sync') {
      // Only now: set before the standby existed, every commit (the roles above) would wait for it.
      await c.query(`ALTER SYSTEM SET synchronous_standby_names = 'ANY 1 (${STANDBY_NAME})'`);
      await c.query('SELECT pg_reload_conf()');
    }
    await poll(
      `the standby streaming${mode === 'sync' ? ' as the synchronous standby' : ''}`,
      streaming,
      60_000,
    );
  });
  const through = (url: string): string => viaPort(url, proxy.ports.listen);
  return {
    proc: primary.proc,
    url: through(primary.url),
    ownerUrl: through(primary.ownerUrl),
    runtimeUrl: through(primary.runtimeUrl),
    port: proxy.ports.listen,
    procs,
    replication: {
      mode,
      primary: { pid: primary.proc.pid, port: primary.port },
      standby: { pid: standby.pid, port: standbyPort },
      proxy: { pid: proxy.proc.pid, listen: proxy.ports.listen, control: proxy.ports.control },
      password,
    },
  };
}

/** Every process below `pid` (children, grandchildren, …), from /proc/<n>/stat. */
export function descendants(pid: number): number[] {
  const parent = new Map<number, number>();
  for (const entry of readdirSync('/proc')) {
    if (!/^\d+$/.test(entry)) continue;
    try {
      const stat = readFileSync(`/proc/${entry}/stat`, 'utf8');
      // pid (comm) state ppid …: comm may hold spaces and parentheses; ppid follows the last ')'.
      parent.set(Number(entry), Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[1]));
    } catch {
      /* exited meanwhile */
    }
  }
  const out: number[] = [];
  const walk = (p: number): void => {
    for (const [child, pp] of parent) {
      if (pp === p) {
        out.push(child);
        walk(child);
      }
    }
  };
  walk(pid);
  return out;
}

const signal = (pid: number, sig: NodeJS.Signals): void => {
  try {
    process.kill(pid, sig);
  } catch {
    /* gone */
  }
};

/**
 * The server dies as with its host: the postmaster is frozen first (it forks no new backend), then
 * it and every backend get SIGKILL. PostgreSQL puts each backend in a session of its own, so a
 * signal to the process group would miss them, and a backend outliving its postmaster could still
 * answer a commit.
 */
export async function crash(pid: number): Promise<void> {
  signal(pid, 'SIGSTOP');
  const all = [pid, ...descendants(pid)];
  for (const p of all) signal(p, 'SIGSTOP');
  for (const p of all) signal(p, 'SIGKILL');
  const deadline = Date.now() + 10_000;
  while (all.some(running) && Date.now() < deadline) await sleep(5);
}

/** Alive and not a zombie (a killed child its parent has not reaped yet is dead to its clients). */
function running(pid: number): boolean {
  if (!isAlive(pid)) return false;
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    return stat.slice(stat.lastIndexOf(')') + 2, stat.lastIndexOf(')') + 3) !== 'Z';
  } catch {
    return false;
  }
}

export interface FailoverReport {
  readonly killedPid: number;
  readonly promotedPort: number;
  /** Milliseconds from the start: primary gone, standby promoted, address moved. */
  readonly killedMs: number;
  readonly promotedMs: number;
  readonly movedMs: number;
  readonly replication: Replication;
}

/**
 * SIGKILL the primary, promote the standby (pg_promote, waiting for the end of recovery), move the
 * proxy to it. The proxy's link stays pointed at the dead primary: nothing streams any more.
 */
export async function failover(rep: Replication): Promise<FailoverReport> {
  if (rep.standby === null) throw new Error('no standby to promote: this stack has none (left)');
  const t0 = performance.now();
  const at = (): number => Math.round(performance.now() - t0);
  await crash(rep.primary.pid);
  const killedMs = at();
  const promoted = await withClient(directUrl(rep.password, rep.standby.port), async (c) => {
    const { rows } = await c.query<{ ok: boolean }>('SELECT pg_promote(true, 60) AS ok');
    return rows[0]?.ok === true;
  });
  if (!promoted) throw new Error('pg_promote did not finish within 60 s');
  const promotedMs = at();
  await moveProxy(rep.proxy.control, rep.standby.port);
  const movedMs = at();
  return {
    killedPid: rep.primary.pid,
    promotedPort: rep.standby.port,
    killedMs,
    promotedMs,
    movedMs,
    replication: { ...rep, mode: 'none', primary: rep.standby, standby: null },
  };
}

/** Holds (true) or releases (false) the standby's replication link (see proxy.ts). */
export const holdReplication = (rep: Replication, held: boolean): Promise<unknown> =>
  holdLink(rep.proxy.control, held);

/** The WAL positions of the pair (the standby's replay position), for test output. */
export async function replicationLag(rep: Replication): Promise<{ primary: string; standby: string } | null> {
  if (rep.standby === null) return null;
  const [primary, standby] = await Promise.all([
    withClient(
      directUrl(rep.password, rep.primary.port),
      async (c) => (await c.query<{ l: string }>('SELECT pg_current_wal_lsn()::text AS l')).rows[0]!.l,
    ),
    withClient(
      directUrl(rep.password, rep.standby.port),
      async (c) => (await c.query<{ l: string }>('SELECT pg_last_wal_receive_lsn()::text AS l')).rows[0]!.l,
    ),
  ]);
  return { primary, standby };
}
