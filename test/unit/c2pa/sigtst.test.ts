import { describe, expect, it } from 'vitest';
import { C2paError } from '../../../src/c2pa/index.ts';
import {
  parseClaimSignature,
  signClaim,
  sigTstOf,
  timestampedData,
} from '../../../src/c2pa/claim-signature.ts';
import { coseParts, objects, plain } from '../../helpers/cbor.ts';
import { testSigner } from './fixtures.ts';

/**
 * The C2PA 1.4 `sigTst` header as bytes, read with an independent CBOR decoder: where it goes,
 * what it holds, and what the time-stamp is over. (c2pa-rs accepting it is
 * test/integration/timestamp/c2pa.test.ts.)
 */
describe('sigTst', () => {
  it('is an unprotected text label holding {tstTokens: [{val: <TimeStampResp>}]}; the signature does not cover it', async () => {
    const { signer } = await testSigner();
    const claim = plain.encode({ claim_generator: 'x/1' });
    const response = Buffer.from('DER TimeStampResp');
    const stamped = coseParts(signClaim(signer, claim, response));
    const unstamped = coseParts(signClaim(signer, claim));
    expect(stamped.tag).toBe(18);
    expect([...stamped.unprotected.keys()]).toEqual(['sigTst']);
    expect(stamped.unprotected.get('sigTst')).toEqual(
      new Map([['tstTokens', [new Map([['val', response]])]]]),
    );
    expect(unstamped.unprotected.size).toBe(0);
    // Same protected header either way: the time-stamp is taken over it before signing.
    expect(stamped.protectedBytes).toEqual(unstamped.protectedBytes);
    expect(sigTstOf(parseClaimSignature(signClaim(signer, claim, response)).sign1)).toEqual(response);
  });

  it('covers ["CounterSignature", protected, h\'\', claim] (RFC 9052 Sig_structure, RFC 9338 context)', () => {
    const protectedBytes = Buffer.from([0xa1, 0x01, 0x26]);
    const claim = Buffer.from('claim');
    expect(timestampedData(protectedBytes, claim)).toEqual(
      plain.encode(['CounterSignature', protectedBytes, Buffer.alloc(0), claim]),
    );
    expect(objects.decode(timestampedData(protectedBytes, claim))).toEqual([
      'CounterSignature',
      protectedBytes,
      Buffer.alloc(0),
      claim,
    ]);
  });

  it.each([
    ['a byte string', Buffer.from('x')],
    ['no tokens', new Map([['tstTokens', []]])],
    [
      'two tokens',
      new Map([['tstTokens', [new Map([['val', Buffer.from('a')]]), new Map([['val', Buffer.from('b')]])]]]),
    ],
    ['a token without val', new Map([['tstTokens', [new Map([['value', Buffer.from('a')]])]]])],
  ])('refuses %s as MALFORMED_MANIFEST', async (_name, value) => {
    const { signer } = await testSigner();
    const sign1 = parseClaimSignature(signClaim(signer, plain.encode({ a: 1 }))).sign1;
    const broken = { ...sign1, unprotectedHeader: new Map<number | string, unknown>([['sigTst', value]]) };
    let err: unknown;
    try {
      sigTstOf(broken);
    } catch (e) {
      err = e;
    }
    expect(err).toBeInstanceOf(C2paError);
    expect((err as C2paError).code).toBe('MALFORMED_MANIFEST');
  });
});
