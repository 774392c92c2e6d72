import { describe, expect, it } from 'vitest';
import { hash } from 'node:crypto';
import { EXPORT_FORMAT } from '../../../src/export/layout.ts';
import { indexEntry } from '../../../src/verify/entries/index-json.ts';
import { segmentEntry } from '../../../src/verify/entries/segment.ts';
import { BundleState } from '../../../src/verify/index.ts';
import { feed, found } from './fixtures.ts';

/**
 * The segment indexes and index.json alone (entries/segment.ts, entries/index-json.ts): every
 * entry is listed once with its digest and size, nothing else is listed, segments are numbered in
 * order, and the counts agree.
 */
const state = () => new BundleState({ trustAnchors: [] });
const listed = (path: string, content: string) => ({
  path,
  size: Buffer.byteLength(content),
  sha256: hash('sha256', content),
});
const segmentJson = (n: number, entries: object[]) =>
  JSON.stringify({ segment: n, entries, scitt_enqueued: [] });

describe('index/NNNNNN.json', () => {
  it('lists exactly the entries since the segment before; the segment is then listed in index.json', () => {
    const s = state();
    s.segmentEntries.push(listed('a', 'A'), listed('b', 'B'));
    s.segmentRecords = 2;
    feed(s, segmentEntry, 'index/000001.json', segmentJson(1, [listed('a', 'A'), listed('b', 'B')]));
    expect(s.problems).toEqual([]);
    expect(s.segmentEntries).toEqual([]);
    expect(s.segments).toMatchObject([{ path: 'index/000001.json', attestations: 2 }]);
    expect(s.segmentRecords).toBe(0);
  });

  it('names an entry left out, one whose bytes changed, and one listed but absent', () => {
    const s = state();
    s.segmentEntries.push(listed('a', 'A'), listed('b', 'B-changed'), listed('extra', 'X'));
    feed(
      s,
      segmentEntry,
      'index/000001.json',
      segmentJson(1, [listed('a', 'A'), listed('b', 'B'), listed('gone', 'G')]),
    );
    expect(found(s)).toEqual(['b DIGEST_MISMATCH', 'extra NOT_IN_INDEX', 'gone MISSING']);
  });

  it('out of order (number in the file or in the archive), and not a segment index', () => {
    const s = state();
    feed(s, segmentEntry, 'index/000002.json', segmentJson(2, []));
    expect(found(s)).toEqual(['index/000002.json MALFORMED']);
    const t = state();
    feed(t, segmentEntry, 'index/000001.json', segmentJson(7, []));
    expect(t.problems[0]?.message).toBe('out of order (segment 7)');
    for (const garbage of ['{', '[]', 'null', '{"entries": {}}']) {
      const g = state();
      feed(g, segmentEntry, 'index/000001.json', garbage);
      expect(found(g), garbage).toEqual(['index/000001.json MALFORMED']);
      // Still counted as a segment, so index.json must list it.
      expect(g.segments).toHaveLength(1);
    }
  });
});

describe('index.json', () => {
  const good = (s: BundleState, extra: object = {}) =>
    JSON.stringify({
      format: EXPORT_FORMAT,
      attestations: s.attestations,
      segments: s.segments,
      entries: s.tail,
      ...extra,
    });

  it('agrees with the archive: no problem, and its digest is kept for the manifest', () => {
    const s = state();
    s.attestations = 3;
    s.segments.push({ ...listed('index/000001.json', 'x'), attestations: 3 });
    s.tail.push(listed('attestations.intoto.jsonl', 'lines'));
    const text = good(s);
    feed(s, indexEntry, 'index.json', text);
    expect(s.problems).toEqual([]);
    expect(s.indexSha).toBe(hash('sha256', text));
    indexEntry.end!(s);
    expect(s.problems).toEqual([]);
  });

  it('refuses another format, a wrong count, a segment listed wrong or not at all, entries after the last segment', () => {
    const s = state();
    s.attestations = 3;
    s.segments.push({ ...listed('index/000001.json', 'x'), attestations: 3 });
    s.segments.push({ ...listed('index/000002.json', 'y'), attestations: 1 });
    s.segmentEntries.push(listed('stray', 's'));
    s.tail.push(listed('attestations.intoto.jsonl', 'lines'));
    feed(
      s,
      indexEntry,
      'index.json',
      JSON.stringify({
        format: 'other/v9',
        attestations: 4,
        segments: [
          { ...listed('index/000001.json', 'x'), attestations: 2 },
          { ...listed('index/000009.json', 'z'), attestations: 1 },
        ],
        entries: [],
      }),
    );
    expect(found(s)).toEqual([
      'index.json MALFORMED',
      'stray NOT_IN_INDEX',
      'index/000001.json RECORD_MISMATCH',
      'index/000002.json NOT_IN_INDEX',
      'index/000009.json MISSING',
      'attestations.intoto.jsonl NOT_IN_INDEX',
      'index.json RECORD_MISMATCH',
    ]);
  });

  it('not JSON is MALFORMED; a JSON value that is no object throws (the reader reports it against the entry); none at all is MISSING', () => {
    const s = state();
    feed(s, indexEntry, 'index.json', '{"format":');
    expect(found(s)).toEqual(['index.json MALFORMED']);
    indexEntry.end!(s);
    expect(found(s)).toEqual(['index.json MALFORMED', 'index.json MISSING']);
    expect(() => feed(state(), indexEntry, 'index.json', 'null')).toThrow();
  });
});
