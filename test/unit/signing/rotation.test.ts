import { describe, expect, it } from 'vitest';
import { resolveSignerCertificate, ROTATION_GRACE_MS } from '../../../src/signing/index.ts';

/** Which certificate a record names, and whether its key had been rotated away when it was signed. */
const t0 = new Date('2026-01-01T00:00:00Z').getTime();
const at = (minutes: number) => new Date(t0 + minutes * 60_000);
const ref = (n: number) => `sha256:${String(n).repeat(64).slice(0, 64)}`;
const key = (n: number) =>
  `sha256:${String(n)
    .repeat(64)
    .slice(0, 64)
    .replace(/./g, (c) => String((+c + 5) % 10))}`;

// Key 1 with two certificates (a renewal that kept the key), then key 2 from minute 60 on.
const history = [
  { certRef: ref(1), keyId: key(1), firstUsedAt: at(0) },
  { certRef: ref(2), keyId: key(1), firstUsedAt: at(30) },
  { certRef: ref(3), keyId: key(2), firstUsedAt: at(60) },
];

describe('resolveSignerCertificate', () => {
  it('finds the certificate a record names, for its key', () => {
    expect(resolveSignerCertificate(history, { keyId: key(1), certChainRef: ref(1) }, at(10))).toEqual({
      ok: true,
      certificate: history[0],
    });
    // A renewal with the same key is not a rotation away: the older certificate stays good.
    expect(resolveSignerCertificate(history, { keyId: key(1), certChainRef: ref(1) }, at(45)).ok).toBe(true);
    expect(resolveSignerCertificate(history, { keyId: key(2), certChainRef: ref(3) }, at(600)).ok).toBe(true);
  });

  it('KEY_ROTATED: signed with a key after another key replaced it (beyond the grace period)', () => {
    const late = resolveSignerCertificate(
      history,
      { keyId: key(1), certChainRef: ref(2) },
      at(61 + ROTATION_GRACE_MS / 60_000),
    );
    expect(late).toMatchObject({ ok: false, code: 'KEY_ROTATED' });
    // In-flight work of replicas that saw the new Secret a little later is still accepted.
    expect(resolveSignerCertificate(history, { keyId: key(1), certChainRef: ref(2) }, at(62)).ok).toBe(true);
    // The grace period is a parameter: with none, the first record after the rotation is refused.
    expect(
      resolveSignerCertificate(history, { keyId: key(1), certChainRef: ref(2) }, at(61), 0),
    ).toMatchObject({
      code: 'KEY_ROTATED',
    });
  });

  it('UNKNOWN_CERTIFICATE and KEY_MISMATCH', () => {
    expect(resolveSignerCertificate(history, { keyId: key(1), certChainRef: ref(9) }, at(1))).toMatchObject({
      ok: false,
      code: 'UNKNOWN_CERTIFICATE',
    });
    expect(resolveSignerCertificate(history, { keyId: key(2), certChainRef: ref(1) }, at(1))).toMatchObject({
      ok: false,
      code: 'KEY_MISMATCH',
    });
  });
});
