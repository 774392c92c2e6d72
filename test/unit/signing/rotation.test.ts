import { describe, expect, it } from 'vitest';
import {
  resolveInKeyStore,
  resolveSignerCertificate,
  ROTATION_GRACE_MS,
  signedAtOf,
} from '../../../src/signing/index.ts';

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

describe('resolveInKeyStore: a whole trust bundle, every scope', () => {
  // The service's keys 1 then 2 (history above), a tenant's own key 3 first used at minute 90, and
  // the log key (role log) at minute 100.
  const store = [
    ...history.map((c) => ({ ...c, namespace: '', role: 'signer' as const })),
    { certRef: ref(4), keyId: key(3), firstUsedAt: at(90), namespace: 'team-x', role: 'signer' as const },
    { certRef: ref(5), keyId: key(4), firstUsedAt: at(100), namespace: '', role: 'log' as const },
  ];

  it("judges a rotation within the named certificate's scope only", () => {
    // The tenant's key (first used later, another scope) and the log key never rotate key 2 away.
    expect(resolveInKeyStore(store, { keyId: key(2), certChainRef: ref(3) }, at(600)).ok).toBe(true);
    expect(resolveInKeyStore(store, { keyId: key(3), certChainRef: ref(4) }, at(600)).ok).toBe(true);
    // Key 1 is rotated away by key 2 in its own scope, as with one signer's history.
    expect(resolveInKeyStore(store, { keyId: key(1), certChainRef: ref(1) }, at(80))).toMatchObject({
      ok: false,
      code: 'KEY_ROTATED',
    });
    // A log key is no signer certificate.
    expect(resolveInKeyStore(store, { keyId: key(4), certChainRef: ref(5) }, at(101))).toMatchObject({
      code: 'UNKNOWN_CERTIFICATE',
    });
  });
});

describe('signedAtOf', () => {
  it('is the vault time, moved earlier (never later) by a trusted time-stamp', () => {
    expect(signedAtOf(at(10))).toEqual(at(10));
    // A time-stamp taken late (a TSA outage) does not make the record look signed later.
    expect(signedAtOf(at(10), at(70))).toEqual(at(10));
    // One taken before the vault time bounds when the signature existed.
    expect(signedAtOf(at(10), at(9))).toEqual(at(9));
  });
});
