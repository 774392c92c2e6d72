import { describe, expect, it } from 'vitest';
import { TimestampError, type VerifiedTimestamp } from '../../../src/timestamp/index.ts';
import { DEFAULT_STAMP_POLICY, stampOutcome } from '../../../src/timestamp/stamper.ts';

/**
 * What the record stamper does with one attempt (pure; the loop over the vault's queue and the
 * real TSA are tested in test/integration/timestamp/records.test.ts): retry any failure with capped
 * backoff while the signer's certificate is valid, give up only once it has expired, and never
 * store a time-stamp whose time is outside the certificate's validity.
 */
const t0 = new Date('2026-06-01T00:00:00Z').getTime();
const at = (s: number) => new Date(t0 + s * 1000);
const validity = { notBefore: at(-3600), notAfter: at(3600) };
const stamp = (s: number) => ({ stamp: { genTime: at(s) } as VerifiedTimestamp });

describe('stampOutcome', () => {
  it('asks the TSA while the certificate is valid (or unknown: a bare key); not once it expired', () => {
    expect(stampOutcome.before(validity, at(0))).toBeUndefined();
    expect(stampOutcome.before({ notBefore: null, notAfter: null }, at(1e9))).toBeUndefined();
    expect(stampOutcome.before(validity, at(3601))).toMatchObject({
      kind: 'final',
      error: expect.stringMatching(/^OUTSIDE_VALIDITY: the signer certificate expired at /) as string,
    });
  });

  it('stores a time-stamp within the validity; refuses one outside it for good', () => {
    expect(stampOutcome.after(stamp(10), validity, 1, DEFAULT_STAMP_POLICY)).toEqual({ kind: 'store' });
    expect(stampOutcome.after(stamp(3601), validity, 1, DEFAULT_STAMP_POLICY)).toMatchObject({
      kind: 'final',
      error: expect.stringMatching(/^OUTSIDE_VALIDITY: the time-stamp's time/) as string,
    });
    expect(stampOutcome.after(stamp(-3601), validity, 1, DEFAULT_STAMP_POLICY)).toMatchObject({
      kind: 'final',
    });
  });

  it('retries any TSA failure (down, or a wrong answer) with capped exponential backoff', () => {
    const policy = { baseDelayMs: 1_000, maxDelayMs: 8_000, leaseMs: 60_000 };
    const down = { error: new TimestampError('TSA_UNAVAILABLE', 'no answer') };
    const wrong = { error: new TimestampError('IMPRINT_MISMATCH', 'other data') };
    const delays = [1, 2, 3, 4, 5, 10].map((n) => stampOutcome.after(down, validity, n, policy, () => 1));
    expect(delays.map((d) => (d.kind === 'retry' ? d.delayMs : -1))).toEqual([
      1_000, 2_000, 4_000, 8_000, 8_000, 8_000,
    ]);
    expect(delays[0]).toMatchObject({ error: 'TSA_UNAVAILABLE: no answer' });
    // Jitter: half fixed, half random.
    expect(stampOutcome.after(down, validity, 1, policy, () => 0)).toMatchObject({ delayMs: 500 });
    expect(stampOutcome.after(wrong, validity, 1, policy, () => 1)).toMatchObject({
      kind: 'retry',
      error: 'IMPRINT_MISMATCH: other data',
    });
  });
});
