import { createPublicKey, generateKeyPairSync, sign, verify } from 'node:crypto';
import fc from 'fast-check';
import { beforeAll, describe, expect, it } from 'vitest';
import { generateDevPki } from '../../../hack/dev-pki.ts';
import { isLowS, toLowS } from '../../../src/capability/low-s.ts';
import { verifyCredential } from '../../../src/capability/vc.ts';
import { verifyCapabilities } from '../../../src/capability/verify.ts';
import { signerFromPem, type KeySigner } from '../../../src/signing/index.ts';
import { capabilityEnvelopes, tokenOf, withToken } from '../../helpers/capabilities.ts';

/**
 * ES256 signatures are malleable (s → n − s verifies too), so a VC-JWT had two valid encodings.
 * The projection now emits only low-S signatures and refuses the other form.
 */
const N = 0xffffffff00000000ffffffffffffffffbce6faada7179e84f3b9cac2fc632551n;
const sOf = (sig: Buffer) => BigInt(`0x${sig.subarray(32).toString('hex')}`);

/** The other valid encoding of an ES256 compact JWS: s replaced by n − s. */
function malleate(token: string): string {
  const [h, p, s] = token.split('.') as [string, string, string];
  const sig = Buffer.from(s, 'base64url');
  const flipped = Buffer.concat([
    sig.subarray(0, 32),
    Buffer.from((N - sOf(sig)).toString(16).padStart(64, '0'), 'hex'),
  ]);
  return `${h}.${p}.${flipped.toString('base64url')}`;
}

let signer: KeySigner;
beforeAll(async () => {
  signer = signerFromPem(await generateDevPki());
});

describe('ES256 VC-JWTs: low-S only', () => {
  it('every minted credential is low-S (40 of 40: a random signature is high-S half the time)', async () => {
    for (let i = 0; i < 20; i++) {
      const { capability, step } = await capabilityEnvelopes(signer);
      for (const record of [capability, step]) {
        const sig = Buffer.from(tokenOf(record, 'vc+jwt').split('.')[2]!, 'base64url');
        expect(sig).toHaveLength(64);
        expect(sOf(sig) <= N / 2n).toBe(true);
      }
    }
  });

  it('the high-S twin of a valid credential is refused, though the curve accepts it', async () => {
    const { capability } = await capabilityEnvelopes(signer);
    const token = tokenOf(capability, 'vc+jwt');
    const twin = malleate(token);
    const [h, p, s] = twin.split('.') as [string, string, string];
    // A plain ECDSA check accepts the twin: the malleability this closes.
    expect(
      verify(
        'sha256',
        Buffer.from(`${h}.${p}`),
        { key: signer.publicKey, dsaEncoding: 'ieee-p1363' },
        Buffer.from(s, 'base64url'),
      ),
    ).toBe(true);
    expect(() => verifyCredential(twin, [signer.publicKey])).toThrow(
      expect.objectContaining({ code: 'TOKEN_SIGNATURE_INVALID' }),
    );
    const r = await verifyCapabilities(withToken(capability, 'vc+jwt', twin), {
      publicKeys: [signer.publicKey],
    });
    expect(r.problems.map((x) => x.code)).toEqual(['TOKEN_SIGNATURE_INVALID']);
    expect(verifyCredential(token, [signer.publicKey]).keyId).toBe(signer.keyId);
  });

  it('toLowS keeps a signature valid and canonical; isLowS refuses anything else', () => {
    const { privateKey } = generateKeyPairSync('ec', { namedCurve: 'P-256' });
    const pub = createPublicKey(privateKey);
    fc.assert(
      fc.property(fc.uint8Array({ minLength: 1, maxLength: 64 }), (data) => {
        const raw = sign('sha256', data, { key: privateKey, dsaEncoding: 'ieee-p1363' });
        const low = toLowS(raw);
        expect(isLowS(low)).toBe(true);
        expect(verify('sha256', data, { key: pub, dsaEncoding: 'ieee-p1363' }, low)).toBe(true);
        expect(toLowS(low).equals(low)).toBe(true);
      }),
      { numRuns: 50 },
    );
    expect(isLowS(Buffer.alloc(64))).toBe(false); // s = 0
    expect(isLowS(Buffer.alloc(63, 1))).toBe(false);
  });

  it('EdDSA credentials are not touched', async () => {
    const ed = signerFromPem(await generateDevPki({ leafAlgorithm: 'ED25519' }));
    const { capability } = await capabilityEnvelopes(ed);
    expect(verifyCredential(tokenOf(capability, 'vc+jwt'), [ed.publicKey]).header.alg).toBe('EdDSA');
  });
});
