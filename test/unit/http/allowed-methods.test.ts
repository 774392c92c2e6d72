/** The route patterns behind 405's Allow (src/http/allowed-methods.ts), checked as find-my-way reads them. */
import { describe, expect, it } from 'vitest';
import { patternOf } from '../../../src/http/allowed-methods.ts';

describe('patternOf', () => {
  it('a parameter is one segment; a wildcard the rest; the rest is literal', () => {
    const p = patternOf('/v1/runs/:id/artifacts/:kind');
    expect(p.test('/v1/runs/abc/artifacts/aibom')).toBe(true);
    expect(p.test('/v1/runs/abc/def/artifacts/aibom')).toBe(false);
    expect(p.test('/v1/runs//artifacts/aibom')).toBe(false);
    expect(p.test('/v1/runs/abc/artifacts/aibom/manifest')).toBe(false);
    expect(patternOf('/v1/tlog/:log/tile/*').test('/v1/tlog/vault/tile/0/x001/002')).toBe(true);
    expect(patternOf('/v1/attestations/query').test('/v1/attestationsXquery')).toBe(false);
    expect(patternOf('/a.b').test('/aXb')).toBe(false);
  });

  it('a parameter with its own regex, two in one segment, and an escaped colon', () => {
    expect(patternOf('/v1/x/:from-:to').test('/v1/x/1-2')).toBe(true);
    expect(patternOf('/v1/x/:n(\\d+)').test('/v1/x/12')).toBe(true);
    expect(patternOf('/v1/x/:n(\\d+)').test('/v1/x/1a')).toBe(false);
    expect(patternOf('/v1/a::b').test('/v1/a:b')).toBe(true);
  });
});
