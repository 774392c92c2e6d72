/**
 * The vault partitioned by month on its UUIDv7 ids (migration 0019, docs/vault.md "Partitions"):
 * records whose ids fall in two months live in two partitions, and every read (GET, keyset pages
 * with and without filters, the hash-chain walk, checkpoints with inclusion and consistency proofs)
 * works across the boundary. Direct writes to a partition are refused for every role, and the
 * digest stays unique across partitions without a unique constraint.
 */
import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { generateDevPki } from '../../../hack/dev-pki.ts';
import {
  inclusionProof,
  consistencyProof,
  leafFieldsOf,
  makeCheckpoint,
} from '../../../src/checkpoint/tree.ts';
import { recordLeafHash } from '../../../src/checkpoint/leaf.ts';
import { signerFromPem } from '../../../src/signing/index.ts';
import {
  listPartitions,
  UuidV7Generator,
  type AttestationFilter,
  type StoredAttestation,
} from '../../../src/vault/index.ts';
import { attestation, digestOf, setupVault, sqlstate, type TestVault } from './helpers.ts';
import { verifyConsistency, verifyInclusion } from '../../../src/transparency/merkle.ts';

/** The start of the UTC month after the current one. */
function nextMonthStart(now = new Date()): Date {
  return new Date(Date.UTC(now.getUTCFullYear(), now.getUTCMonth() + 1, 1));
}

describe('vault partitions', () => {
  let t: TestVault;
  const run = randomUUID();
  let early: StoredAttestation[];
  let late: StoredAttestation[];

  beforeAll(async () => {
    t = await setupVault('partitions');
    early = await t.vault.attestations.append(
      Array.from({ length: 23 }, (_, i) =>
        attestation({ runId: i % 2 === 0 ? run : randomUUID(), namespace: 'team-a' }),
      ),
    );
    // Ids in the first second of next month: the partition created ahead takes them.
    const ids = new UuidV7Generator({ now: () => nextMonthStart().getTime() + 1000 });
    late = await t.vault.attestations.append(
      Array.from({ length: 19 }, (_, i) =>
        attestation({ runId: i % 2 === 0 ? run : randomUUID(), namespace: 'team-a' }),
      ),
      { ids },
    );
  }, 60_000);

  afterAll(async () => {
    await t?.close();
  });

  it('creates the months ahead and puts each record in the partition of its id month', async () => {
    const parts = await listPartitions(t.pool);
    expect(parts[0]!.name).toBe('attestations_before');
    expect(parts[0]!.lo).toBeNull();
    const monthly = parts.slice(1);
    // This month and three ahead, contiguous.
    expect(monthly.length).toBeGreaterThanOrEqual(4);
    for (const [i, p] of monthly.entries()) {
      const prev = parts[i]!;
      expect(p.lo).toBe(prev.hi);
      expect(p.state).toBe('attached');
    }
    const { rows } = await t.admin.query<{ part: string; n: string }>(
      'SELECT tableoid::regclass::text AS part, count(*) AS n FROM attestations GROUP BY 1 ORDER BY 1',
    );
    const now = new Date();
    const thisMonth = `attestations_p${now.getUTCFullYear()}${String(now.getUTCMonth() + 1).padStart(2, '0')}`;
    const next = nextMonthStart();
    const nextMonth = `attestations_p${next.getUTCFullYear()}${String(next.getUTCMonth() + 1).padStart(2, '0')}`;
    expect(rows).toEqual([
      { part: thisMonth, n: String(early.length) },
      { part: nextMonth, n: String(late.length) },
    ]);
  });

  it('GETs every record and pages across the boundary in id order', async () => {
    const all = [...early, ...late];
    for (const s of all) {
      const got = await t.vault.attestations.get(s.id);
      expect(got?.digest).toBe(s.digest);
      expect(got?.seq).toBe(s.seq);
    }
    const ids = all.map((s) => s.id);
    expect([...ids].sort()).toEqual(ids);

    const pages = async (filter: AttestationFilter, limit: number): Promise<string[][]> => {
      const out: string[][] = [];
      let cursor: string | null = null;
      do {
        const page = await t.vault.attestations.query(filter, { limit, cursor });
        out.push(page.items.map((s) => s.id));
        cursor = page.nextCursor;
      } while (cursor !== null);
      return out;
    };
    const plain = await pages({ namespaces: ['team-a'] }, 7);
    expect(plain.flat()).toEqual(ids);
    // One page holds records of both months.
    expect(plain.some((p) => p.includes(early.at(-1)!.id) && p.includes(late[0]!.id))).toBe(true);

    const ofRun = all.filter((s) => s.runId === run).map((s) => s.id);
    expect((await pages({ namespaces: ['team-a'], runId: run }, 4)).flat()).toEqual(ofRun);
    const subject = late[3]!.subjects[0]!;
    expect((await pages({ namespaces: ['team-a'], subject }, 4)).flat()).toEqual([late[3]!.id]);
    // A time window over both batches (created_at is the database clock): every record.
    const window = await pages(
      { namespaces: ['team-a'], from: early[0]!.createdAt, to: new Date(late[0]!.createdAt.getTime() + 1) },
      10,
    );
    expect(window.flat()).toEqual(ids);
    expect((await t.vault.attestations.ofRun('team-a', run)).map((s) => s.id)).toEqual(ofRun);
  });

  it('walks the hash chain across the boundary and proves every record in a checkpoint', async () => {
    const report = await t.vault.attestations.verifyChain({ digestOf });
    expect(report).toEqual({ ok: true, checked: early.length + late.length, headSeq: late.at(-1)!.seq });

    const pki = await generateDevPki();
    const signer = signerFromPem(pki);
    const first = await makeCheckpoint(t.vault.checkpoints, {
      signer,
      caCertificates: signer.caCertificates,
    });
    expect(first.checkpoint?.treeSize).toBe(early.length + late.length);
    const more = await t.vault.attestations.append([attestation({ namespace: 'team-a' })]);
    const second = await makeCheckpoint(t.vault.checkpoints, {
      signer,
      caCertificates: signer.caCertificates,
    });
    const n = second.checkpoint!.treeSize;
    expect(n).toBe(more[0]!.seq);
    // Inclusion of the last record of one month and the first of the next, against the signed root.
    for (const s of [early.at(-1)!, late[0]!]) {
      const leaf = recordLeafHash(leafFieldsOf(s));
      const proof = await inclusionProof(t.vault.checkpoints, s.seq, n);
      expect(verifyInclusion(leaf, s.seq - 1, n, proof, second.checkpoint!.rootHash)).toBe(true);
    }
    const proof = await consistencyProof(t.vault.checkpoints, first.checkpoint!.treeSize, n);
    expect(
      verifyConsistency(
        first.checkpoint!.treeSize,
        n,
        first.checkpoint!.rootHash,
        second.checkpoint!.rootHash,
        proof,
      ),
    ).toBe(true);
  });

  it('refuses writes that name a partition, for every role', async () => {
    const part = (
      await t.admin.query<{ p: string }>(
        'SELECT tableoid::regclass::text AS p FROM attestations WHERE id = $1',
        [late[0]!.id],
      )
    ).rows[0]!.p;
    // The superuser plays the attacker: a row planted in a partition would skip the chain trigger.
    expect(
      await sqlstate(
        t.admin.query(`INSERT INTO ${part} SELECT * FROM attestations WHERE id = $1`, [late[0]!.id]),
      ),
    ).toBe('23001');
    expect(await sqlstate(t.admin.query(`UPDATE ${part} SET namespace = 'x'`))).toBe('23001');
    expect(await sqlstate(t.admin.query(`DELETE FROM ${part}`))).toBe('23001');
    expect(await sqlstate(t.admin.query(`TRUNCATE ${part}`))).toBe('23001');
    expect(await sqlstate(t.admin.query('TRUNCATE attestations'))).toBe('23001');
    expect(await sqlstate(t.admin.query('DELETE FROM attestations'))).toBe('23001');
    // The runtime role holds no privilege on a partition at all.
    expect(await sqlstate(t.pool.query(`SELECT 1 FROM ${part}`))).toBe('42501');
    const { rows } = await t.admin.query<{ n: string }>('SELECT count(*) AS n FROM attestations');
    expect(Number(rows[0]!.n)).toBe(early.length + late.length + 1);
  });

  it('keeps digests unique across partitions without a unique constraint', async () => {
    // A retry of an early record returns the stored one.
    const again = await t.vault.attestations.append([{ ...attestationOf(early[3]!) }]);
    expect(again[0]!.id).toBe(early[3]!.id);
    // A row that continues the chain correctly but repeats a digest of the other month: 23505.
    const head = (await t.admin.query<{ last_seq: string; last_digest: string }>('SELECT * FROM vault_head'))
      .rows[0]!;
    const id = new UuidV7Generator({ now: () => nextMonthStart().getTime() + 60_000 }).next();
    const err = await t.admin
      .query(
        `INSERT INTO attestations (id, seq, namespace, kind, subjects, predicate_type, envelope, digest, prev_digest, signature)
         SELECT $1::uuid, $2::bigint + 1, namespace, kind, subjects, predicate_type, envelope, digest, $3, signature
         FROM attestations WHERE id = $4`,
        [id, head.last_seq, head.last_digest, early[0]!.id],
      )
      .catch((e: unknown) => e as { code?: string; constraint?: string });
    expect(err).toMatchObject({ code: '23505', constraint: 'attestations_digest_key' });
    const after = (await t.admin.query<{ last_seq: string }>('SELECT last_seq FROM vault_head')).rows[0]!;
    expect(after.last_seq).toBe(head.last_seq);
  });
});

function attestationOf(s: StoredAttestation) {
  return {
    namespace: s.namespace,
    runId: s.runId,
    stepId: s.stepId,
    kind: s.kind,
    subjects: s.subjects,
    artifactDigests: s.artifactDigests,
    predicateType: s.predicateType,
    policyPack: s.policyPack,
    policyVersion: s.policyVersion,
    capabilityTokenIds: s.capabilityTokenIds,
    envelope: s.envelope,
    digest: s.digest,
    signature: s.signature,
  };
}
