import { generateKeyPairSync, verify } from 'node:crypto';
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { createKeySigner } from '../../../src/signing/key-signer.ts';
import { verifyWith } from '../../../src/signing/signer.ts';

describe('Signer: the signature encoding its caller needs', () => {
  const ec = createKeySigner({ privateKey: generateKeyPairSync('ec', { namedCurve: 'P-256' }).privateKey });
  const ed = createKeySigner({ privateKey: generateKeyPairSync('ed25519').privateKey });

  it('ECDSA: DER by default (DSSE), fixed-width r ‖ s on request (COSE/JWS), both verifiable', () => {
    // ~1 in 128 signatures has a scalar shorter than 32 bytes: enough runs to meet the padding case.
    let shortScalars = 0;
    fc.assert(
      fc.property(fc.uint8Array({ maxLength: 64 }), (bytes) => {
        const data = Buffer.from(bytes);
        const der = ec.sign(data);
        const p1363 = ec.sign(data, 'ieee-p1363');
        expect(p1363).toHaveLength(64);
        expect(verify('sha256', data, ec.publicKey, der)).toBe(true);
        expect(verify('sha256', data, { key: ec.publicKey, dsaEncoding: 'ieee-p1363' }, p1363)).toBe(true);
        expect(verifyWith(ec.algorithm, ec.publicKey, data, der)).toBe(true);
        expect(verifyWith(ec.algorithm, ec.publicKey, data, p1363, 'ieee-p1363')).toBe(true);
        // Each encoding is refused where the other belongs.
        expect(verifyWith(ec.algorithm, ec.publicKey, data, p1363)).toBe(false);
        expect(verifyWith(ec.algorithm, ec.publicKey, data, der, 'ieee-p1363')).toBe(false);
        // DER is SEQUENCE { INTEGER r, INTEGER s }: variable length, never 64 bytes of r ‖ s.
        expect(der[0]).toBe(0x30);
        expect(der[1]).toBe(der.length - 2);
        // A scalar below 2^248 is left-padded with zeros to keep the fixed width.
        if (p1363[0] === 0 || p1363[32] === 0) shortScalars++;
      }),
      { numRuns: 600 },
    );
    expect(shortScalars).toBeGreaterThan(0);
  });

  it('Ed25519: the 64 raw bytes whatever the encoding asked', () => {
    const data = Buffer.from('data');
    for (const sig of [ed.sign(data), ed.sign(data, 'ieee-p1363'), ed.sign(data, 'der')]) {
      expect(sig).toHaveLength(64);
      expect(verify(null, data, ed.publicKey, sig)).toBe(true);
      expect(verifyWith(ed.algorithm, ed.publicKey, data, sig, 'ieee-p1363')).toBe(true);
    }
  });
});
