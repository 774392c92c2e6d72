/**
 * Retention of the vault's monthly partitions (src/export/archive.ts, migration 0019): a past
 * month is written to the real object store as signed export bundles and detached. The bundle
 * verifies offline with `service-ctl verify` and holds exactly the partition's records; the
 * partition's table is kept (detached, not dropped); the records leave every read; and the signed
 * checkpoints keep counting them: a later checkpoint is consistent with the one made before, and an
 * archived record's inclusion proof still verifies against the new root.
 */
import { createHash, randomUUID, X509Certificate } from 'node:crypto';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { generateDevPki, type DevPki } from '../../../hack/dev-pki.ts';
import { recordLeafHash } from '../../../src/checkpoint/leaf.ts';
import {
  consistencyProof,
  inclusionProof,
  leafFieldsOf,
  makeCheckpoint,
} from '../../../src/checkpoint/tree.ts';
import { archivePartition, retainPartitions, type RetentionDeps } from '../../../src/export/archive.ts';
import { signerFromPem, type KeySigner } from '../../../src/signing/index.ts';
import { verifyConsistency, verifyInclusion } from '../../../src/transparency/merkle.ts';
import {
  createVaultPool,
  openVault,
  UuidV7Generator,
  type StoredAttestation,
  type StoredCheckpoint,
  type Vault,
} from '../../../src/vault/index.ts';
import { retentionDeps } from '../../helpers/retention.ts';
import { cliMain } from '../../helpers/cli-main.ts';
import { tarEntries } from '../../helpers/export.ts';
import { runRecords } from '../../helpers/records.ts';
import { stackApp } from '../../helpers/app.ts';
import { freshDatabase, stack } from '../../helpers/stack.ts';
import { digestOf } from '../vault/helpers.ts';

const ns = `ret-${randomUUID().slice(0, 8)}`;
const prefix = `test-archive/${randomUUID()}/`;
/** Mid-month, one month back: ids of the partition the test archives. */
const lastMonth = (): number => {
  const now = new Date();
  return Date.UTC(now.getUTCFullYear(), now.getUTCMonth() - 1, 14, 12);
};

describe('vault retention', () => {
  let vault: Vault;
  let pki: DevPki;
  let signer: KeySigner;
  let deps: RetentionDeps;
  let dir: string;
  let old: StoredAttestation[];
  let current: StoredAttestation[];
  let before: StoredCheckpoint;

  beforeAll(async () => {
    vault = await openVault(createVaultPool(await freshDatabase('retention')));
    pki = await generateDevPki();
    signer = signerFromPem(pki);
    dir = await mkdtemp(join(tmpdir(), 'retention-'));
    deps = retentionDeps(vault, signer);
    // A fresh vault: last month's ids fall in `attestations_before` (everything below this month).
    const ids = new UuidV7Generator({ now: lastMonth });
    old = [];
    for (let i = 0; i < 4; i++)
      old.push(...(await vault.attestations.append(runRecords(signer, ns).records, { ids })));
    current = [];
    for (let i = 0; i < 2; i++)
      current.push(...(await vault.attestations.append(runRecords(signer, ns).records)));
  }, 120_000);

  afterAll(async () => {
    await vault?.close();
    if (dir !== undefined) await rm(dir, { recursive: true, force: true });
  });

  it('refuses to archive records no signed checkpoint covers, and writes nothing', async () => {
    const [p] = await vault.partitions.list();
    expect(p!.name).toBe('attestations_before');
    await expect(archivePartition(deps, p!, { prefix })).rejects.toMatchObject({
      code: 'ARCHIVE_NOT_CHECKPOINTED',
    });
    expect(await deps.blobs.stat(`${prefix}attestations_before/part-00000.tar`)).toBeNull();
    // The database refuses it on its own too (a caller that skips the check).
    await expect(
      vault.partitions.archived('attestations_before', {
        records: old.length,
        firstSeq: 1,
        lastSeq: old.length,
        key: 'x',
        digest: `sha256:${'0'.repeat(64)}`,
      }),
    ).rejects.toMatchObject({ code: '23001' });
    // And never detaches a partition that was not archived.
    await expect(vault.partitions.detach('attestations_before', false)).rejects.toMatchObject({
      code: '23001',
    });
  });

  it('archives the past month as verifiable bundles and detaches it', async () => {
    before = (await makeCheckpoint(vault.checkpoints, { signer, caCertificates: signer.caCertificates }))
      .checkpoint!;
    expect(before.treeSize).toBe(old.length + current.length);
    // Parts of 5 records: the 12 records of last month make three bundles.
    const done = await retainPartitions(deps, { months: 0, prefix, partSize: 5 });
    expect(done.map((d) => [d.name, d.records, d.state])).toEqual([
      ['attestations_before', old.length, 'detached'],
    ]);
    const archived = done[0]!;
    expect(archived.parts.map((x) => x.records)).toEqual([5, 5, 2]);

    const index = await deps.blobs.get(archived.key);
    expect(index).not.toBeNull();
    const parsed = JSON.parse(index!.toString()) as {
      records: number;
      parts: { key: string; digest: string }[];
    };
    expect(parsed.records).toBe(old.length);
    const parts = await vault.partitions.list();
    expect(parts[0]).toMatchObject({
      name: 'attestations_before',
      state: 'detached',
      records: old.length,
      firstSeq: 1,
      lastSeq: old.length,
      archiveKey: archived.key,
      archiveDigest: archived.digest,
    });
    // The current month is not due.
    expect(parts.slice(1).every((x) => x.state === 'attached')).toBe(true);

    await writeFile(join(dir, 'ca.pem'), pki['ca.crt']);
    const inBundles: string[] = [];
    for (const [i, part] of parsed.parts.entries()) {
      const bytes = (await deps.blobs.get(part.key))!;
      expect(`sha256:${createHash('sha256').update(bytes).digest('hex')}`).toBe(part.digest);
      const file = join(dir, `part-${i}.tar`);
      await writeFile(file, bytes);
      const res = await cliMain('verify', file, '--trust-anchor', join(dir, 'ca.pem'));
      expect(res.stdout + res.stderr).toContain('bundle verified');
      expect(res.code).toBe(0);
      for (const e of await tarEntries(bytes)) {
        const m = /^attestations\/([0-9a-f-]{36})\/envelope\.json$/.exec(e.path);
        if (m !== null) inBundles.push(m[1]!);
      }
    }
    expect(inBundles.sort()).toEqual(old.map((s) => s.id).sort());

    // A byte changed in a bundle: verify refuses it.
    const tampered = Buffer.from((await deps.blobs.get(parsed.parts[0]!.key))!);
    const at = tampered.indexOf(Buffer.from('"payload"'));
    tampered[at + 20] = tampered[at + 20] === 0x41 ? 0x42 : 0x41;
    await writeFile(join(dir, 'bad.tar'), tampered);
    const bad = await cliMain('verify', join(dir, 'bad.tar'), '--trust-anchor', join(dir, 'ca.pem'));
    expect(bad.code).not.toBe(0);
  });

  it('GET of a retired id answers 404 saying where its month went, in the same words for an id that never existed', async () => {
    const app = await stackApp(vault, [new X509Certificate(pki['ca.crt'])]);
    try {
      const get = async (id: string) => {
        const res = await app.inject({
          method: 'GET',
          url: `/v1/attestations/${id}`,
          headers: { authorization: `Bearer ${stack().kube.tokens.admin}` },
        });
        return { status: res.statusCode, body: res.json<{ code: string; detail: string }>() };
      };
      const retired = await get(old[0]!.id);
      expect(retired.status).toBe(404);
      expect(retired.body.code).toBe('NOT_FOUND');
      expect(retired.body.detail).toMatch(/^attestation not found: records created before \S+ were retired/);
      expect(retired.body.detail).toContain('VAULT_RETENTION_MONTHS');
      // An id of the same month that never was a record: the very same answer (no existence leak).
      const never = new UuidV7Generator({ now: lastMonth }).next();
      expect(await get(never)).toEqual(retired);
      // An unknown id of a live month: the plain 404.
      const live = await get(new UuidV7Generator().next());
      expect(live).toMatchObject({
        status: 404,
        body: { code: 'NOT_FOUND', detail: 'attestation not found' },
      });
      // A live record is served as before.
      expect((await get(current[0]!.id)).status).toBe(200);
    } finally {
      await app.close();
    }
  });

  it('takes the records out of every read, keeps the table, and the checkpoints still count them', async () => {
    expect(await vault.attestations.get(old[0]!.id)).toBeNull();
    expect((await vault.attestations.get(current[0]!.id))?.digest).toBe(current[0]!.digest);
    const page = await vault.attestations.query({ namespaces: [ns] }, { limit: 100 });
    expect(page.items.map((s) => s.id)).toEqual(current.map((s) => s.id));
    // The chain walk resumes after the archived prefix.
    expect(await vault.attestations.verifyChain({ digestOf })).toEqual({
      ok: true,
      checked: current.length,
      headSeq: current.at(-1)!.seq,
    });

    const more = await vault.attestations.append(runRecords(signer, ns).records);
    const after = (await makeCheckpoint(vault.checkpoints, { signer, caCertificates: signer.caCertificates }))
      .checkpoint!;
    expect(after.treeSize).toBe(more.at(-1)!.seq);
    const proof = await consistencyProof(vault.checkpoints, before.treeSize, after.treeSize);
    expect(verifyConsistency(before.treeSize, after.treeSize, before.rootHash, after.rootHash, proof)).toBe(
      true,
    );
    for (const s of [old[0]!, old.at(-1)!]) {
      const path = await inclusionProof(vault.checkpoints, s.seq, after.treeSize);
      expect(
        verifyInclusion(recordLeafHash(leafFieldsOf(s)), s.seq - 1, after.treeSize, path, after.rootHash),
      ).toBe(true);
    }
  });
});
