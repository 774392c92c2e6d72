import { describe, expect, it } from 'vitest';
import { encodeCbor } from '../../../src/cose/cbor.ts';
import { CoseError } from '../../../src/cose/errors.ts';
import { coseKid, decodeKeySet, encodeKeySet, logKeyOf } from '../../../src/cose/key.ts';
import { keyIdOf } from '../../../src/signing/index.ts';
import { cbor } from '../../helpers/cbor.ts';
import { logSigner } from '../transparency/fixtures.ts';

describe('COSE key set', () => {
  it('round-trips P-256 and Ed25519 log keys with their kids', () => {
    const keys = [logKeyOf(logSigner('ec').publicKey), logKeyOf(logSigner('ed25519').publicKey)];
    const decoded = decodeKeySet(encodeKeySet(keys));
    expect(decoded).toHaveLength(2);
    for (const [i, k] of decoded.entries()) {
      expect(k.kid.equals(keys[i]!.kid)).toBe(true);
      expect(
        k.key
          .export({ type: 'spki', format: 'der' })
          .equals(keys[i]!.key.export({ type: 'spki', format: 'der' })),
      ).toBe(true);
    }
    const raw = cbor.decode(encodeKeySet(keys.slice(0, 1))) as Map<number, unknown>[];
    expect(raw[0]!.get(1)).toBe(2); // kty EC2
    expect(raw[0]!.get(-1)).toBe(1); // crv P-256
    expect(raw[0]!.get(3)).toBe(-7);
  });

  it('kid is the SPKI SHA-256 (the hex of keyIdOf), and callers cannot change the cached copy', () => {
    const key = logSigner('ec').publicKey;
    const kid = coseKid(key);
    expect(`sha256:${kid.toString('hex')}`).toBe(keyIdOf(key));
    kid.fill(0);
    expect(`sha256:${coseKid(key).toString('hex')}`).toBe(keyIdOf(key));
  });

  it('skips unusable keys and refuses what is not a key set', () => {
    const good = logKeyOf(logSigner('ec').publicKey);
    const set = encodeCbor([
      'not a map',
      new Map<number, unknown>([
        [1, 2],
        [-1, 2], // P-384: not ours
        [-2, Buffer.alloc(48)],
        [-3, Buffer.alloc(48)],
      ]),
      new Map<number, unknown>([
        [1, 2],
        [-1, 1],
        [-2, Buffer.alloc(32)], // not a point on the curve
        [-3, Buffer.alloc(32)],
      ]),
      ...(cbor.decode(encodeKeySet([good])) as unknown[]),
    ]);
    const decoded = decodeKeySet(set);
    expect(decoded).toHaveLength(1);
    expect(decoded[0]!.kid.equals(good.kid)).toBe(true);
    for (const bad of [Buffer.from('garbage'), encodeCbor(new Map([[1, 2]]))]) {
      expect(() => decodeKeySet(bad)).toThrow(CoseError);
    }
  });
});
