import { describe, expect, it } from 'vitest';
import { checkPrefillDisk, ingestLayout, rechainRows, type ChainHead } from '../../../bench/ingest.ts';
import { ATTESTATION_TABLE_COLUMNS } from '../../../src/vault/rows.ts';
import { UuidV7Generator } from '../../../src/vault/uuidv7.ts';

const COLUMNS = ATTESTATION_TABLE_COLUMNS.split(', ');
const col = (name: string): number => COLUMNS.indexOf(name);
const hex = (c: string): string => `sha256:${c.repeat(64)}`;

/** A COPY text row as exportRows gives it: every column filled with something recognisable. */
function row(k: number): string {
  return COLUMNS.map((c) => {
    if (c === 'digest') return hex((k % 10).toString());
    if (c === 'envelope')
      return `{"payload":"cm93${k}","payloadType":"application/vnd.in-toto+json","signatures":[]}`;
    if (c === 'subjects') return `{run:${k},"a\\\\tb"}`;
    return `${c}-${k}`;
  }).join('\t');
}

const head: ChainHead = {
  seq: 41,
  id: new UuidV7Generator().next(),
  digest: hex('f'),
  createdAt: new Date('2026-11-28T03:00:00.000Z'),
};

describe('rechainRows (the shared layout of the ingest benchmark)', () => {
  const lines = [0, 1, 2, 3].map(row);
  const now = new Date('2026-11-28T04:00:00.000Z');
  const { text, head: next } = rechainRows(lines, head, new UuidV7Generator(), now);
  const out = text.split('\n');
  const fields = out.slice(0, -1).map((l) => l.split('\t'));

  it('continues the chain at the head: next seqs, ids after the head, prev_digest links', () => {
    expect(out.at(-1)).toBe('');
    expect(fields.map((f) => Number(f[col('seq')]))).toEqual([42, 43, 44, 45]);
    const ids = fields.map((f) => f[col('id')]!);
    expect([head.id, ...ids]).toEqual([head.id, ...ids].sort());
    expect(new Set([head.id, ...ids]).size).toBe(5);
    expect(fields[0]![col('prev_digest')]).toBe(head.digest);
    for (let i = 1; i < fields.length; i++)
      expect(fields[i]![col('prev_digest')]).toBe(fields[i - 1]![col('digest')]);
    expect(next).toEqual({ seq: 45, id: ids[3], digest: fields[3]![col('digest')], createdAt: now });
  });

  it('gives each row a digest of its own and keeps every other column byte for byte', () => {
    const digests = fields.map((f) => f[col('digest')]!);
    for (const d of digests) expect(d).toMatch(/^sha256:[0-9a-f]{64}$/);
    expect(new Set(digests).size).toBe(4);
    lines.forEach((l, i) => expect(digests[i]).not.toBe(l.split('\t')[col('digest')]));
    const changed = new Set(['id', 'seq', 'prev_digest', 'digest', 'created_at'].map(col));
    lines.forEach((l, i) =>
      l.split('\t').forEach((v, c) => {
        if (!changed.has(c)) expect(fields[i]![c]).toBe(v);
      }),
    );
    expect(fields.every((f) => f[col('created_at')] === now.toISOString())).toBe(true);
  });

  it('never dates a row before the head', () => {
    const later = { ...head, createdAt: new Date('2026-11-28T05:00:00.000Z') };
    const { text: t } = rechainRows([row(9)], later, new UuidV7Generator(), now);
    expect(t.trimEnd().split('\t')[col('created_at')]).toBe(later.createdAt.toISOString());
  });

  it('refuses a row with a column missing', () => {
    expect(() => rechainRows([row(1).split('\t').slice(1).join('\t')], head, new UuidV7Generator())).toThrow(
      /a COPY row has 17 columns/,
    );
  });
});

describe('BENCH_INGEST_LAYOUT and the prefill disk check', () => {
  it('reads twin (the default) and shared, and names the variable otherwise', () => {
    expect([undefined, '', 'twin', 'shared'].map((v) => ingestLayout(v))).toEqual([
      'twin',
      'twin',
      'twin',
      'shared',
    ]);
    expect(() => ingestLayout('Shared')).toThrow('BENCH_INGEST_LAYOUT must be twin or shared, got "Shared"');
  });

  it('refuses a prefill the disk cannot hold, and says that one vault needs half', () => {
    const gib = 1024 ** 3;
    expect(() => checkPrefillDisk(10_000_000, 2, 60 * gib)).toThrow(
      /BENCH_INGEST_PREFILL=10000000 needs about 64\.6 GiB free .*60\.0 GiB is free: BENCH_INGEST_LAYOUT=shared needs half/,
    );
    expect(() => checkPrefillDisk(10_000_000, 1, 60 * gib)).not.toThrow();
    expect(() => checkPrefillDisk(10_000_000, 1, 30 * gib)).toThrow(/needs about 34\.8 GiB/);
    expect(() => checkPrefillDisk(0, 2, 0)).not.toThrow();
  });
});
