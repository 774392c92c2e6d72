import { describe, expect, it } from 'vitest';
import { envelopeDigest } from '../../../src/attest/index.ts';
import { Paths } from '../../../src/export/layout.ts';
import { LineTooLongError } from '../../../src/export/lines.ts';
import { intotoJsonlEntry, MAX_JSONL_LINE } from '../../../src/verify/entries/intoto-jsonl.ts';
import { BundleState } from '../../../src/verify/index.ts';
import { found } from './fixtures.ts';

/**
 * attestations.intoto.jsonl alone (entries/intoto-jsonl.ts): line n is the envelope of the n-th
 * record, however the bytes are chunked; the first five mismatches are named, the rest counted.
 */
const envelopes = [0, 1, 2].map((i) => ({
  payloadType: 'application/vnd.in-toto+json',
  payload: Buffer.from(`{"n":${i}}`).toString('base64'),
  signatures: [{ keyid: '', sig: Buffer.from(`sig${i}`).toString('base64') }],
}));

function run(text: string, digests: string[], chunk = 7): BundleState {
  const s = new BundleState({ trustAnchors: [] });
  s.digests.push(...digests);
  const bytes = Buffer.from(text);
  for (let at = 0; at < bytes.length; at += chunk)
    intotoJsonlEntry.onChunk!(s, bytes.subarray(at, at + chunk));
  intotoJsonlEntry.onEntry(s, {
    path: Paths.intotoJsonl,
    size: bytes.length,
    sha256: '',
    content: Buffer.alloc(0),
    match: intotoJsonlEntry.pattern.exec(Paths.intotoJsonl)!,
  });
  intotoJsonlEntry.end!(s);
  return s;
}

const lines = envelopes.map((e) => JSON.stringify(e));
const digests = envelopes.map((e) => envelopeDigest(e));

describe('attestations.intoto.jsonl', () => {
  it('one envelope per record, in order, split anywhere', () => {
    for (const chunk of [1, 5, 64, 4096])
      expect(run(`${lines.join('\n')}\n`, digests, chunk).problems).toEqual([]);
  });

  it('names a swapped line, a line that is not JSON, and a missing newline at the end', () => {
    const s = run(`${lines[1]}\n{not json\n${lines[2]}`, digests);
    expect(s.problems.map((p) => p.message)).toEqual([
      `line 1 is not the envelope of attestation #1 (${digests[0]})`,
      `line 2 is not the envelope of attestation #2 (${digests[1]})`,
      'the last line does not end with a newline',
      '2 lines for 3 attestations',
    ]);
  });

  it('a line for a record the archive does not hold says so; more than five mismatches are counted', () => {
    const extra = run(`${lines.join('\n')}\n${lines[0]}\n`, digests);
    expect(extra.problems.map((p) => p.message)).toEqual([
      'line 4 is not the envelope of attestation #4 (none)',
      '4 lines for 3 attestations',
    ]);
    const many = run(`${Array.from({ length: 9 }, () => '{}').join('\n')}\n`, digests);
    expect(found(many).filter((p) => p.endsWith('RECORD_MISMATCH'))).toHaveLength(7);
    expect(many.problems.at(-1)?.message).toBe('4 more lines differ');
  });

  it('a line past the cap throws as it grows (the reader names the entry), before it is buffered whole', () => {
    const s = new BundleState({ trustAnchors: [] });
    const block = Buffer.alloc(1024 * 1024, 0x61);
    let pushed = 0;
    expect(() => {
      for (;;) {
        intotoJsonlEntry.onChunk!(s, block);
        pushed += block.length;
      }
    }).toThrow(LineTooLongError);
    expect(pushed).toBeLessThanOrEqual(MAX_JSONL_LINE);
  });
});
