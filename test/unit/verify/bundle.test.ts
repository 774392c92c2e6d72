import { Readable } from 'node:stream';
import { beforeAll, describe, expect, it } from 'vitest';
import { verifyBundle } from '../../../src/verify/index.ts';
import { fixture, optionsOf, type Fixture } from './fixtures.ts';

let f: Fixture;
beforeAll(async () => {
  f = await fixture();
});

describe('verifyBundle over every entry type', () => {
  it('verifies the fixture bundle: records, chains, Sigstore bundles, receipts, the AIBOM', async () => {
    const result = await verifyBundle(Readable.from([f.bytes]), optionsOf(f));
    expect(result.problems).toEqual([]);
    expect(result).toMatchObject({ ok: true, runs: 1 });
    expect(result.receipts).toBe(f.items.filter((i) => i.scitt !== undefined).length);
    expect(result.attestations).toBe(f.items.length);
    expect(result.chains.length).toBeGreaterThan(0);
  });
});
