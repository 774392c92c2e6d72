import { randomBytes, randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  connectVault,
  createVaultPool,
  CursorCodec,
  openVault,
  VaultError,
  type AttestationFilter,
  type Page,
  type StoredAttestation,
} from '../../../src/vault/index.ts';
import { attestation, setupVault, sleep, type TestVault } from './helpers.ts';

const NAMESPACES = ['team-a', 'team-b', 'team-c'];
const RUNS = [randomUUID(), randomUUID(), randomUUID(), randomUUID()];
const DIGEST_1 = `sha256:${'1'.repeat(64)}`;
const DIGEST_2 = `sha256:${'2'.repeat(64)}`;

/** The specification of the filter semantics, applied to what append returned. */
function matches(s: StoredAttestation, f: AttestationFilter): boolean {
  return (
    f.namespaces.includes(s.namespace) &&
    (f.subject === undefined || s.subjects.includes(f.subject)) &&
    (f.runId === undefined || s.runId === f.runId) &&
    (f.stepId === undefined || s.stepId === f.stepId) &&
    (f.artifactDigest === undefined || s.artifactDigests.includes(f.artifactDigest)) &&
    (f.policyPack === undefined || s.policyPack === f.policyPack) &&
    (f.policyVersion === undefined || s.policyVersion === f.policyVersion) &&
    (f.capabilityTokenId === undefined || s.capabilityTokenIds.includes(f.capabilityTokenId)) &&
    (f.kind === undefined || s.kind === f.kind) &&
    (f.from === undefined || s.createdAt.getTime() >= f.from.getTime()) &&
    (f.to === undefined || s.createdAt.getTime() < f.to.getTime())
  );
}

describe('vault queries', () => {
  let t: TestVault;
  let stored: StoredAttestation[];

  /** Every page of a query, following cursors. */
  async function all(
    filter: AttestationFilter,
    limit: number,
  ): Promise<{ items: StoredAttestation[]; pages: number }> {
    const items: StoredAttestation[] = [];
    let cursor: string | null = null;
    let pages = 0;
    do {
      const page = await t.vault.attestations.query(filter, { limit, cursor });
      pages += 1;
      expect(page.items.length).toBeLessThanOrEqual(limit);
      items.push(...page.items);
      cursor = page.nextCursor;
    } while (cursor !== null);
    return { items, pages };
  }

  beforeAll(async () => {
    t = await setupVault('query');
    stored = [];
    // Six batches a few milliseconds apart: six distinct created_at values for the time window.
    for (let b = 0; b < 6; b++) {
      const batch = Array.from({ length: 10 }, (_, k) => {
        const i = b * 10 + k;
        const runId = RUNS[i % 4]!;
        const stepId = i % 5 === 0 ? null : `s${i % 3}`;
        const pack = i % 2 === 1 ? 'baseline' : i % 3 === 0 ? 'strict' : null;
        return attestation({
          namespace: NAMESPACES[i % 3]!,
          runId,
          stepId,
          kind: stepId === null ? 'run' : i % 4 === 1 ? 'artifact' : 'step',
          subjects: stepId === null ? [`run:${runId}`] : [`run:${runId}`, `step:${runId}:${stepId}`],
          artifactDigests: i % 4 === 0 ? [DIGEST_1] : i % 7 === 0 ? [DIGEST_1, DIGEST_2] : [],
          policyPack: pack,
          policyVersion: pack === null ? null : i % 4 < 2 ? '1.0.0' : '2.0.0',
          capabilityTokenIds: i % 6 === 0 ? ['tok-1'] : i % 5 === 1 ? ['tok-1', 'tok-2'] : [],
        });
      });
      stored.push(...(await t.vault.attestations.append(batch)));
      await sleep(5);
    }
  });
  afterAll(async () => {
    await t.close();
  });

  it('every filter, alone and combined, returns exactly the matching rows in id order across pages', async () => {
    const all3 = NAMESPACES;
    const at = (i: number) => stored[i]!.createdAt;
    const filters: AttestationFilter[] = [
      { namespaces: all3 },
      { namespaces: ['team-b'] },
      { namespaces: ['team-a', 'team-c'] },
      { namespaces: ['team-a', 'team-a', 'team-c'] },
      { namespaces: [...all3, ...Array.from({ length: 10 }, (_, k) => `absent-${k}`)] },
      { namespaces: [...all3, ...Array.from({ length: 10 }, (_, k) => `absent-${k}`)], from: at(30) },
      { namespaces: all3, subject: `run:${RUNS[1]}` },
      { namespaces: all3, subject: `step:${RUNS[2]}:s1` },
      { namespaces: all3, subject: 'run:nope' },
      { namespaces: all3, runId: RUNS[3]! },
      { namespaces: all3, runId: RUNS[0]!, stepId: 's2' },
      { namespaces: all3, stepId: 's0' },
      { namespaces: all3, artifactDigest: DIGEST_1 },
      { namespaces: all3, artifactDigest: DIGEST_2 },
      { namespaces: all3, policyPack: 'baseline' },
      { namespaces: all3, policyPack: 'baseline', policyVersion: '2.0.0' },
      { namespaces: all3, policyPack: 'strict', policyVersion: '1.0.0' },
      { namespaces: all3, capabilityTokenId: 'tok-1' },
      { namespaces: all3, capabilityTokenId: 'tok-2' },
      { namespaces: all3, kind: 'run' },
      { namespaces: all3, from: at(20) },
      { namespaces: all3, to: at(40) },
      { namespaces: all3, from: at(20), to: at(40) },
      { namespaces: all3, from: at(20), to: at(20) },
      { namespaces: all3, from: new Date(at(59).getTime() + 1) },
      { namespaces: all3, to: at(0) },
      { namespaces: ['team-a'], policyPack: 'baseline', capabilityTokenId: 'tok-1', from: at(10) },
      { namespaces: ['team-b', 'team-c'], runId: RUNS[1]!, artifactDigest: DIGEST_1, to: at(50) },
      { namespaces: all3, subject: `run:${RUNS[0]}`, kind: 'step', policyPack: 'strict' },
    ];
    for (const filter of filters) {
      const expected = stored.filter((s) => matches(s, filter)).map((s) => s.id);
      for (const limit of [1, 4, 100]) {
        const { items, pages } = await all(filter, limit);
        expect(
          items.map((s) => s.id),
          JSON.stringify(filter),
        ).toEqual(expected);
        expect(pages).toBe(Math.max(1, Math.ceil(expected.length / limit)));
      }
      const full = await all(filter, 100);
      // Reads add `stapled` (whether an AIBOM's manifest staples the record: src/vault/stapled.ts);
      // no run here has an AIBOM, so it is false for every record.
      expect(full.items).toEqual(
        stored.filter((s) => matches(s, filter)).map((s) => ({ ...s, stapled: false })),
      );
    }
    // The window test is meaningful: batch 2 and 3 only.
    const window = stored.filter((s) => matches(s, { namespaces: all3, from: at(20), to: at(40) }));
    expect(window.map((s) => s.seq)).toEqual(Array.from({ length: 20 }, (_, k) => 21 + k));
  });

  it('lists the namespaces holding attestations', async () => {
    expect(await t.vault.attestations.namespaces()).toEqual([...NAMESPACES].sort());
  });

  it('an empty namespace list sees nothing', async () => {
    expect(await t.vault.attestations.query({ namespaces: [] })).toEqual({ items: [], nextCursor: null });
    const streamed = [];
    for await (const s of t.vault.attestations.stream({ namespaces: [] })) streamed.push(s);
    expect(streamed).toEqual([]);
  });

  it('limit defaults to 100 and is capped at 1000', async () => {
    await t.vault.attestations.append(Array.from({ length: 1100 }, () => attestation({ namespace: 'bulk' })));
    const first = await t.vault.attestations.query({ namespaces: ['bulk'] });
    expect(first.items).toHaveLength(100);
    expect(first.nextCursor).not.toBeNull();
    const capped = await t.vault.attestations.query({ namespaces: ['bulk'] }, { limit: 5000 });
    expect(capped.items).toHaveLength(1000);
    const rest = await t.vault.attestations.query(
      { namespaces: ['bulk'] },
      { limit: 1000, cursor: capped.nextCursor },
    );
    expect(rest.items).toHaveLength(100);
    expect(rest.nextCursor).toBeNull();
    for (const limit of [0, -1, 1.5]) {
      await expect(t.vault.attestations.query({ namespaces: ['bulk'] }, { limit })).rejects.toMatchObject({
        code: 'INVALID_INPUT',
      });
    }
  });

  it('rejects forged, corrupted, foreign and cross-filter cursors with CURSOR_INVALID', async () => {
    const filter = { namespaces: NAMESPACES };
    const page = await t.vault.attestations.query(filter, { limit: 5 });
    const cursor = page.nextCursor!;
    const [body, mac] = cursor.split('.') as [string, string];
    const payload = JSON.parse(Buffer.from(body, 'base64url').toString()) as {
      v: number;
      after: string;
      f: string;
    };
    expect(payload).toMatchObject({ v: 1, after: page.items[4]!.id });

    const forgedBody = Buffer.from(JSON.stringify({ ...payload, after: stored[40]!.id })).toString(
      'base64url',
    );
    const flippedMac = Buffer.from(mac, 'base64url');
    flippedMac[0] = flippedMac[0]! ^ 1;
    const foreign = new CursorCodec(randomBytes(32)).encode(payload.after, payload.f);
    const bad = [
      `${forgedBody}.${mac}`,
      `${body}.${flippedMac.toString('base64url')}`,
      `${body}.`,
      body,
      'garbage',
      '',
      `${body}.${mac}x`,
      foreign,
    ];
    for (const c of bad) {
      const err = await t.vault.attestations.query(filter, { limit: 5, cursor: c }).catch((e: unknown) => e);
      expect(err, c).toBeInstanceOf(VaultError);
      expect((err as VaultError).code).toBe('CURSOR_INVALID');
    }
    // A genuine cursor replayed with another filter is stale.
    await expect(
      t.vault.attestations.query({ ...filter, kind: 'step' }, { limit: 5, cursor }),
    ).rejects.toMatchObject({
      code: 'CURSOR_INVALID',
    });
    // ...but survives a change of the caller's namespaces (permissions are re-applied per page).
    const narrowed = await t.vault.attestations.query({ namespaces: ['team-a'] }, { limit: 5, cursor });
    expect(narrowed.items.every((s) => s.namespace === 'team-a' && s.id > payload.after)).toBe(true);
    // Cursors come from the database key: another replica (pool + codec) accepts them.
    const replica = createVaultPool(t.url, { max: 1 });
    try {
      const other = await openVault(replica);
      const next = await other.attestations.query(filter, { limit: 5, cursor });
      expect(next.items.map((s) => s.id)).toEqual(stored.slice(5, 10).map((s) => s.id));
    } finally {
      await replica.end();
    }
  });

  it('pages stay exact while writers append: nothing skipped, nothing repeated', async () => {
    const filter = { namespaces: ['live'] };
    await t.vault.attestations.append(Array.from({ length: 50 }, () => attestation({ namespace: 'live' })));
    const writer = await connectVault(t.url, { max: 2 });
    let stop = false;
    // A free-running writer (matching and non-matching rows) races with the pager...
    const background = (async () => {
      while (!stop) {
        await writer.attestations.append([
          attestation({ namespace: 'live' }),
          attestation({ namespace: 'other' }),
        ]);
      }
    })();
    try {
      const seen: string[] = [];
      let cursor: string | null = null;
      let pages = 0;
      do {
        // Each page through a fresh vault (its own cursor codec from the shared key): another replica.
        const page: Page = await (await openVault(t.pool)).attestations.query(filter, { limit: 7, cursor });
        seen.push(...page.items.map((s) => s.id));
        cursor = page.nextCursor;
        pages += 1;
        // ...and every one of the first pages is followed by a committed matching append, so rows
        // certainly arrive behind the cursor while paging.
        if (pages <= 10) await writer.attestations.append([attestation({ namespace: 'live' })]);
        if (pages === 20) stop = true;
      } while (cursor !== null);
      stop = true;
      await background;

      expect(new Set(seen).size).toBe(seen.length);
      expect(seen).toEqual([...seen].sort());
      const last = seen.at(-1)!;
      const { rows } = await t.admin.query<{ id: string }>(
        `SELECT id FROM attestations WHERE namespace = 'live' AND id <= $1 ORDER BY id`,
        [last],
      );
      expect(seen).toEqual(rows.map((r) => r.id));
      expect(seen.length).toBeGreaterThanOrEqual(60);
    } finally {
      stop = true;
      await background;
      await writer.close();
    }
  });

  it('rejects malformed filters', async () => {
    const bad: AttestationFilter[] = [
      { namespaces: NAMESPACES, runId: 'not-a-uuid' },
      { namespaces: NAMESPACES, policyVersion: '1.0.0' },
      { namespaces: NAMESPACES, from: new Date('nope') },
      { namespaces: NAMESPACES, kind: 'nope' as 'run' },
    ];
    for (const f of bad)
      await expect(t.vault.attestations.query(f)).rejects.toMatchObject({ code: 'INVALID_INPUT' });
  });
});

describe('vault reads of array columns', () => {
  let t: TestVault;
  beforeAll(async () => {
    t = await setupVault('arrays');
  });
  afterAll(async () => {
    await t.close();
  });

  it('return text[] columns exactly as written, whatever their elements hold', async () => {
    // Elements that text[] literals quote or escape, and that JSON escapes (reads use to_json);
    // empty strings are refused on append.
    const odd = ['a,b', 'c"d', 'e\\f', '{x}', 'NULL', ' sp ', 'é ✓ 😀', 'tab\there', 'new\nline', '\u0001'];
    const [written] = await t.vault.attestations.append([
      attestation({
        namespace: 'odd',
        subjects: odd,
        artifactDigests: [`sha256:${'3'.repeat(64)}`, ...odd],
        capabilityTokenIds: [...odd].reverse(),
      }),
    ]);
    const expected = {
      subjects: odd,
      artifactDigests: [`sha256:${'3'.repeat(64)}`, ...odd],
      capabilityTokenIds: [...odd].reverse(),
    };
    const id = written!.id;
    const reads: StoredAttestation[] = [
      written!,
      (await t.vault.attestations.get(id))!,
      (await t.vault.attestations.getMany([id])).get(id)!,
      ...(await t.vault.attestations.query({ namespaces: ['odd'] })).items,
    ];
    for (const readAhead of [false, true]) {
      for await (const s of t.vault.attestations.stream({ namespaces: ['odd'] }, { readAhead }))
        reads.push(s);
    }
    expect(reads).toHaveLength(6);
    for (const r of reads) expect(r).toMatchObject(expected);
  });
});
