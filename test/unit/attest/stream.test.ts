import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { readStream, StreamDigest, StreamError, StreamReader } from '../../../src/attest/index.ts';

/** A stream as the sidecar writes it: record lines in batches, then the trailer. */
function write(records: unknown[], batch = 3): string {
  const digest = new StreamDigest();
  let out = '';
  for (let i = 0; i < records.length; i += batch) {
    const part = records.slice(i, i + batch);
    const text = part.map((r) => `${JSON.stringify(r)}\n`).join('');
    digest.add(text, part.length);
    out += text;
  }
  return out + digest.trailer();
}

const codeOf = (f: () => unknown): string | undefined => {
  try {
    f();
    return undefined;
  } catch (err) {
    if (err instanceof StreamError) return err.code;
    throw err;
  }
};

const record = fc.record({ id: fc.uuid(), text: fc.string({ unit: 'binary' }), n: fc.integer() });

describe('NDJSON stream trailer', () => {
  it('a complete stream reads back its records; the trailer counts and digests the lines', () => {
    const records = [{ id: 'a' }, { id: 'b', x: 'ü€😀' }, { id: 'c' }, { id: 'd' }];
    const text = write(records);
    expect(readStream(text)).toEqual(records);
    const trailer = JSON.parse(text.trimEnd().split('\n').at(-1)!) as { trailer: { count: number } };
    expect(trailer.trailer.count).toBe(4);
    expect(readStream(write([]))).toEqual([]);
  });

  it('property: a stream cut anywhere is refused; so is one with a line dropped, added, swapped or changed', () => {
    fc.assert(
      fc.property(fc.array(record, { minLength: 1, maxLength: 12 }), fc.nat(), (records, at) => {
        const text = write(records);
        expect(readStream(text)).toEqual(records);
        // Cut anywhere, line boundaries included (each line before the cut is valid JSON). A cut of
        // the final newline alone is not a cut: readStream tolerates its absence (editors strip it).
        const cut = text.slice(0, at % (text.length - 1));
        expect(['STREAM_TRUNCATED', 'STREAM_MALFORMED']).toContain(codeOf(() => readStream(cut)));
        const lines = text.split('\n').slice(0, -1);
        const body = lines.slice(0, -1);
        const trailer = lines.at(-1)!;
        const i = at % body.length;
        const variants = [
          [...body.slice(0, i), ...body.slice(i + 1), trailer],
          [...body.slice(0, i), body[i]!, ...body.slice(i), trailer],
          [...body.slice(0, i), body[i]!.replace('{', '{"extra":1,'), ...body.slice(i + 1), trailer],
        ];
        if (body.length > 1) variants.push([...body.slice(1), body[0]!, trailer]);
        for (const v of variants) {
          const altered = `${v.join('\n')}\n`;
          if (altered !== text) expect(codeOf(() => readStream(altered))).toBe('STREAM_MISMATCH');
        }
      }),
    );
  });

  it('refuses data after the trailer and lines that are not JSON', () => {
    const text = write([{ id: 'a' }]);
    expect(codeOf(() => readStream(`${text}{"id":"b"}\n`))).toBe('STREAM_MALFORMED');
    expect(codeOf(() => readStream(`{"id":"a"}\nnot json\n`))).toBe('STREAM_MALFORMED');
    const reader = new StreamReader();
    expect(reader.line('{"id":"a"}')).toEqual({ id: 'a' });
    expect(() => reader.end()).toThrow(/without its trailer/);
  });
});
