/**
 * Migration 0020 on a vault that already holds jobs, time-stamps and audit rows: each table becomes
 * the first partition of its partitioned parent with no row copied or rewritten (same storage file,
 * same row versions), the guards and grants hold afterwards, the queues go on with the jobs left
 * queued, the audit log's ids continue, and new rows land in the monthly partitions.
 */
import { randomBytes } from 'node:crypto';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  createVaultPool,
  loadMigrations,
  migrate,
  openVault,
  UuidV7Generator,
  type StoredAttestation,
  type Vault,
} from '../../../src/vault/index.ts';
import { attestation, digestOf, freshDatabase, sqlstate, type FreshDatabase } from './helpers.ts';

const monthStart = (offset: number, now = new Date()): Date =>
  new Date(Date.UTC(now.getUTCFullYear(), now.getUTCMonth() + offset, 1));
const suffix = (d: Date): string => `_p${d.getUTCFullYear()}${String(d.getUTCMonth() + 1).padStart(2, '0')}`;

const TABLES = {
  transparency_jobs: 'id',
  timestamp_jobs: 'attestation_id',
  attestation_timestamps: 'attestation_id',
  audit_log: 'id',
} as const;
type Table = keyof typeof TABLES;

describe('migration 0020 on a vault with jobs, time-stamps and audit rows', () => {
  let db: FreshDatabase;
  let admin: pg.Pool;
  let runtime: pg.Pool;
  let vault: Vault;
  let records: StoredAttestation[];
  const snapshot = new Map<Table, unknown[]>();
  const files = new Map<Table, string>();
  let published: string;
  let queued: string[];
  let auditMax: number;

  /** Every row with its physical address and row version: unchanged means not copied or rewritten. */
  const dump = async (table: Table): Promise<unknown[]> =>
    (
      await admin.query<Record<string, unknown>>(
        `SELECT ctid::text AS ctid_, xmin::text AS xmin_, * FROM ${table} ORDER BY ${TABLES[table]}`,
      )
    ).rows;

  beforeAll(async () => {
    db = await freshDatabase('jobmig');
    admin = new pg.Pool({ connectionString: db.superuser, max: 2 });
    admin.on('error', () => undefined);
    const all = await loadMigrations();
    await migrate(db.url, { migrations: all.filter((m) => m.version < 20) });
    expect(all.some((m) => m.version === 20)).toBe(true);

    const v = await openVault(createVaultPool(db.runtime));
    const opts = { enqueueTransparency: true, enqueueTimestamps: true } as const;
    const at = (offset: number) =>
      new UuidV7Generator({ now: () => monthStart(offset).getTime() + 7 * 86_400_000 });
    records = [];
    for (const offset of [-1, 0, 1])
      records.push(
        ...(await v.attestations.append(
          Array.from({ length: 4 }, () => attestation({ namespace: 'jobmig' })),
          { ...opts, ids: at(offset) },
        )),
      );
    // Jobs in every state: published, failed (queued with an error), queued; time-stamps taken,
    // a time-stamp job failed for good, others queued.
    const claimed = await v.transparencyJobs.claim(3, { leaseMs: 60_000 });
    expect(claimed).toHaveLength(3);
    await v.transparencyJobs.setStatement(claimed[0]!, randomBytes(32));
    const done = await v.transparencyJobs.complete(claimed[0]!, {
      backend: 'local',
      entryId: randomBytes(32).toString('hex'),
      logIndex: 0,
      receipt: randomBytes(64),
    });
    published = done!.id;
    await v.transparencyJobs.fail(claimed[1]!, { error: 'log unreachable', delayMs: 0 });
    const stamps = await v.timestamps.claim(3, 60_000);
    for (const j of stamps.slice(0, 2))
      await v.timestamps.complete(j, {
        genTime: new Date(),
        tsa: 'CN=tsa',
        serial: randomBytes(8).toString('hex'),
        response: randomBytes(64),
      });
    await v.timestamps.fail(stamps[2]!, { final: true, error: 'certificate expired', delayMs: 0 });
    const audit = await v.audit.recordAll(
      Array.from({ length: 5 }, (_, i) => ({
        actor: 'mig',
        action: 'export',
        namespace: 'jobmig',
        object: `o${i}`,
      })),
    );
    auditMax = Math.max(...audit);
    await v.close();

    for (const table of Object.keys(TABLES) as Table[]) {
      snapshot.set(table, await dump(table));
      files.set(
        table,
        (await admin.query<{ f: string }>(`SELECT pg_relation_filenode('${table}')::text AS f`)).rows[0]!.f,
      );
    }
    expect(snapshot.get('transparency_jobs')).toHaveLength(12);
    expect(snapshot.get('attestation_timestamps')).toHaveLength(2);

    await migrate(db.url);
    vault = await openVault(createVaultPool(db.runtime));
    runtime = new pg.Pool({ connectionString: db.runtime, max: 2 });
    runtime.on('error', () => undefined);
    queued = (
      await admin.query<{ id: string }>("SELECT id FROM transparency_jobs WHERE state = 'queued'")
    ).rows.map((r) => r.id);
  }, 120_000);

  afterAll(async () => {
    await vault?.close();
    await runtime?.end();
    await admin?.end();
    await db?.drop();
  });

  it('keeps every row where it was: the old table is the first partition, not a copy', async () => {
    for (const table of Object.keys(TABLES) as Table[]) {
      expect([table, await dump(table)]).toEqual([table, snapshot.get(table)]);
      const before = `${table}_before`;
      const { rows } = await admin.query<{ f: string; kind: string; parent: string }>(
        `SELECT pg_relation_filenode('${before}')::text AS f, ` +
          `(SELECT relkind::text FROM pg_class WHERE oid = '${table}'::regclass) AS kind, ` +
          `(SELECT inhparent::regclass::text FROM pg_inherits WHERE inhrelid = '${before}'::regclass) AS parent`,
      );
      expect([table, rows[0]]).toEqual([table, { f: files.get(table), kind: 'p', parent: table }]);
      const parts = await admin.query<{ part: string }>(
        `SELECT DISTINCT tableoid::regclass::text AS part FROM ${table}`,
      );
      expect([table, parts.rows]).toEqual([table, [{ part: before }]]);
    }
    // A job table's first partition ends where the record partition of its newest row ends.
    const { rows } = await admin.query<{ parent: string; hi: string; to_at: Date }>(
      "SELECT parent, hi::text, to_at FROM vault_partitions WHERE name LIKE '%\\_before' ORDER BY parent",
    );
    const recordsBefore = rows.find((r) => r.parent === 'attestations')!;
    // (0019 ran on the empty vault: its first partition ends at this month's start.)
    expect(recordsBefore.to_at.toISOString()).toBe(monthStart(0).toISOString());
    // Jobs exist up to next month's records; the two time-stamps are of last month's (the first due).
    const to = Object.fromEntries(rows.map((r) => [r.parent, r.to_at.toISOString()]));
    expect(to).toMatchObject({
      transparency_jobs: monthStart(2).toISOString(),
      timestamp_jobs: monthStart(2).toISOString(),
      attestation_timestamps: monthStart(0).toISOString(),
    });
    expect(rows.find((r) => r.parent === 'audit_log')!.to_at.toISOString()).toBe(monthStart(1).toISOString());
  });

  it('keeps the guards: published jobs, settled jobs and time-stamps stay fixed; partitions refuse direct writes', async () => {
    expect(
      await sqlstate(admin.query("UPDATE transparency_jobs SET entry_id = 'x' WHERE id = $1", [published])),
    ).toBe('23001');
    expect(
      await sqlstate(admin.query("UPDATE timestamp_jobs SET state = 'queued' WHERE state = 'failed'")),
    ).toBe('23001');
    expect(await sqlstate(admin.query('DELETE FROM attestation_timestamps'))).toBe('23001');
    expect(await sqlstate(admin.query('DELETE FROM audit_log'))).toBe('23001');
    for (const table of Object.keys(TABLES) as Table[]) {
      expect([table, await sqlstate(admin.query(`DELETE FROM ${table}_before`))]).toEqual([table, '23001']);
      expect([table, await sqlstate(runtime.query(`SELECT 1 FROM ${table}_before LIMIT 1`))]).toEqual([
        table,
        '42501',
      ]);
    }
    // The runtime role moves jobs only through the functions, as before.
    expect(await sqlstate(runtime.query("UPDATE transparency_jobs SET last_error = 'x'"))).toBe('42501');
    expect(await sqlstate(runtime.query("UPDATE timestamp_jobs SET last_error = 'x'"))).toBe('42501');
  });

  it('goes on with the queued jobs and puts new rows in the monthly partitions', async () => {
    // The leased one too (its lease ended): an owner's update through the parent.
    await admin.query(
      "UPDATE transparency_jobs SET next_attempt_at = now() - interval '1 second' WHERE state = 'queued'",
    );
    const claimed = await vault.transparencyJobs.claim(100, { leaseMs: 60_000 });
    expect(claimed.map((j) => j.id).sort()).toEqual([...queued].sort());
    const stamps = await vault.timestamps.claim(100, 60_000);
    expect(stamps).toHaveLength(12 - 3);

    // Next month's records are inside the job tables' first partition; the month after, beyond it.
    const ids = new UuidV7Generator({ now: () => monthStart(2).getTime() + 1000 });
    const later = await vault.attestations.append([attestation({ namespace: 'jobmig' })], {
      enqueueTransparency: true,
      enqueueTimestamps: true,
      ids,
    });
    for (const table of ['transparency_jobs', 'timestamp_jobs']) {
      const { rows } = await admin.query<{ part: string }>(
        `SELECT tableoid::regclass::text AS part FROM ${table} WHERE attestation_id = $1`,
        [later[0]!.id],
      );
      expect(rows).toEqual([{ part: `${table}${suffix(monthStart(2))}` }]);
    }
    const id = await vault.audit.record({ actor: 'mig', action: 'export', namespace: 'jobmig' });
    expect(id.id).toBe(auditMax + 1);
    const where = await admin.query<{ part: string }>(
      'SELECT tableoid::regclass::text AS part FROM audit_log WHERE id = $1',
      [id.id],
    );
    // This month is inside the audit log's first partition (up to the month after its newest row).
    expect(where.rows).toEqual([{ part: 'audit_log_before' }]);
    const next = await admin.query<{ part: string }>(
      "INSERT INTO audit_log (at, actor, action) VALUES ($1, 'mig', 'export') RETURNING tableoid::regclass::text AS part, id",
      [monthStart(1)],
    );
    expect(next.rows[0]).toMatchObject({
      part: `audit_log${suffix(monthStart(1))}`,
      id: String(auditMax + 2),
    });
    expect(await vault.attestations.verifyChain({ digestOf })).toMatchObject({ ok: true, checked: 13 });
  });
});
