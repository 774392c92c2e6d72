/**
 * Roles that hold (docs/vault.md "Roles"): the runtime login owns nothing, cannot become the owner,
 * may only insert into the append-only tables and call the vault's functions; the heads move only
 * forward, and only through those functions. Every check runs as the login the service uses.
 */
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  createVaultPool,
  runtimeRoleProblems,
  SQLSTATE_APPEND_ONLY,
  SQLSTATE_INSUFFICIENT_PRIVILEGE,
  UuidV7Generator,
  type StoredAttestation,
} from '../../../src/vault/index.ts';
import { attestation, digestOf, setupVault, sqlstate, type TestVault } from './helpers.ts';

/** Tables every deployment has; the checks below cover whatever else the schema holds too (partitioned
 * tables and each partition of them included). */
const KNOWN_TABLES = [
  'artifacts',
  'attestation_timestamps',
  'attestation_claims',
  'attestations',
  'audit_log',
  'runs',
  'schema_migrations',
  'scitt_log_entries',
  'scitt_log_head',
  'scitt_log_nodes',
  'timestamp_jobs',
  'transparency_jobs',
  'vault_cursor_key',
  'vault_head',
];

describe('database roles', () => {
  let t: TestVault;
  let owner: pg.Pool;
  let tables: { name: string; column: string }[];
  let stored: StoredAttestation[];

  beforeAll(async () => {
    t = await setupVault('roles');
    owner = new pg.Pool({ connectionString: t.ownerUrl, max: 2 });
    stored = await t.vault.attestations.append([attestation(), attestation()]);
    const { rows } = await t.admin.query<{ name: string; column: string }>(`
      SELECT c.relname AS name,
             (SELECT a.attname FROM pg_attribute a WHERE a.attrelid = c.oid AND a.attnum > 0
               AND NOT a.attisdropped AND a.attidentity = '' AND a.attgenerated = ''
               ORDER BY a.attnum LIMIT 1) AS column
      FROM pg_class c WHERE c.relkind IN ('r', 'p') AND c.relnamespace = current_schema()::regnamespace
      ORDER BY c.relname`);
    tables = rows;
  });
  afterAll(async () => {
    await owner?.end();
    await t?.close();
  });

  it('the runtime login owns nothing and is no superuser; the owner and the superuser are flagged', async () => {
    expect(await t.vault.runtimeRoleProblems()).toEqual([]);
    const { rows } = await t.pool.query<{ session_user: string; current_user: string }>(
      'SELECT session_user, current_user',
    );
    expect(rows[0]).toEqual({ session_user: 'vault_app', current_user: 'vault_writer' });
    const asOwner = createVaultPool(t.ownerUrl, { role: null, max: 1 });
    const asSuperuser = new pg.Pool({ connectionString: t.admin.options.connectionString, max: 1 });
    try {
      expect((await runtimeRoleProblems(asOwner)).join('\n')).toMatch(
        /vault_owner owns [^\n]*\battestations\b/,
      );
      expect((await runtimeRoleProblems(asSuperuser)).join('\n')).toMatch(/is a superuser/);
    } finally {
      await asOwner.end();
      await asSuperuser.end();
    }
  });

  it('as the runtime login: UPDATE, DELETE and TRUNCATE of every vault table are refused (42501)', async () => {
    expect(tables.map((x) => x.name)).toEqual(expect.arrayContaining(KNOWN_TABLES));
    for (const { name, column } of tables) {
      for (const sql of [
        `UPDATE ${name} SET ${column} = ${column}`,
        `DELETE FROM ${name}`,
        `TRUNCATE ${name}`,
      ]) {
        expect(await sqlstate(t.pool.query(sql)), sql).toBe(SQLSTATE_INSUFFICIENT_PRIVILEGE);
      }
    }
  });

  it('as the runtime login: rows of the mirror, the queue and the log nodes only through functions', async () => {
    for (const sql of [
      `INSERT INTO runs (id, namespace, name, spec) VALUES (gen_random_uuid(), 'x', 'y', '{}')`,
      `UPDATE transparency_jobs SET state = 'published'`,
      `INSERT INTO scitt_log_nodes (level, idx, hash) VALUES (1, 0, sha256(''))`,
      'SELECT last_seq FROM vault_head FOR UPDATE',
      'SELECT tree_size FROM scitt_log_head FOR UPDATE',
    ]) {
      expect(await sqlstate(t.pool.query(sql)), sql).toBe(SQLSTATE_INSUFFICIENT_PRIVILEGE);
    }
  });

  it('as the runtime login: no SET ROLE to the owner or a superuser, no trigger switched off', async () => {
    const c = await t.pool.connect();
    try {
      for (const sql of [
        'SET ROLE vault_owner',
        'SET ROLE postgres',
        'SET SESSION AUTHORIZATION vault_owner',
      ]) {
        expect(await sqlstate(c.query(sql)), sql).toBe(SQLSTATE_INSUFFICIENT_PRIVILEGE);
      }
      // Back to the login role itself: what a session of the old single-login setup could escape to.
      for (const back of ['RESET ROLE', 'SET ROLE vault_app', 'SET ROLE vault_writer']) {
        await c.query(back);
        for (const sql of [
          'ALTER TABLE attestations DISABLE TRIGGER attestations_append_only',
          'ALTER TABLE attestations DISABLE TRIGGER ALL',
          'ALTER TABLE vault_head DISABLE TRIGGER vault_head_advance',
          'SET session_replication_role = replica',
          'CREATE TABLE attestations_shadow (id uuid)',
        ]) {
          expect(await sqlstate(c.query(sql)), `${back}; ${sql}`).toBe(SQLSTATE_INSUFFICIENT_PRIVILEGE);
        }
      }
    } finally {
      await c.query('RESET ROLE').catch(() => undefined);
      c.release();
    }
  });

  it('only the runtime role may call the SECURITY DEFINER functions, and each has a fixed search_path', async () => {
    const { rows } = await t.admin.query<{ name: string; public_exec: boolean; config: string[] | null }>(`
      SELECT p.proname AS name, has_function_privilege('public', p.oid, 'EXECUTE') AS public_exec,
             p.proconfig AS config
      FROM pg_proc p WHERE p.prosecdef AND p.pronamespace = current_schema()::regnamespace
      ORDER BY p.proname`);
    expect(rows.map((r) => r.name)).toEqual(
      expect.arrayContaining([
        'vault_chain_extend',
        'vault_lock_head',
        'scitt_log_advance',
        'runs_upsert',
        'timestamp_jobs_claim',
        'timestamp_jobs_complete',
        'timestamp_jobs_fail',
      ]),
    );
    for (const r of rows) {
      expect(r.public_exec, r.name).toBe(false);
      expect(
        r.config?.find((s) => s.startsWith('search_path=')),
        r.name,
      ).toMatch(/^search_path=public, pg_temp$/);
    }
  });

  it('appends still work, and the head moves only onto rows that continue the chain', async () => {
    const [s] = await t.vault.attestations.append([attestation()]);
    expect(s!.seq).toBe(stored.at(-1)!.seq + 1);
    const head = async () =>
      (await t.pool.query<{ last_seq: string; last_id: string }>('SELECT last_seq, last_id FROM vault_head'))
        .rows[0]!;
    expect(await head()).toEqual({ last_seq: String(s!.seq), last_id: s!.id });

    // A row the runtime inserts itself, off the chain: refused by the insert trigger (23001).
    const a = attestation();
    const insert = (seq: number, prev: string, id: string) =>
      t.pool.query(
        `INSERT INTO attestations (id, seq, namespace, kind, subjects, predicate_type, envelope, digest, prev_digest, signature)
         VALUES ($1, $2, 'team-a', 'run', ARRAY['run:x'], 'p', $3, $4, $5, '{}')`,
        [id, seq, a.envelope, a.digest, prev],
      );
    const newer = new UuidV7Generator().next(s!.id);
    expect(await sqlstate(insert(s!.seq + 5, s!.digest, newer)), 'a gap').toBe(SQLSTATE_APPEND_ONLY);
    expect(await sqlstate(insert(s!.seq + 1, `sha256:${'e'.repeat(64)}`, newer)), 'a broken link').toBe(
      SQLSTATE_APPEND_ONLY,
    );
    expect(
      await sqlstate(
        insert(
          s!.seq + 1,
          s!.digest,
          stored[0]!.id.replace(/.$/, (c) => (c === '0' ? '1' : '0')),
        ),
      ),
      'an older id',
    ).toBe(SQLSTATE_APPEND_ONLY);
    expect(await head()).toEqual({ last_seq: String(s!.seq), last_id: s!.id });
    // The head is the trigger's to move: the row that does continue the chain moves it.
    await insert(s!.seq + 1, s!.digest, newer);
    expect(await head()).toEqual({ last_seq: String(s!.seq + 1), last_id: newer });
    const [next] = await t.vault.attestations.append([attestation()]);
    expect(next!.seq).toBe(s!.seq + 2);
    expect(next!.prevDigest).toBe(a.digest);
  });

  it('not even the owner can rewrite a head in place (the UPDATE that once stopped every append)', async () => {
    const sql = [
      `UPDATE vault_head SET last_id = '00000000-0000-7000-8000-000000000000'`,
      `UPDATE vault_head SET last_digest = 'sha256:${'a'.repeat(64)}'`,
      `UPDATE scitt_log_head SET root_hash = sha256('x')`,
    ];
    for (const q of sql) expect(await sqlstate(owner.query(q)), q).toBe(SQLSTATE_APPEND_ONLY);
    const [after] = await t.vault.attestations.append([attestation()]);
    expect(after).toBeDefined();
    expect((await t.vault.attestations.verifyChain({ digestOf })).ok).toBe(true);
  });

  it('the SCITT log head moves only forward, onto subtrees and a root that hash from the entries', async () => {
    const zero = Buffer.alloc(32);
    for (const [size, root] of [
      [0, zero],
      [1, zero],
    ] as const) {
      const err = await sqlstate(
        t.pool.query('SELECT scitt_log_advance($1, $2, now(), $3::smallint[], $4::bigint[], $5::bytea[])', [
          size,
          root,
          [],
          [],
          [],
        ]),
      );
      // size 0 does not move forward; size 1 has no stored entry behind it.
      expect(err, `size ${size}`).toBe(SQLSTATE_APPEND_ONLY);
    }
  });

  it('time-stamps (0013): a job names only its record; only its lease holder stores the time-stamp, once; settled stays settled', async () => {
    const [record] = await t.vault.attestations.append([attestation()], { enqueueTimestamps: true });
    const id = record!.id;
    const response = Buffer.alloc(64, 7);
    for (const sql of [
      // The runtime may neither plant a time-stamp nor a settled job: only the functions write them.
      `INSERT INTO attestation_timestamps (attestation_id, gen_time, tsa, serial, response)
         VALUES ('${id}', now(), 'CN=x', '01', '\\x${response.toString('hex')}')`,
      `INSERT INTO timestamp_jobs (attestation_id, state) VALUES ('${stored[0]!.id}', 'done')`,
      `UPDATE timestamp_jobs SET state = 'done'`,
    ]) {
      expect(await sqlstate(t.pool.query(sql)), sql).toBe(SQLSTATE_INSUFFICIENT_PRIVILEGE);
    }
    // A job names a stored record (checked on insert, 23503), or nothing is queued.
    expect(await sqlstate(t.vault.timestamps.enqueue([crypto.randomUUID()]))).toBe('23503');
    const [job] = await t.vault.timestamps.claim(10, 60_000);
    expect(job?.attestationId).toBe(id);
    const stamp = { genTime: new Date(), tsa: 'CN=test', serial: '01', response };
    // Another token (a stamper whose lease ended) changes nothing.
    expect(await t.vault.timestamps.complete({ ...job!, leaseToken: crypto.randomUUID() }, stamp)).toBe(
      false,
    );
    expect(await t.vault.timestamps.get(id)).toBeNull();
    expect(await t.vault.timestamps.complete(job!, stamp)).toBe(true);
    expect((await t.vault.timestamps.get(id))?.response.equals(response)).toBe(true);
    // Settled: the holder cannot complete or fail it again, and not even the owner can reopen it or
    // rewrite the time-stamp.
    expect(await t.vault.timestamps.complete(job!, { ...stamp, serial: '02' })).toBe(false);
    expect(await t.vault.timestamps.fail(job!, { final: false, error: 'x', delayMs: 0 })).toBe(false);
    for (const sql of [
      `UPDATE timestamp_jobs SET state = 'queued' WHERE attestation_id = '${id}'`,
      `UPDATE attestation_timestamps SET serial = '02'`,
      `DELETE FROM attestation_timestamps`,
      `DELETE FROM timestamp_jobs`,
    ]) {
      expect(await sqlstate(owner.query(sql)), sql).toBe(SQLSTATE_APPEND_ONLY);
    }
    expect((await t.vault.timestamps.job(id))?.state).toBe('done');
    expect((await t.vault.attestations.get(id))?.timestamp?.serial).toBe('01');
  });

  it('the run mirror: spec fixed once written, status fixed once terminal', async () => {
    const run = {
      metadata: { uid: '0190f000-0000-4000-8000-000000000001', namespace: 'team-a', name: 'r' },
      spec: { steps: [{ id: 'fetch', tool: { name: 'curl' } }], policyPack: { name: 'baseline' } },
      status: { phase: 'Running', steps: [] },
    } as never;
    await t.vault.runs.upsert(run);
    const changed = {
      ...(run as object),
      spec: { steps: [{ id: 'fetch', tool: { name: 'wget' } }], policyPack: { name: 'other' } },
    } as never;
    await expect(t.vault.runs.upsert(changed)).rejects.toMatchObject({ code: SQLSTATE_APPEND_ONLY });
    const done = {
      ...(run as object),
      status: { phase: 'Succeeded', steps: [{ id: 'fetch', phase: 'Succeeded' }] },
    };
    await t.vault.runs.upsert(done as never);
    await t.vault.runs.upsert({ ...done, status: { phase: 'Failed', steps: [] } } as never);
    const mirror = await t.vault.runs.get('0190f000-0000-4000-8000-000000000001');
    expect(mirror?.spec).toEqual((run as { spec: unknown }).spec);
    expect(mirror?.phase).toBe('Succeeded');
    expect(mirror?.status).toEqual({ phase: 'Succeeded', steps: [{ id: 'fetch', phase: 'Succeeded' }] });
  });
});
