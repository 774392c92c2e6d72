import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { LineSplitter, LineTooLongError } from '../../../src/export/lines.ts';
import { Paths } from '../../../src/export/layout.ts';
import { MAX_BUFFERED_ENTRY, tarHeader } from '../../../src/export/tar.ts';
import { MAX_JSONL_LINE, verifyBundle } from '../../../src/export/verify.ts';

/**
 * Archives built to exhaust the verifier: a header claiming far more than any real entry, and an
 * `.intoto.jsonl` whose one line never ends. The archive is an endless lazy stream here (nothing
 * is materialised), and the test counts how many bytes the verifier pulled from it: a verifier that
 * believed the header, or buffered the line, would pull (and hold) gigabytes before failing.
 */
const CHUNK = 64 * 1024;

/** `header` then `fill` bytes for ever, in 64 KiB chunks; `pulled()` says how many were taken. */
function endless(header: Buffer, fill: number): { source: AsyncIterable<Uint8Array>; pulled: () => number } {
  let pulled = 0;
  const body = Buffer.alloc(CHUNK, fill);
  async function* gen(): AsyncGenerator<Uint8Array> {
    pulled += header.length;
    yield header;
    for (;;) {
      await Promise.resolve(); // a stream's chunks arrive asynchronously
      pulled += body.length;
      yield body;
    }
  }
  return { source: gen(), pulled: () => pulled };
}

const trust = { trustAnchors: [] };

describe('verify of hostile archives', () => {
  it('refuses an entry claiming 1.5 GB before reading its bytes, naming it', async () => {
    const claimed = 1_500_000_000;
    const a = endless(tarHeader(Paths.logKeys, claimed), 0);
    const result = await verifyBundle(a.source, trust);
    expect(result.ok).toBe(false);
    expect(result.problems).toContainEqual({
      entry: Paths.logKeys,
      code: 'MALFORMED_ARCHIVE',
      message: `entry ${Paths.logKeys} claims ${claimed} bytes, more than the ${MAX_BUFFERED_ENTRY} an entry of an export may hold`,
    });
    // The header's block and no content: at most the chunk the header came in.
    expect(a.pulled()).toBeLessThanOrEqual(512 + CHUNK);
  });

  it('refuses an .intoto.jsonl line longer than the cap as soon as it is, naming the entry', async () => {
    const a = endless(tarHeader(Paths.intotoJsonl, 4 * MAX_JSONL_LINE), 0x61);
    const result = await verifyBundle(a.source, trust);
    expect(result.ok).toBe(false);
    expect(result.problems).toContainEqual({
      entry: Paths.intotoJsonl,
      code: 'MALFORMED_ARCHIVE',
      message: `line 1 is longer than ${MAX_JSONL_LINE} bytes: not one DSSE envelope`,
    });
    expect(a.pulled()).toBeLessThanOrEqual(512 + MAX_JSONL_LINE + CHUNK);
  });
});

describe('LineSplitter', () => {
  it('gives the lines of any text however it is chunked (UTF-8 split anywhere)', () => {
    fc.assert(
      fc.property(
        fc.array(
          fc.string({ unit: 'grapheme' }).map((s) => s.replaceAll('\n', '')),
          { maxLength: 8 },
        ),
        fc.array(fc.nat(), { maxLength: 10 }),
        (lines, cuts) => {
          const bytes = Buffer.from(lines.map((l) => `${l}\n`).join(''));
          const points = [...new Set(cuts.map((c) => c % (bytes.length + 1)))].sort((x, y) => x - y);
          const got: string[] = [];
          const s = new LineSplitter(1 << 20, (line) => got.push(line.toString('utf8')));
          let at = 0;
          for (const p of [...points, bytes.length]) {
            s.push(bytes.subarray(at, p));
            at = p;
          }
          expect(got).toEqual(lines);
          expect(s.unfinished).toBe(0);
        },
      ),
    );
  });

  it('refuses a line one byte over its cap, and accepts one exactly at it, across chunks', () => {
    const ok: number[] = [];
    const s = new LineSplitter(10, (l) => ok.push(l.length));
    s.push(Buffer.from('12345'));
    s.push(Buffer.from('67890\nab'));
    expect(ok).toEqual([10]);
    expect(s.unfinished).toBe(2);
    expect(() => s.push(Buffer.from('cdefghijk'))).toThrow(LineTooLongError);
    expect(() => new LineSplitter(10, () => undefined).push(Buffer.from('12345678901\n'))).toThrow(
      'line 1 is longer than 10 bytes',
    );
  });
});
