/**
 * Migration 0019 on a vault that already holds records: the table becomes the first partition
 * without a row moving or changing, the chain and the signed checkpoints made before still verify,
 * and records appended afterwards land in the monthly partitions and page together with the old.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { generateDevPki } from '../../../hack/dev-pki.ts';
import { recordLeafHash } from '../../../src/checkpoint/leaf.ts';
import {
  consistencyProof,
  inclusionProof,
  leafFieldsOf,
  makeCheckpoint,
} from '../../../src/checkpoint/tree.ts';
import { signerFromPem, type KeySigner } from '../../../src/signing/index.ts';
import { verifyConsistency, verifyInclusion } from '../../../src/transparency/merkle.ts';
import {
  createVaultPool,
  listPartitions,
  loadMigrations,
  migrate,
  openVault,
  UuidV7Generator,
  type StoredAttestation,
  type StoredCheckpoint,
  type Vault,
} from '../../../src/vault/index.ts';
import { attestation, digestOf, freshDatabase, type FreshDatabase } from './helpers.ts';
import pg from 'pg';

const monthStart = (offset: number, now = new Date()): Date =>
  new Date(Date.UTC(now.getUTCFullYear(), now.getUTCMonth() + offset, 1));
const partName = (d: Date): string =>
  `attestations_p${d.getUTCFullYear()}${String(d.getUTCMonth() + 1).padStart(2, '0')}`;

describe('migration 0019 on a vault with records', () => {
  let db: FreshDatabase;
  let admin: pg.Pool;
  let vault: Vault;
  let signer: KeySigner;
  let before: StoredAttestation[];
  let snapshot: unknown[];
  let headBefore: unknown;
  let checkpointBefore: StoredCheckpoint;

  const dump = async (): Promise<unknown[]> =>
    (await admin.query<Record<string, unknown>>('SELECT * FROM attestations ORDER BY seq')).rows;

  beforeAll(async () => {
    db = await freshDatabase('partmig');
    admin = new pg.Pool({ connectionString: db.superuser, max: 2 });
    admin.on('error', () => undefined);
    const all = await loadMigrations();
    const old = all.filter((m) => m.version < 19);
    expect(old.length).toBe(all.length - all.filter((m) => m.version >= 19).length);
    await migrate(db.url, { migrations: old });
    signer = signerFromPem(await generateDevPki());

    const v = await openVault(createVaultPool(db.runtime));
    before = await v.attestations.append(Array.from({ length: 31 }, () => attestation({ namespace: 'mig' })));
    // Records whose ids are in next month: the old table holds them too.
    const ids = new UuidV7Generator({ now: () => monthStart(1).getTime() + 500 });
    before.push(
      ...(await v.attestations.append(
        Array.from({ length: 17 }, () => attestation({ namespace: 'mig' })),
        { ids },
      )),
    );
    checkpointBefore = (
      await makeCheckpoint(v.checkpoints, { signer, caCertificates: signer.caCertificates })
    ).checkpoint!;
    await v.close();
    snapshot = await dump();
    headBefore = (await admin.query('SELECT * FROM vault_head')).rows;
    expect(snapshot).toHaveLength(48);

    await migrate(db.url);
    vault = await openVault(createVaultPool(db.runtime));
  }, 120_000);

  afterAll(async () => {
    await vault?.close();
    await admin?.end();
    await db?.drop();
  });

  it('keeps every row as it was, in the first partition, and the head', async () => {
    expect(await dump()).toEqual(snapshot);
    expect((await admin.query('SELECT * FROM vault_head')).rows).toEqual(headBefore);
    const { rows } = await admin.query<{ part: string; n: string }>(
      'SELECT tableoid::regclass::text AS part, count(*) AS n FROM attestations GROUP BY 1',
    );
    expect(rows).toEqual([{ part: 'attestations_before', n: '48' }]);
    const parts = await listPartitions(admin);
    expect(parts[0]).toMatchObject({ name: 'attestations_before', lo: null, state: 'attached' });
    // It reaches to the end of the month of its newest record (next month), and monthly ones follow.
    expect(parts[0]!.to.toISOString()).toBe(monthStart(2).toISOString());
    expect(parts[1]).toMatchObject({ name: partName(monthStart(2)), lo: parts[0]!.hi });
    const kind = await admin.query<{ relkind: string }>(
      `SELECT relkind FROM pg_class WHERE oid = 'attestations'::regclass`,
    );
    expect(kind.rows[0]!.relkind).toBe('p');
  });

  it('verifies the chain and the old checkpoint, then extends both into a new partition', async () => {
    expect(await vault.attestations.verifyChain({ digestOf })).toMatchObject({ ok: true, checked: 48 });
    const ids = new UuidV7Generator({ now: () => monthStart(2).getTime() + 500 });
    const after = await vault.attestations.append(
      Array.from({ length: 9 }, () => attestation({ namespace: 'mig' })),
      { ids },
    );
    const where = await admin.query<{ part: string }>(
      'SELECT DISTINCT tableoid::regclass::text AS part FROM attestations WHERE id = ANY($1::uuid[])',
      [after.map((s) => s.id)],
    );
    expect(where.rows).toEqual([{ part: partName(monthStart(2)) }]);
    expect(await vault.attestations.verifyChain({ digestOf })).toMatchObject({ ok: true, checked: 57 });

    const now = (await makeCheckpoint(vault.checkpoints, { signer, caCertificates: signer.caCertificates }))
      .checkpoint!;
    expect(now.treeSize).toBe(57);
    const proof = await consistencyProof(vault.checkpoints, checkpointBefore.treeSize, now.treeSize);
    expect(verifyConsistency(48, 57, checkpointBefore.rootHash, now.rootHash, proof)).toBe(true);
    for (const s of [before[0]!, before.at(-1)!, after[0]!]) {
      const path = await inclusionProof(vault.checkpoints, s.seq, 57);
      expect(verifyInclusion(recordLeafHash(leafFieldsOf(s)), s.seq - 1, 57, path, now.rootHash)).toBe(true);
    }

    // Pages of 10 cross from the old table into the new partition in id order.
    const seen: string[] = [];
    let cursor: string | null = null;
    do {
      const page = await vault.attestations.query({ namespaces: ['mig'] }, { limit: 10, cursor });
      seen.push(...page.items.map((s) => s.id));
      cursor = page.nextCursor;
    } while (cursor !== null);
    expect(seen).toEqual([...before, ...after].map((s) => s.id));
    // A retried old record is found across the partitions, not stored again.
    const again = await vault.attestations.append([
      { ...attestation({ namespace: 'mig' }), envelope: before[5]!.envelope, digest: before[5]!.digest },
    ]);
    expect(again[0]!.id).toBe(before[5]!.id);
  });
});
