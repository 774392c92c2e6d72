/**
 * retiredRecordNote (src/http/routes/v1/retired.ts): which ids get the retirement note of a 404,
 * and what reading the partition list costs. The GET route against a real retired partition is in
 * test/integration/export/retention.test.ts.
 */
import { describe, expect, it } from 'vitest';
import { retiredRecordNote } from '../../../src/http/routes/v1/retired.ts';
import { UuidV7Generator, type PartitionInfo } from '../../../src/vault/index.ts';

const partition = (state: PartitionInfo['state'], from: string | null, to: string): PartitionInfo => ({
  name: `p-${to}`,
  lo: null,
  hi: '',
  from: from === null ? null : new Date(from),
  to: new Date(to),
  state,
  records: null,
  firstSeq: null,
  lastSeq: null,
  archiveKey: null,
  archiveDigest: null,
});
const idAt = (iso: string): string => new UuidV7Generator({ now: () => Date.parse(iso) }).next();

describe('retiredRecordNote', () => {
  const parts = [
    partition('detached', null, '2026-09-01T00:00:00Z'),
    partition('dropped', '2026-09-01T00:00:00Z', '2026-10-01T00:00:00Z'),
    partition('archived', '2026-10-01T00:00:00Z', '2026-11-01T00:00:00Z'),
    partition('attached', '2026-11-01T00:00:00Z', '2026-12-01T00:00:00Z'),
  ];

  it('names the range of a retired month, nothing for an attached one', async () => {
    const note = retiredRecordNote({ list: () => Promise.resolve(parts) });
    expect(await note(idAt('2025-01-05T00:00:00Z'))).toMatch(
      /^records created before 2026-09-01T00:00:00.000Z were retired/,
    );
    expect(await note(idAt('2026-09-30T23:59:59.999Z'))).toMatch(
      /^records created from 2026-09-01T00:00:00.000Z to 2026-10-01T00:00:00.000Z were retired/,
    );
    // Archived but not yet detached: its records are still served, so no note.
    expect(await note(idAt('2026-10-01T00:00:00Z'))).toBeUndefined();
    expect(await note(idAt('2026-11-01T00:00:00Z'))).toBeUndefined();
    expect(await note('not-a-uuid')).toBeUndefined();
  });

  it('reads the list once for any number of lookups, concurrent or not, within a minute', async () => {
    let reads = 0;
    const note = retiredRecordNote({
      list: async () => {
        reads += 1;
        await new Promise((r) => setTimeout(r, 10));
        return parts;
      },
    });
    await Promise.all(Array.from({ length: 50 }, (_, i) => note(idAt(`2026-0${1 + (i % 8)}-02T00:00:00Z`))));
    for (let i = 0; i < 50; i++) await note(idAt('2026-11-02T00:00:00Z'));
    expect(reads).toBe(1);
  });

  it('a failed read gives no note (the plain 404), never an error', async () => {
    const note = retiredRecordNote({ list: () => Promise.reject(new Error('connection lost')) });
    await expect(note(idAt('2025-01-05T00:00:00Z'))).resolves.toBeUndefined();
  });
});
