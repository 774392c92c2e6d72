import { createHash } from 'node:crypto';
import { readdir, readFile } from 'node:fs/promises';
import { pathToFileURL } from 'node:url';
import pg from 'pg';
import type { Logger } from '../log/index.ts';
import { VaultError } from './errors.ts';
import { ensurePartitions } from './partitions.ts';

export interface Migration {
  readonly version: number;
  readonly name: string;
  readonly sql: string;
  /** `sha256:<hex>` of the file with line endings normalised to LF. */
  readonly checksum: string;
}

export interface MigrateResult {
  /** Versions applied by this call, in order. */
  readonly applied: readonly number[];
  /** Highest version now recorded in the database. */
  readonly current: number;
}

/**
 * The SQL files ship next to this module. A compiled build must copy `src/vault/migrations/*.sql`
 * next to the emitted JavaScript (tsc does not copy them).
 */
export const MIGRATIONS_DIR = new URL('./migrations/', import.meta.url);

/** Any constant works as long as every replica uses the same one ("vault" in ASCII). */
const MIGRATION_LOCK_KEY = 0x7661756c74;
const FILE = /^(\d{4})_([a-z0-9_]+)\.sql$/;

export async function loadMigrations(dir: URL | string = MIGRATIONS_DIR): Promise<Migration[]> {
  const base = typeof dir === 'string' ? pathToFileURL(dir.endsWith('/') ? dir : `${dir}/`) : dir;
  const names = (await readdir(base)).filter((n) => n.endsWith('.sql')).sort();
  const out: Migration[] = [];
  for (const file of names) {
    const m = FILE.exec(file);
    if (m === null)
      throw new VaultError('MIGRATION_INVALID', `migration file name ${file} is not NNNN_name.sql`);
    const version = Number(m[1]);
    if (out.some((x) => x.version === version)) {
      throw new VaultError('MIGRATION_INVALID', `two migration files have version ${version}`);
    }
    const sql = (await readFile(new URL(file, base), 'utf8')).replaceAll('\r\n', '\n');
    const checksum = `sha256:${createHash('sha256').update(sql).digest('hex')}`;
    out.push({ version, name: m[2]!, sql, checksum });
  }
  return out;
}

/**
 * Brings the schema up to date. Runs as the connecting user (the owner), not as the runtime role.
 * Replicas starting together serialize on a session advisory lock; each migration runs in its own
 * transaction together with its `schema_migrations` row, so a failed migration leaves nothing.
 * Refuses (MIGRATION_CHECKSUM_MISMATCH) when an applied file changed, and (MIGRATION_INVALID) when
 * a pending file is older than the newest applied one. Versions in the database that this build
 * does not know (a newer replica migrated first) are tolerated and logged.
 *
 * With nothing pending it needs only SELECT on `schema_migrations`; processes that must never
 * migrate use {@link checkSchema} instead.
 */
export async function migrate(
  connection: string | pg.ClientConfig,
  options: { logger?: Logger; migrations?: readonly Migration[] } = {},
): Promise<MigrateResult> {
  const migrations = options.migrations ?? (await loadMigrations());
  const log = options.logger?.child({ component: 'vault-migrate' });
  const client = new pg.Client(
    typeof connection === 'string' ? { connectionString: connection } : connection,
  );
  // A connection lost between statements emits `error` with nothing waiting: heard here (the
  // statement that follows fails instead of the process).
  client.on('error', () => undefined);
  await client.connect();
  try {
    await client.query('SELECT pg_advisory_lock($1)', [MIGRATION_LOCK_KEY]);
    try {
      const result = await migrateLocked(client, migrations, log);
      await ensureAhead(client, log);
      return result;
    } finally {
      // A dead session has released the lock already; keep the original error.
      await client.query('SELECT pg_advisory_unlock($1)', [MIGRATION_LOCK_KEY]).catch(() => undefined);
    }
  } finally {
    await client.end();
  }
}

async function migrateLocked(
  client: pg.Client,
  migrations: readonly Migration[],
  log: Logger | undefined,
): Promise<MigrateResult> {
  const exists = await client.query<{ t: string | null }>(
    `SELECT to_regclass('schema_migrations')::text AS t`,
  );
  if (exists.rows[0]?.t == null) {
    await client.query(`
      CREATE TABLE schema_migrations (
        version integer PRIMARY KEY,
        name text NOT NULL,
        checksum text NOT NULL,
        applied_at timestamptz NOT NULL DEFAULT now()
      )`);
  }
  const { rows } = await client.query<AppliedRow>(
    'SELECT version, name, checksum FROM schema_migrations ORDER BY version',
  );
  const { newest, pending } = compare(migrations, rows, log);
  const early = pending.find((m) => m.version < newest);
  if (early !== undefined) {
    throw new VaultError(
      'MIGRATION_INVALID',
      `migration ${early.version}_${early.name} is pending but ${newest} is already applied; renumber it`,
    );
  }
  const done: number[] = [];
  for (const m of pending) {
    log?.info({ version: m.version, migration: m.name }, 'applying migration');
    await client.query('BEGIN');
    try {
      await client.query(m.sql);
      await client.query('INSERT INTO schema_migrations (version, name, checksum) VALUES ($1, $2, $3)', [
        m.version,
        m.name,
        m.checksum,
      ]);
      await client.query('COMMIT');
    } catch (err) {
      // Keep the migration's error, not a failed ROLLBACK's on a dead connection.
      await client.query('ROLLBACK').catch(() => undefined);
      throw err;
    }
    done.push(m.version);
  }
  const current = Math.max(newest, ...done);
  return { applied: done, current };
}

/**
 * Every start-up creates the monthly partitions of the months ahead (migration 0019), so appends
 * never wait for them; skipped when the database predates partitioning (a test's partial list).
 */
async function ensureAhead(client: pg.Client, log: Logger | undefined): Promise<void> {
  const { rows } = await client.query<{ f: string | null }>(
    `SELECT to_regprocedure('vault_partitions_ensure(integer)')::text AS f`,
  );
  if (rows[0]?.f == null) return;
  const created = await ensurePartitions(client);
  if (created.length > 0) log?.info({ partitions: created }, 'created vault partitions ahead');
}

interface AppliedRow {
  version: number;
  name: string;
  checksum: string;
}

/** Checks applied checksums against the files; returns what is pending. */
function compare(
  migrations: readonly Migration[],
  rows: readonly AppliedRow[],
  log: Logger | undefined,
): { newest: number; pending: Migration[] } {
  const applied = new Map(rows.map((r) => [r.version, r]));
  for (const m of migrations) {
    const row = applied.get(m.version);
    if (row !== undefined && row.checksum !== m.checksum) {
      throw new VaultError(
        'MIGRATION_CHECKSUM_MISMATCH',
        `migration ${m.version}_${m.name} was applied with checksum ${row.checksum} but the file now has ` +
          `${m.checksum}; applied migrations must never change: add a new migration instead`,
      );
    }
  }
  const known = new Set(migrations.map((m) => m.version));
  const unknown = rows.filter((r) => !known.has(r.version)).map((r) => r.version);
  if (unknown.length > 0)
    log?.warn({ versions: unknown }, 'database has migrations this build does not know');
  const newest = rows.reduce((max, r) => Math.max(max, r.version), 0);
  return { newest, pending: migrations.filter((m) => !applied.has(m.version)) };
}

/**
 * Read-only start-up check for processes that must not migrate (the runtime login in production):
 * every migration of this build is applied with an unchanged checksum. Throws MIGRATION_PENDING or
 * MIGRATION_CHECKSUM_MISMATCH. Works through the runtime pool (`vault_writer` may read
 * `schema_migrations`).
 */
export async function checkSchema(
  db: pg.Pool | pg.Client,
  options: { logger?: Logger; migrations?: readonly Migration[] } = {},
): Promise<{ current: number }> {
  const migrations = options.migrations ?? (await loadMigrations());
  const exists = await db.query<{ t: string | null }>(`SELECT to_regclass('schema_migrations')::text AS t`);
  const rows =
    exists.rows[0]?.t == null
      ? []
      : (await db.query<AppliedRow>('SELECT version, name, checksum FROM schema_migrations ORDER BY version'))
          .rows;
  const { newest, pending } = compare(
    migrations,
    rows,
    options.logger?.child({ component: 'vault-migrate' }),
  );
  if (pending.length > 0) {
    throw new VaultError(
      'MIGRATION_PENDING',
      `database schema is behind this build: pending migrations ${pending.map((m) => m.version).join(', ')}; ` +
        'run the migrations with the owner credentials',
    );
  }
  return { current: newest };
}
