/**
 * The job tables and the audit log partitioned by month (migration 0020, docs/vault.md
 * "Partitions"): a record's SCITT job, time-stamp job and time-stamp live in the partitions of its
 * record's month; both queues claim and settle jobs of two months in due order; the guards (published
 * job immutable, settled job fixed, time-stamps append-only) and the NOTIFY triggers work on the
 * partitioned parents; the audit log pages across a month boundary; a statement naming a partition
 * directly is refused for every role; and the queries of src/ plan to indexes.
 */
import { randomBytes, randomUUID } from 'node:crypto';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { UuidV7Generator, type StoredAttestation } from '../../../src/vault/index.ts';
import { attestation, setupVault, sqlstate, type TestVault } from './helpers.ts';

const monthStart = (offset: number, now = new Date()): Date =>
  new Date(Date.UTC(now.getUTCFullYear(), now.getUTCMonth() + offset, 1));
const suffix = (d: Date): string => `_p${d.getUTCFullYear()}${String(d.getUTCMonth() + 1).padStart(2, '0')}`;

describe('job tables and audit log partitioned by month', () => {
  let t: TestVault;
  const run = randomUUID();
  const ns = `jobs-${randomUUID().slice(0, 8)}`;
  let early: StoredAttestation[];
  let late: StoredAttestation[];
  const thisMonth = suffix(monthStart(0));
  const nextMonth = suffix(monthStart(1));

  /** The partition holding each row of `table` (keyed by attestation_id). */
  const partitionsOf = async (table: string): Promise<Map<string, string>> => {
    const { rows } = await t.admin.query<{ id: string; part: string }>(
      `SELECT attestation_id::text AS id, tableoid::regclass::text AS part FROM ${table}`,
    );
    return new Map(rows.map((r) => [r.id, r.part]));
  };

  beforeAll(async () => {
    t = await setupVault('jobparts');
    const opts = { enqueueTransparency: true, enqueueTimestamps: true } as const;
    early = await t.vault.attestations.append(
      Array.from({ length: 7 }, () => attestation({ runId: run, namespace: ns })),
      opts,
    );
    // Ids in the first second of next month: the partitions created ahead take them and their jobs.
    const ids = new UuidV7Generator({ now: () => monthStart(1).getTime() + 1000 });
    late = await t.vault.attestations.append(
      Array.from({ length: 6 }, () => attestation({ runId: run, namespace: ns })),
      { ...opts, ids },
    );
  }, 60_000);

  afterAll(async () => {
    await t?.close();
  });

  it('puts each job in the partition of its record month, beside the record', async () => {
    const records = await partitionsOf('(SELECT id AS attestation_id, tableoid FROM attestations) a');
    expect(new Set([...records.values()])).toEqual(
      new Set([`attestations${thisMonth}`, `attestations${nextMonth}`]),
    );
    for (const table of ['transparency_jobs', 'timestamp_jobs']) {
      const jobs = await partitionsOf(table);
      expect(jobs.size).toBe(early.length + late.length);
      for (const s of [...early, ...late])
        expect(jobs.get(s.id)).toBe(records.get(s.id)!.replace('attestations', table));
    }
  });

  it('claims SCITT jobs of two months in due order and publishes them; published jobs stay fixed', async () => {
    const jobs = await t.vault.transparencyJobs.getByAttestation([...early, ...late].map((s) => s.id));
    // Next month's jobs due first (in reverse id order), this month's after: the claim merges the
    // partitions' due indexes.
    const order = [...late].reverse().concat(early);
    for (const [i, s] of order.entries()) {
      await t.admin.query(
        `UPDATE transparency_jobs SET next_attempt_at = now() - interval '1 hour' + $2 * interval '1 second' WHERE attestation_id = $1`,
        [s.id, i],
      );
    }
    const first = await t.vault.transparencyJobs.claim(4, { leaseMs: 60_000 });
    expect(first.map((j) => j.attestationId)).toEqual(order.slice(0, 4).map((s) => s.id));
    const rest = await t.vault.transparencyJobs.claim(100, { leaseMs: 60_000 });
    expect(rest.map((j) => j.attestationId)).toEqual(order.slice(4).map((s) => s.id));
    expect(await t.vault.transparencyJobs.claim(100, { leaseMs: 60_000 })).toEqual([]);

    for (const job of [...first, ...rest]) {
      expect(await t.vault.transparencyJobs.setStatement(job, randomBytes(32))).not.toBeNull();
      const done = await t.vault.transparencyJobs.complete(job, {
        backend: 'local',
        entryId: randomBytes(32).toString('hex'),
        logIndex: 0,
        receipt: randomBytes(64),
      });
      expect(done).toMatchObject({ state: 'published', attestationId: job.attestationId });
    }
    // Lookups by job id and by record both find them, in either month.
    for (const s of [early[0]!, late[0]!]) {
      const job = jobs.get(s.id)!;
      expect(await t.vault.transparencyJobs.get({ id: job.id })).toMatchObject({
        attestationId: s.id,
        state: 'published',
      });
      expect((await t.vault.transparencyJobs.get({ attestationId: s.id }))?.id).toBe(job.id);
      // The published-job guard fires on the partitioned parent, whatever the partition.
      expect(
        await sqlstate(
          t.admin.query('UPDATE transparency_jobs SET receipt = $2 WHERE id = $1', [job.id, Buffer.alloc(8)]),
        ),
      ).toBe('23001');
      expect(await sqlstate(t.admin.query('DELETE FROM transparency_jobs WHERE id = $1', [job.id]))).toBe(
        '23001',
      );
    }
    expect(await sqlstate(t.admin.query('TRUNCATE transparency_jobs'))).toBe('23001');
    // A job for a record that does not exist is refused (the reference trigger, cloned per partition).
    const ghost = new UuidV7Generator({ now: () => monthStart(1).getTime() + 5000 }).next();
    expect(
      await sqlstate(t.admin.query('INSERT INTO transparency_jobs (attestation_id) VALUES ($1)', [ghost])),
    ).toBe('23503');
  });

  it('claims and settles time-stamp jobs of two months; time-stamps land beside their records', async () => {
    const claimed = await t.vault.timestamps.claim(100, 60_000);
    expect(claimed.map((j) => j.attestationId).sort()).toEqual([...early, ...late].map((s) => s.id).sort());
    for (const job of claimed) {
      expect(
        await t.vault.timestamps.complete(job, {
          genTime: new Date(),
          tsa: 'CN=test',
          serial: randomBytes(8).toString('hex'),
          response: randomBytes(64),
        }),
      ).toBe(true);
    }
    const records = await partitionsOf('(SELECT id AS attestation_id, tableoid FROM attestations) a');
    const stamps = await partitionsOf('attestation_timestamps');
    for (const s of [...early, ...late]) {
      expect(stamps.get(s.id)).toBe(records.get(s.id)!.replace('attestations', 'attestation_timestamps'));
      expect((await t.vault.timestamps.get(s.id))?.tsa).toBe('CN=test');
      expect((await t.vault.timestamps.job(s.id))?.state).toBe('done');
    }
    // Settled jobs and time-stamps never change, in either month.
    for (const s of [early[0]!, late[0]!]) {
      expect(
        await sqlstate(
          t.admin.query("UPDATE timestamp_jobs SET state = 'queued' WHERE attestation_id = $1", [s.id]),
        ),
      ).toBe('23001');
      expect(
        await sqlstate(
          t.admin.query("UPDATE attestation_timestamps SET tsa = 'x' WHERE attestation_id = $1", [s.id]),
        ),
      ).toBe('23001');
    }
    expect(await sqlstate(t.admin.query('DELETE FROM timestamp_jobs'))).toBe('23001');
    expect(await sqlstate(t.admin.query('DELETE FROM attestation_timestamps'))).toBe('23001');
  });

  it('announces new jobs of a future month from the partitioned parents (NOTIFY)', async () => {
    const listener = new pg.Client({ connectionString: t.url });
    await listener.connect();
    try {
      const got: { channel: string; payload: string }[] = [];
      listener.on('notification', (n) => got.push({ channel: n.channel, payload: n.payload ?? '' }));
      for (const ch of [
        'aibom_vault_transparency_due',
        'aibom_vault_transparency',
        'aibom_vault_timestamp_due',
      ])
        await listener.query(`LISTEN ${ch}`);
      const r2 = randomUUID();
      const ids = new UuidV7Generator({ now: () => monthStart(1).getTime() + 10_000 });
      await t.vault.attestations.append([attestation({ runId: r2, namespace: ns })], {
        enqueueTransparency: true,
        enqueueTimestamps: true,
        ids,
      });
      for (let i = 0; i < 100 && got.length < 3; i++) await new Promise((r) => setTimeout(r, 50));
      expect(got.map((n) => n.channel).sort()).toEqual([
        'aibom_vault_timestamp_due',
        'aibom_vault_transparency',
        'aibom_vault_transparency_due',
      ]);
      expect(got.find((n) => n.channel === 'aibom_vault_transparency')?.payload).toBe(r2);
    } finally {
      await listener.end();
    }
  });

  it('pages the audit log in id order across a month boundary', async () => {
    const a = await t.vault.audit.recordAll(
      Array.from({ length: 3 }, (_, i) => ({
        actor: 'tester',
        action: 'export',
        namespace: ns,
        object: `a${i}`,
      })),
    );
    // Rows of next month (only a superuser can choose `at`): the partition created ahead takes them.
    const { rows } = await t.admin.query<{ id: string; part: string }>(
      "INSERT INTO audit_log (at, actor, action, namespace, object) SELECT $1::timestamptz + i * interval '1 second', " +
        "'tester', 'export', $2, 'b' || i FROM generate_series(0, 3) AS i RETURNING id, tableoid::regclass::text AS part",
      [monthStart(1), ns],
    );
    expect(new Set(rows.map((r) => r.part))).toEqual(new Set([`audit_log${nextMonth}`]));
    const c = await t.vault.audit.recordAll(
      Array.from({ length: 3 }, (_, i) => ({
        actor: 'tester',
        action: 'export',
        namespace: ns,
        object: `c${i}`,
      })),
    );
    const all = [...a, ...rows.map((r) => Number(r.id)), ...c];
    expect([...all].sort((x, y) => x - y)).toEqual(all);

    // Pages of 2, by namespace and unfiltered: every row once, in id order, across both partitions.
    for (const namespaces of [[ns], null]) {
      const seen: number[] = [];
      let after = all[0]! - 1;
      for (;;) {
        const page = await t.vault.audit.list({ namespaces, after, limit: 2 });
        if (page.length === 0) break;
        seen.push(...page.map((r) => r.id));
        after = page.at(-1)!.id;
      }
      expect(seen).toEqual(all);
    }
    const later = await t.vault.audit.list({ namespaces: [ns], from: monthStart(1), limit: 100 });
    expect(later.map((r) => r.object)).toEqual(['b0', 'b1', 'b2', 'b3']);
    expect(await sqlstate(t.admin.query('DELETE FROM audit_log WHERE id = $1', [all[0]]))).toBe('23001');
    // A writer still cannot choose an id (GENERATED ALWAYS on the parent).
    expect(
      await sqlstate(t.pool.query("INSERT INTO audit_log (id, actor, action) VALUES (1, 'x', 'y')")),
    ).toBe('428C9');
  });

  it('refuses a statement naming a partition directly, for every role', async () => {
    const s = late[0]!;
    const cases: [string, string][] = [
      [`transparency_jobs${nextMonth}`, `INSERT INTO %s (attestation_id) VALUES ('${s.id}')`],
      [`timestamp_jobs${nextMonth}`, `INSERT INTO %s (attestation_id) VALUES ('${s.id}')`],
      [
        `attestation_timestamps${nextMonth}`,
        `INSERT INTO %s (attestation_id, gen_time, tsa, serial, response) VALUES ('${s.id}', now(), 'x', '1', '\\x${'00'.repeat(16)}')`,
      ],
      [
        `audit_log${nextMonth}`,
        `INSERT INTO %s (at, actor, action) VALUES ('${monthStart(1).toISOString()}', 'x', 'y')`,
      ],
      [
        'transparency_jobs_before',
        "INSERT INTO %s (attestation_id) VALUES ('00000000-0000-7000-8000-000000000000')",
      ],
      [
        'audit_log_before',
        "INSERT INTO %s (at, actor, action) VALUES (now() - interval '10 years', 'x', 'y')",
      ],
      [`transparency_jobs${nextMonth}`, "UPDATE %s SET last_error = 'x'"],
      [`timestamp_jobs${thisMonth}`, 'DELETE FROM %s'],
      [`attestation_timestamps${thisMonth}`, 'TRUNCATE %s'],
      [`audit_log${nextMonth}`, 'DELETE FROM %s'],
    ];
    for (const [part, sql] of cases) {
      const text = sql.replace('%s', part);
      // The owner's superuser: the partition's own guard.
      expect([part, await sqlstate(t.admin.query(text))]).toEqual([part, '23001']);
      // The runtime role: no privilege on any partition.
      expect([part, await sqlstate(t.pool.query(text))]).toEqual([part, '42501']);
    }
    // Reading through the parent is what the runtime role does.
    expect((await t.pool.query('SELECT count(*)::int AS n FROM transparency_jobs')).rows[0]).toEqual({
      n: early.length + late.length + 1,
    });
  });

  it('plans the queues and the audit log to indexes, a record lookup to one partition', async () => {
    const explain = async (sql: string, values: unknown[] = []): Promise<string> => {
      const c = await t.admin.connect();
      try {
        await c.query('BEGIN');
        await c.query('SET LOCAL enable_seqscan = off');
        const { rows } = await c.query<{ 'QUERY PLAN': string }>(`EXPLAIN (COSTS OFF) ${sql}`, values);
        await c.query('ROLLBACK');
        return rows.map((r) => r['QUERY PLAN']).join('\n');
      } finally {
        c.release();
      }
    };
    const id = late[0]!.id;
    const job = (await t.vault.transparencyJobs.get({ attestationId: id }))!;
    const queries: [string, unknown[]][] = [
      // The claim's scans (0020's functions; src/vault/transparency-jobs.ts, timestamps.ts).
      [
        "SELECT j.id, j.attestation_id FROM transparency_jobs j WHERE j.state = 'queued' AND j.next_attempt_at <= now() " +
          'ORDER BY j.next_attempt_at, j.id LIMIT 10 FOR UPDATE SKIP LOCKED',
        [],
      ],
      [
        "SELECT j.attestation_id FROM timestamp_jobs j WHERE j.state = 'queued' AND j.next_attempt_at <= clock_timestamp() " +
          'ORDER BY j.next_attempt_at, j.attestation_id LIMIT 10 FOR UPDATE SKIP LOCKED',
        [],
      ],
      ['SELECT * FROM transparency_jobs WHERE id = $1::uuid', [job.id]],
      ['SELECT * FROM audit_log WHERE namespace = ANY($1::text[]) AND id > 0 ORDER BY id LIMIT 10', [[ns]]],
      ['SELECT * FROM audit_log WHERE id = ANY($1::bigint[])', [[1, 2]]],
    ];
    for (const [sql, values] of queries)
      expect([sql, await explain(sql, values)]).not.toEqual([sql, expect.stringContaining('Seq Scan')]);
    // By record: pruned to the one partition of its month.
    for (const table of ['transparency_jobs', 'timestamp_jobs', 'attestation_timestamps']) {
      const plan = await explain(`SELECT * FROM ${table} WHERE attestation_id = '${id}'`);
      expect(plan).toContain(`${table}${nextMonth}`);
      expect(plan).not.toContain(`${table}${thisMonth}`);
      expect(plan).not.toContain('Seq Scan');
    }
  });
});
