import { describe, expect, it } from 'vitest';
import { CoseError } from '../../../src/cose/errors.ts';
import { decodeX5chain, encodeX5chain } from '../../../src/cose/x5chain.ts';
import { statementSigner } from '../transparency/fixtures.ts';

describe('x5chain (RFC 9360)', () => {
  it('writes one certificate as a byte string and several as an array, and reads both back', async () => {
    const signer = await statementSigner({ intermediate: true });
    const chain = [...signer.certificateChain!, signer.caCertificates[0]!];
    const one = encodeX5chain(chain.slice(0, 1));
    expect(Buffer.isBuffer(one)).toBe(true);
    expect(decodeX5chain(one).map((c) => c.fingerprint256)).toEqual([chain[0]!.fingerprint256]);
    const many = encodeX5chain(chain);
    expect(Array.isArray(many)).toBe(true);
    expect(decodeX5chain(many).map((c) => c.fingerprint256)).toEqual(chain.map((c) => c.fingerprint256));
    expect(() => encodeX5chain([])).toThrow(CoseError);
  });

  it('refuses a missing chain, other types and certificates that do not parse', async () => {
    const signer = await statementSigner();
    const leaf = signer.certificateChain![0]!.raw;
    for (const value of [undefined, [], 7, 'der', [leaf, 'der'], Buffer.from('not DER')]) {
      expect(() => decodeX5chain(value)).toThrow(CoseError);
    }
    expect(() => decodeX5chain([leaf, Buffer.from('not DER')])).toThrow(/certificate #2 does not parse/);
  });
});
