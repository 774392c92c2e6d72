/**
 * `stapled` (src/vault/stapled.ts) on every read path: the page query (with and without the
 * transparency jobs joined, several page sizes), `get`, `getMany` and the stream. The page and GET
 * paths join the AIBOM's seq in their own statement; the stream asks in a second one: all must give
 * the rule's answer, record by record, against a real PostgreSQL.
 */
import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { StoredAttestation } from '../../../src/vault/index.ts';
import { attestation, setupVault, type TestVault } from './helpers.ts';

const NS = 'team-st';

describe('stapled on every read path', () => {
  let t: TestVault;
  let stored: StoredAttestation[];
  /** The rule, written out per record (not computed from the code under test). */
  let expected: Map<string, boolean>;

  beforeAll(async () => {
    t = await setupVault('stapled');
    const withAibom = randomUUID();
    const without = randomUUID();
    const step = (runId: string, stepId: string) => attestation({ namespace: NS, runId, stepId });
    const artifact = (runId: string, name: string) =>
      attestation({ namespace: NS, runId, stepId: null, kind: 'artifact', subjects: [name] });
    // In seq order: two steps (stapled), the AIBOM record (stapled), its views (after the manifest:
    // not stapled), the AIBOM bytes' artifact record (stapled although later), a later step (not).
    const plan: [ReturnType<typeof attestation>, boolean][] = [
      [step(withAibom, 'a'), true],
      [step(without, 'a'), false],
      [step(withAibom, 'b'), true],
      [attestation({ namespace: NS, runId: withAibom, stepId: null, kind: 'aibom' }), true],
      [artifact(withAibom, `artifact:${withAibom}:aibom.cdx.json`), false],
      [artifact(withAibom, `artifact:${withAibom}:aibom.spdx.json`), false],
      [artifact(withAibom, `artifact:${withAibom}:aibom`), true],
      [step(withAibom, 'late'), false],
      [step(without, 'b'), false],
    ];
    stored = [];
    for (const [a] of plan) stored.push(...(await t.vault.attestations.append([a])));
    expected = new Map(stored.map((s, i) => [s.id, plan[i]![1]]));
    const aibom = stored[3]!;
    // The artifacts row the recorder writes with the AIBOM (superuser: the test plays the recorder).
    await t.admin.query(
      `INSERT INTO artifacts (run_id, kind, namespace, object_key, digest, metadata)
       VALUES ($1, 'aibom', $2, 'k', $3, $4)`,
      [withAibom, NS, `sha256:${'a'.repeat(64)}`, { aibom_attestation_id: aibom.id }],
    );
  });
  afterAll(async () => {
    await t.close();
  });

  const answer = (records: Iterable<StoredAttestation>): Map<string, boolean | undefined> =>
    new Map([...records].map((r) => [r.id, r.stapled]));

  it('the expectation holds both answers (the test can fail)', () => {
    expect(new Set(expected.values())).toEqual(new Set([true, false]));
  });

  it('pages, with and without the transparency jobs, at every page size', async () => {
    for (const withTransparencyJobs of [false, true]) {
      for (const limit of [1, 2, 4, 100]) {
        const seen: StoredAttestation[] = [];
        let cursor: string | null = null;
        do {
          const page = await t.vault.attestations.query(
            { namespaces: [NS] },
            { limit, cursor, withTransparencyJobs },
          );
          if (withTransparencyJobs) expect(page.jobs).toHaveLength(page.items.length);
          seen.push(...page.items);
          cursor = page.nextCursor;
        } while (cursor !== null);
        expect(answer(seen), `limit ${limit}, jobs ${withTransparencyJobs}`).toEqual(expected);
      }
    }
  });

  it('get, getMany and the stream', async () => {
    const one = await Promise.all(stored.map((s) => t.vault.attestations.get(s.id)));
    expect(answer(one.map((r) => r!))).toEqual(expected);
    expect(answer((await t.vault.attestations.getMany(stored.map((s) => s.id))).values())).toEqual(expected);
    const streamed: StoredAttestation[] = [];
    for await (const r of t.vault.attestations.stream({ namespaces: [NS] })) streamed.push(r);
    expect(answer(streamed)).toEqual(expected);
    // Otherwise the records read are what append stored.
    expect(one.map((r) => ({ ...r!, stapled: undefined }))).toEqual(
      stored.map((s) => ({ ...s, stapled: undefined })),
    );
  });
});
