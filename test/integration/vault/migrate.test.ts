import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  checkSchema,
  createVaultPool,
  loadMigrations,
  migrate,
  VaultError,
} from '../../../src/vault/index.ts';
import { freshDatabase } from './helpers.ts';

describe('vault migrations', () => {
  let db: Awaited<ReturnType<typeof freshDatabase>>;
  beforeAll(async () => {
    db = await freshDatabase('migrate');
  });
  afterAll(async () => {
    await db.drop();
  });

  it('applies once even when replicas start together, then is a no-op', async () => {
    const files = await loadMigrations();
    const versions = files.map((m) => m.version);
    expect(versions[0]).toBe(1);
    expect(versions).toEqual([...versions].sort((a, b) => a - b));
    const latest = versions.at(-1)!;
    const results = await Promise.all([migrate(db.url), migrate(db.url), migrate(db.url), migrate(db.url)]);
    // One replica applies every file; the others wait on the lock and find nothing to do.
    expect(results.map((r) => r.applied.length).sort()).toEqual([0, 0, 0, files.length]);
    expect(results.every((r) => r.current === latest)).toBe(true);

    const again = await migrate(db.url);
    expect(again).toEqual({ applied: [], current: latest });

    const c = new pg.Client({ connectionString: db.url });
    await c.connect();
    try {
      const { rows } = await c.query<{ version: number; checksum: string }>(
        'SELECT version, checksum FROM schema_migrations ORDER BY version',
      );
      expect(rows).toEqual(files.map((f) => ({ version: f.version, checksum: f.checksum })));
      expect(files[0]!.checksum).toMatch(/^sha256:[0-9a-f]{64}$/);
    } finally {
      await c.end();
    }
  });

  it('refuses to start when an applied migration changed', async () => {
    const files = await loadMigrations();
    const edited = files.map((m) => ({ ...m, checksum: `sha256:${'1'.repeat(64)}` }));
    const err = await migrate(db.url, { migrations: edited }).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(VaultError);
    expect((err as VaultError).code).toBe('MIGRATION_CHECKSUM_MISMATCH');
  });

  it('refuses a pending migration numbered below an applied one', async () => {
    const files = await loadMigrations();
    const sneaky = { version: 0, name: 'late', sql: 'SELECT 1', checksum: `sha256:${'2'.repeat(64)}` };
    const err = await migrate(db.url, { migrations: [sneaky, ...files] }).catch((e: unknown) => e);
    expect((err as VaultError).code).toBe('MIGRATION_INVALID');
  });

  it('rolls a failed migration back completely', async () => {
    const files = await loadMigrations();
    const brokenVersion = files.at(-1)!.version + 1;
    const broken = {
      version: brokenVersion,
      name: 'broken',
      sql: 'CREATE TABLE half_done (x int); SELECT no_such_function();',
      checksum: `sha256:${'3'.repeat(64)}`,
    };
    await expect(migrate(db.url, { migrations: [...files, broken] })).rejects.toMatchObject({
      code: '42883',
    });
    const c = new pg.Client({ connectionString: db.url });
    await c.connect();
    try {
      const t = await c.query<{ t: string | null }>(`SELECT to_regclass('half_done')::text AS t`);
      expect(t.rows[0]?.t).toBeNull();
      const v = await c.query('SELECT version FROM schema_migrations WHERE version = $1', [brokenVersion]);
      expect(v.rowCount).toBe(0);
    } finally {
      await c.end();
    }
  });

  it('runtime sessions run as vault_writer, and the runtime role can check the schema', async () => {
    const pool = createVaultPool(db.runtime, { max: 1 });
    try {
      const { rows } = await pool.query<{ current_user: string }>('SELECT current_user');
      expect(rows[0]?.current_user).toBe('vault_writer');
      await pool.query('RESET ALL');
      await pool.query('DISCARD ALL');
      const after = await pool.query<{ current_user: string }>('SELECT current_user');
      expect(after.rows[0]?.current_user).toBe('vault_writer');
    } finally {
      await pool.end();
    }
    const runtime = createVaultPool(db.runtime, { max: 1 });
    try {
      const files = await loadMigrations();
      const latest = files.at(-1)!.version;
      expect(await checkSchema(runtime)).toEqual({ current: latest });
      const next = {
        version: latest + 1,
        name: 'next',
        sql: 'SELECT 1',
        checksum: `sha256:${'4'.repeat(64)}`,
      };
      await expect(checkSchema(runtime, { migrations: [...files, next] })).rejects.toMatchObject({
        code: 'MIGRATION_PENDING',
      });
      const edited = files.map((m) => ({ ...m, checksum: `sha256:${'5'.repeat(64)}` }));
      await expect(checkSchema(runtime, { migrations: edited })).rejects.toMatchObject({
        code: 'MIGRATION_CHECKSUM_MISMATCH',
      });
    } finally {
      await runtime.end();
    }
    // With nothing pending, migrate only reads schema_migrations: the runtime login suffices.
    const asWriter = await migrate(db.runtime);
    expect(asWriter).toEqual({ applied: [], current: (await loadMigrations()).at(-1)!.version });
  });

  it('migrates several databases of one cluster at once (the role is cluster-wide)', async () => {
    const dbs = await Promise.all([freshDatabase('role1'), freshDatabase('role2'), freshDatabase('role3')]);
    try {
      const results = await Promise.all(dbs.map((d) => migrate(d.url)));
      const all = (await loadMigrations()).map((m) => m.version);
      expect(results.map((r) => r.applied)).toEqual([all, all, all]);
    } finally {
      await Promise.all(dbs.map((d) => d.drop()));
    }
  });
});
