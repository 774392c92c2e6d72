import { verify } from 'node:crypto';
import { Tag } from 'cbor-x';
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { CoseAlg } from '../../../src/cose/algorithms.ts';
import { encodeCbor } from '../../../src/cose/cbor.ts';
import { CoseError } from '../../../src/cose/errors.ts';
import {
  encodeSign1,
  Header,
  parseSign1,
  sigStructure,
  signSign1,
  signSign1Parts,
  verifySign1,
} from '../../../src/cose/sign1.ts';
import { hasCode } from '../../../src/errors.ts';
import { coseParts, plain, sigStructureOf } from '../../helpers/cbor.ts';
import { logSigner } from '../transparency/fixtures.ts';

const header = (alg: number) => new Map<number, unknown>([[Header.alg, alg]]);

function coseCode(fn: () => unknown): string | undefined {
  try {
    fn();
  } catch (err) {
    if (err instanceof CoseError) return err.code;
    throw err;
  }
  return undefined;
}

describe('COSE_Sign1 (shared by C2PA and SCITT)', () => {
  it('signs ES256 as IEEE P1363 and EdDSA raw, both checked without our COSE code', () => {
    for (const [signer, alg, digest] of [
      [logSigner('ec'), CoseAlg.ES256, 'sha256'],
      [logSigner('ed25519'), CoseAlg.EdDSA, null],
    ] as const) {
      const payload = Buffer.from('payload');
      const bytes = signSign1(signer, { protectedHeader: header(alg), payload });
      const { tag, protectedBytes, unprotected, payload: body, signature } = coseParts(bytes);
      expect(tag).toBe(18);
      expect(unprotected.size).toBe(0);
      expect(Buffer.from(body!).equals(payload)).toBe(true);
      expect(signature).toHaveLength(64);
      const toBeSigned = sigStructureOf(protectedBytes, payload);
      expect(sigStructure(protectedBytes, payload).equals(toBeSigned)).toBe(true);
      expect(
        verify(digest, toBeSigned, { key: signer.publicKey, dsaEncoding: 'ieee-p1363' }, signature),
      ).toBe(true);
      const parsed = parseSign1(bytes);
      expect(parsed.tagged).toBe(true);
      expect(verifySign1(parsed, signer.publicKey)).toBe(true);
      // Re-encoding a parsed structure gives the same bytes (preferred serialisation both times).
      expect(encodeSign1(parsed).equals(bytes)).toBe(true);
    }
  });

  it('detaches the payload on request and verifies over the one supplied', () => {
    const signer = logSigner('ec');
    const payload = Buffer.alloc(32, 9);
    const bytes = signSign1(signer, { protectedHeader: header(CoseAlg.ES256), payload, detached: true });
    const parsed = parseSign1(bytes);
    expect(parsed.payload).toBeNull();
    expect(verifySign1(parsed, signer.publicKey)).toBe(false); // nothing to verify over
    expect(verifySign1(parsed, signer.publicKey, payload)).toBe(true);
    expect(verifySign1(parsed, signer.publicKey, Buffer.alloc(32, 8))).toBe(false);
  });

  it('verifies only with the key of the protected alg, and never throws', () => {
    const ec = logSigner('ec');
    const ed = logSigner('ed25519');
    const parsed = parseSign1(
      signSign1(ec, { protectedHeader: header(CoseAlg.ES256), payload: Buffer.from('x') }),
    );
    expect(verifySign1(parsed, ed.publicKey)).toBe(false);
    expect(verifySign1(parsed, logSigner('ec').publicKey)).toBe(false);
    // A DER signature where P1363 belongs is not accepted.
    const der = { ...parsed, signature: ec.sign(sigStructure(parsed.protectedBytes, Buffer.from('x'))) };
    expect(verifySign1(der, ec.publicKey)).toBe(false);
    expect(verifySign1({ ...parsed, signature: Buffer.alloc(0) }, ec.publicKey)).toBe(false);
  });

  it('refuses a protected alg that is not the signer’s', () => {
    const signer = logSigner('ec');
    expect(coseCode(() => signSign1Parts(signer, header(CoseAlg.EdDSA), Buffer.from('x')))).toBe(
      'INVALID_INPUT',
    );
    expect(coseCode(() => signSign1Parts(signer, new Map(), Buffer.from('x')))).toBe('INVALID_INPUT');
  });

  it('parses untagged structures and reports every malformation as MALFORMED', () => {
    const protectedBytes = encodeCbor(header(CoseAlg.ES256));
    const sig = Buffer.alloc(64);
    const untagged = parseSign1(plain.encode([protectedBytes, new Map(), null, sig]));
    expect(untagged.tagged).toBe(false);
    expect(untagged.payload).toBeNull();
    const cases = [
      Buffer.from('not cbor at all'),
      plain.encode(new Tag([protectedBytes, new Map(), null, sig], 17)),
      plain.encode([protectedBytes, new Map(), null]),
      plain.encode(['text', new Map(), null, sig]),
      plain.encode([Buffer.from([0xff]), new Map(), null, sig]),
      plain.encode([plain.encode([1]), new Map(), null, sig]),
      plain.encode([protectedBytes, [], null, sig]),
      plain.encode([protectedBytes, new Map(), 7, sig]),
      plain.encode([protectedBytes, new Map(), null, 'sig']),
      Buffer.concat([plain.encode([protectedBytes, new Map(), null, sig]), Buffer.from([0])]),
    ];
    for (const bytes of cases) {
      let caught: unknown;
      try {
        parseSign1(bytes);
      } catch (err) {
        caught = err;
      }
      expect(hasCode(caught, 'MALFORMED'), bytes.toString('hex')).toBe(true);
    }
  });

  it('parses whatever bytes come, without throwing anything but CoseError', () => {
    fc.assert(
      fc.property(fc.uint8Array({ maxLength: 200 }), (bytes) => {
        try {
          parseSign1(bytes);
        } catch (err) {
          expect(err).toBeInstanceOf(CoseError);
        }
      }),
      { numRuns: 500 },
    );
  });
});
