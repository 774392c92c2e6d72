/**
 * Retention with the job tables partitioned like the records (migration 0020, docs/vault.md
 * "Retention"): a month whose SCITT or time-stamp jobs are still queued is not retired (nothing is
 * written, the database refuses the detach on its own too, and a later round resumes); once they
 * are settled, the month's job and time-stamp partitions leave with its records, after the bundle
 * took each record's receipt and time-stamp; with `drop` they are dropped.
 */
import { randomBytes, randomUUID } from 'node:crypto';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { generateDevPki } from '../../../hack/dev-pki.ts';
import { makeCheckpoint } from '../../../src/checkpoint/tree.ts';
import { retainPartitions, type RetentionDeps } from '../../../src/export/archive.ts';
import { signerFromPem, type KeySigner } from '../../../src/signing/index.ts';
import {
  createVaultPool,
  openVault,
  UuidV7Generator,
  type StoredAttestation,
  type Vault,
} from '../../../src/vault/index.ts';
import { retentionDeps } from '../../helpers/retention.ts';
import { tarEntries } from '../../helpers/export.ts';
import { runRecords } from '../../helpers/records.ts';
import { freshDatabaseLogins } from '../../helpers/stack.ts';

const ns = `retj-${randomUUID().slice(0, 8)}`;
const lastMonth = (): number => {
  const now = new Date();
  return Date.UTC(now.getUTCFullYear(), now.getUTCMonth() - 1, 14, 12);
};
const COMPANIONS = ['transparency_jobs_before', 'timestamp_jobs_before', 'attestation_timestamps_before'];

interface Setup {
  vault: Vault;
  admin: pg.Pool;
  deps: RetentionDeps;
  old: StoredAttestation[];
  current: StoredAttestation[];
  close(): Promise<void>;
}

async function setup(signer: KeySigner, label: string): Promise<Setup> {
  const db = await freshDatabaseLogins(label);
  const vault = await openVault(createVaultPool(db.runtime));
  const admin = new pg.Pool({ connectionString: db.superuser, max: 2 });
  admin.on('error', () => undefined);
  const deps = retentionDeps(vault, signer);
  const opts = { enqueueTransparency: true, enqueueTimestamps: true } as const;
  // A fresh vault: last month's ids fall in `attestations_before`, and so do their jobs.
  const ids = new UuidV7Generator({ now: lastMonth });
  const old = [
    ...(await vault.attestations.append(runRecords(signer, ns).records, { ...opts, ids })),
    ...(await vault.attestations.append(runRecords(signer, ns).records, { ...opts, ids })),
  ];
  const current = await vault.attestations.append(runRecords(signer, ns).records, opts);
  return {
    vault,
    admin,
    deps,
    old,
    current,
    close: async () => {
      await vault.close();
      await admin.end();
    },
  };
}

/** Publishes every SCITT job of `records` and time-stamps them (the first one's stamp fails for good). */
async function settle(s: Setup, records: readonly StoredAttestation[]): Promise<Map<string, Buffer>> {
  const receipts = new Map<string, Buffer>();
  const jobs = await s.vault.transparencyJobs.getByAttestation(records.map((r) => r.id));
  const claimed = await s.vault.transparencyJobs.claim(records.length, {
    leaseMs: 60_000,
    jobIds: [...jobs.values()].map((j) => j.id),
    skipBackoff: true,
  });
  expect(claimed).toHaveLength(records.length);
  for (const job of claimed) {
    await s.vault.transparencyJobs.setStatement(job, randomBytes(48));
    const receipt = randomBytes(64);
    receipts.set(job.attestationId, receipt);
    await s.vault.transparencyJobs.complete(job, {
      backend: 'local',
      entryId: randomBytes(32).toString('hex'),
      logIndex: 0,
      receipt,
    });
  }
  // Only this month's jobs would be claimed too: give records' jobs a head start by due time.
  await s.admin.query(
    "UPDATE timestamp_jobs SET next_attempt_at = now() - interval '1 hour' WHERE attestation_id = ANY($1::uuid[])",
    [records.map((r) => r.id)],
  );
  const stamps = await s.vault.timestamps.claim(records.length, 60_000);
  expect(stamps.map((j) => j.attestationId).sort()).toEqual(records.map((r) => r.id).sort());
  for (const [i, j] of stamps.entries()) {
    if (i === 0) await s.vault.timestamps.fail(j, { final: true, error: 'certificate expired', delayMs: 0 });
    else
      await s.vault.timestamps.complete(j, {
        genTime: new Date(),
        tsa: 'CN=tsa',
        serial: randomBytes(8).toString('hex'),
        response: randomBytes(64),
      });
  }
  return receipts;
}

/** The error a promise rejects with (the test fails when it resolves). */
async function failure(p: Promise<unknown>): Promise<{ code?: string; message: string }> {
  try {
    await p;
  } catch (err) {
    return err as { code?: string; message: string };
  }
  throw new Error('expected a rejection');
}

const states = async (admin: pg.Pool): Promise<Record<string, unknown>> =>
  Object.fromEntries(
    (
      await admin.query<{ name: string; state: string; archive_key: string | null; records: string | null }>(
        `SELECT name, state, archive_key, records FROM vault_partitions WHERE name = ANY($1::text[])`,
        [['attestations_before', ...COMPANIONS]],
      )
    ).rows.map((r) => [r.name, { state: r.state, key: r.archive_key, records: r.records }]),
  );

describe('retention of the job and time-stamp partitions', () => {
  let signer: KeySigner;
  beforeAll(async () => {
    signer = signerFromPem(await generateDevPki());
  });

  describe('archive and detach', () => {
    let s: Setup;
    const prefix = `test-archive/${randomUUID()}/`;
    beforeAll(async () => {
      s = await setup(signer, 'retjobs');
    }, 120_000);
    afterAll(async () => {
      await s?.close();
    });

    it('waits while jobs of the month are queued, writing nothing', async () => {
      await makeCheckpoint(s.vault.checkpoints, { signer, caCertificates: signer.caCertificates });
      const err = await failure(retainPartitions(s.deps, { months: 0, prefix }));
      expect(err.code).toBe('ARCHIVE_JOBS_QUEUED');
      expect(err.message).toContain(`${s.old.length} SCITT and ${s.old.length} time-stamp jobs`);
      expect(await s.deps.blobs.stat(`${prefix}attestations_before/part-00000.tar`)).toBeNull();
      expect(await states(s.admin)).toMatchObject({ attestations_before: { state: 'attached' } });
    });

    it('retires the month with its jobs and time-stamps once they are settled; the bundle holds them', async () => {
      const receipts = await settle(s, s.old);
      const done = await retainPartitions(s.deps, { months: 0, prefix, partSize: 1000 });
      expect(done.map((d) => [d.name, d.records, d.state])).toEqual([
        ['attestations_before', s.old.length, 'detached'],
      ]);
      const key = done[0]!.key;
      const after = await states(s.admin);
      expect(after).toEqual({
        attestations_before: { state: 'detached', key, records: String(s.old.length) },
        transparency_jobs_before: { state: 'detached', key, records: String(s.old.length) },
        timestamp_jobs_before: { state: 'detached', key, records: String(s.old.length) },
        attestation_timestamps_before: { state: 'detached', key, records: String(s.old.length - 1) },
      });
      // Out of the parents, kept as tables (detached, not dropped).
      for (const [table, n] of [
        ['transparency_jobs', s.current.length],
        ['timestamp_jobs', s.current.length],
        ['attestation_timestamps', 0],
      ] as const) {
        const parent = await s.admin.query<{ n: number }>(`SELECT count(*)::int AS n FROM ${table}`);
        expect([table, parent.rows[0]!.n]).toEqual([table, n]);
        const kept = await s.admin.query<{ n: number }>(`SELECT count(*)::int AS n FROM ${table}_before`);
        const keptRows = table === 'attestation_timestamps' ? s.old.length - 1 : s.old.length;
        expect([table, kept.rows[0]!.n]).toEqual([table, keptRows]);
      }
      // This month's jobs still work.
      expect((await s.vault.transparencyJobs.getByAttestation(s.current.map((r) => r.id))).size).toBe(
        s.current.length,
      );

      // The bundle carries each retired record's SCITT receipt and its time-stamp where one was taken.
      const index = JSON.parse((await s.deps.blobs.get(key))!.toString()) as { parts: { key: string }[] };
      const entries = new Map<string, Buffer>();
      for (const part of index.parts)
        for (const e of await tarEntries((await s.deps.blobs.get(part.key))!)) entries.set(e.path, e.content);
      let stamped = 0;
      for (const r of s.old) {
        expect(entries.get(`attestations/${r.id}/receipt.cose`)?.equals(receipts.get(r.id)!)).toBe(true);
        const sigstore = JSON.parse(entries.get(`attestations/${r.id}/sigstore.json`)!.toString()) as {
          verificationMaterial: { timestampVerificationData?: { rfc3161Timestamps: unknown[] } };
        };
        stamped += sigstore.verificationMaterial.timestampVerificationData?.rfc3161Timestamps.length ?? 0;
      }
      expect(stamped).toBe(s.old.length - 1);
    });
  });

  describe('the database refuses on its own, and a later round resumes; drop', () => {
    let s: Setup;
    const prefix = `test-archive/${randomUUID()}/`;
    beforeAll(async () => {
      s = await setup(signer, 'retjobs2');
    }, 120_000);
    afterAll(async () => {
      await s?.close();
    });

    it('refuses to detach a month with queued jobs, then drops it with its companions once settled', async () => {
      await makeCheckpoint(s.vault.checkpoints, { signer, caCertificates: signer.caCertificates });
      // A caller that skips the check (or a job enqueued between the check and the detach).
      await s.vault.partitions.archived('attestations_before', {
        records: s.old.length,
        firstSeq: 1,
        lastSeq: s.old.length,
        key: `${prefix}manual`,
        digest: `sha256:${'0'.repeat(64)}`,
      });
      const err = await failure(s.vault.partitions.detach('attestations_before', true));
      expect(err.code).toBe('23001');
      expect(err.message).toMatch(/^(transparency|timestamp)_jobs_before still has queued jobs/);
      expect(await states(s.admin)).toMatchObject({
        attestations_before: { state: 'archived' },
        transparency_jobs_before: { state: 'attached' },
      });
      // The retention round does not archive it again: it resumes the detach, and waits meanwhile.
      await expect(retainPartitions(s.deps, { months: 0, prefix, drop: true })).rejects.toMatchObject({
        code: 'ARCHIVE_JOBS_QUEUED',
      });
      await settle(s, s.old);
      const done = await retainPartitions(s.deps, { months: 0, prefix, drop: true });
      expect(done.map((d) => [d.name, d.key, d.state])).toEqual([
        ['attestations_before', `${prefix}manual`, 'dropped'],
      ]);
      expect(await s.deps.blobs.stat(`${prefix}attestations_before/part-00000.tar`)).toBeNull();
      const after = await states(s.admin);
      for (const name of ['attestations_before', ...COMPANIONS])
        expect([name, after[name]]).toMatchObject([name, { state: 'dropped', key: `${prefix}manual` }]);
      const left = await s.admin.query<{ n: number }>(
        'SELECT count(*)::int AS n FROM pg_class WHERE relname = ANY($1::text[])',
        [['attestations_before', ...COMPANIONS]],
      );
      expect(left.rows[0]!.n).toBe(0);
    });
  });
});
