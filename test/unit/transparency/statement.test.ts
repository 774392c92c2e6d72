import { createHash, verify, X509Certificate } from 'node:crypto';
import { Tag } from 'cbor-x';
import { beforeAll, describe, expect, it } from 'vitest';
import { Claim } from '../../../src/cose/cwt.ts';
import { Header, signSign1 } from '../../../src/cose/sign1.ts';
import {
  buildSignedStatement,
  decodeSign1,
  verifySignedStatement,
} from '../../../src/transparency/statement.ts';
import { didX509, matchDidX509, percentEncode } from '../../../src/transparency/did-x509.ts';
import { isTransparencyError, type TransparencyErrorCode } from '../../../src/transparency/errors.ts';
import type { KeySigner } from '../../../src/signing/index.ts';
import { cbor, coseParts, plain, sigStructureOf } from '../../helpers/cbor.ts';
import { attestationId, envelope, logSigner, signedStatement, statementSigner } from './fixtures.ts';

function codeOf(fn: () => unknown): TransparencyErrorCode | undefined {
  try {
    fn();
  } catch (err) {
    if (isTransparencyError(err)) return err.code;
    throw err;
  }
  return undefined;
}

describe('SCITT signed statements (COSE_Sign1 hash envelope)', () => {
  let signer: KeySigner;
  let root: X509Certificate;
  beforeAll(async () => {
    signer = await statementSigner();
    root = signer.caCertificates[0]!;
  });

  it('signs the envelope digest with alg, x5chain, CWT iss/sub and hash-envelope headers', () => {
    const { statement: s, id, digest } = signedStatement(signer);

    const { tag, protectedBytes, unprotected, payload, signature } = coseParts(s.bytes);
    expect(tag).toBe(18);
    expect(unprotected.size).toBe(0);
    expect(Buffer.from(payload!).toString('hex')).toBe(digest.slice('sha256:'.length));
    expect(signature).toHaveLength(64); // IEEE P1363 r ‖ s

    const header = cbor.decode(protectedBytes) as Map<number, unknown>;
    expect(header.get(1)).toBe(-7);
    expect(header.has(3)).toBe(false); // RFC 9995: no content type next to 259
    expect(header.get(258)).toBe(-16);
    expect(header.get(259)).toBe('application/vnd.dsse.envelope+json');
    const chain = (header.get(33) as Buffer[]).map((der) => new X509Certificate(der));
    expect(chain.map((c) => c.subject)).toEqual([signer.certificateChain![0]!.subject, root.subject]);
    const claims = header.get(15) as Map<number, unknown>;
    expect(claims.get(2)).toBe(id);
    const pin = createHash('sha256').update(root.raw).digest('base64url');
    expect(claims.get(1)).toBe(`did:x509:0:sha256:${pin}::subject:CN:aibom-vault%20dev%20signer`);
    expect(s.issuer).toBe(claims.get(1));
    expect(typeof claims.get(6)).toBe('number');

    // The signature, checked without our COSE code: Sig_structure by hand, P1363 ECDSA.
    const toBeSigned = sigStructureOf(protectedBytes, payload!);
    expect(
      verify('sha256', toBeSigned, { key: signer.publicKey, dsaEncoding: 'ieee-p1363' }, signature),
    ).toBe(true);
  });

  it('verifies as a registration policy would, and rejects what it must', () => {
    const { envelope: env, digest } = envelope(signer);
    const s = buildSignedStatement({
      attestationId: attestationId(),
      envelope: env,
      digest,
      signer,
      caCertificates: [root],
    });
    const ok = verifySignedStatement(s.bytes, { trustAnchors: [root] });
    expect(ok.issuer).toBe(s.issuer);
    expect(ok.payloadHashAlg).toBe(-16);
    expect(ok.payload.equals(s.payloadHash)).toBe(true);

    // Payload altered: signature fails.
    const parsed = decodeSign1(s.bytes, 'MALFORMED_STATEMENT');
    const altered = plain.encode(
      new Tag([parsed.protectedBytes, new Map(), Buffer.alloc(32, 1), parsed.signature], 18),
    );
    expect(codeOf(() => verifySignedStatement(altered))).toBe('STATEMENT_SIGNATURE_INVALID');
    expect(codeOf(() => verifySignedStatement(Buffer.from('not cbor at all')))).toBe('MALFORMED_STATEMENT');
    expect(codeOf(() => verifySignedStatement(plain.encode([1, 2, 3])))).toBe('MALFORMED_STATEMENT');
  });

  it('rejects an untrusted chain and an issuer that does not match the chain', async () => {
    const other = await statementSigner({ caCommonName: 'someone else' });
    const { envelope: env } = envelope(signer);
    const s = buildSignedStatement({
      attestationId: attestationId(),
      envelope: env,
      signer,
      caCertificates: [root],
    });
    expect(codeOf(() => verifySignedStatement(s.bytes, { trustAnchors: other.caCertificates }))).toBe(
      'UNTRUSTED_ISSUER',
    );

    // Signed correctly, but iss pins another CA.
    const chain = [signer.certificateChain![0]!, root];
    const wrongIss = didX509([signer.certificateChain![0]!, other.caCertificates[0]!]);
    const forged = signSign1(signer, {
      protectedHeader: new Map<number, unknown>([
        [Header.alg, -7],
        [
          Header.cwtClaims,
          new Map<number, unknown>([
            [Claim.iss, wrongIss],
            [Claim.sub, 'x'],
          ]),
        ],
        [Header.x5chain, chain.map((c) => c.raw)],
      ]),
      payload: Buffer.alloc(32),
    });
    expect(codeOf(() => verifySignedStatement(forged))).toBe('ISSUER_MISMATCH');

    // The errors quote neither the submitter's iss nor its certificate names.
    const hostile = '<b>x</b>\u001b[31m';
    const hostileIss = signSign1(signer, {
      protectedHeader: new Map<number, unknown>([
        [Header.alg, -7],
        [
          Header.cwtClaims,
          new Map<number, unknown>([
            [Claim.iss, `${wrongIss}::subject:CN:${hostile}`],
            [Claim.sub, 'x'],
          ]),
        ],
        [Header.x5chain, chain.map((c) => c.raw)],
      ]),
      payload: Buffer.alloc(32),
    });
    const messageOf = (fn: () => unknown): string => {
      try {
        fn();
      } catch (err) {
        return (err as Error).message;
      }
      return '';
    };
    const untrusted = await statementSigner({ caCommonName: hostile });
    const untrustedStatement = buildSignedStatement({
      attestationId: attestationId(),
      envelope: envelope(untrusted).envelope,
      signer: untrusted,
      caCertificates: untrusted.caCertificates,
    });
    for (const m of [
      messageOf(() => verifySignedStatement(hostileIss)),
      messageOf(() =>
        verifySignedStatement(untrustedStatement.bytes, { trustAnchors: other.caCertificates }),
      ),
    ]) {
      expect(m).not.toBe('');
      expect(m).not.toMatch(/<b>|did:x509:0/);
      expect([...m].every((c) => c >= ' ')).toBe(true);
    }
  });

  it('refuses an envelope that does not hash to the stored digest', () => {
    const { envelope: env } = envelope(signer);
    const code = codeOf(() =>
      buildSignedStatement({
        attestationId: attestationId(),
        envelope: env,
        digest: `sha256:${'0'.repeat(64)}`,
        signer,
        caCertificates: [root],
      }),
    );
    expect(code).toBe('ATTESTATION_DIGEST_MISMATCH');
  });

  it('needs a CA for did:x509', () => {
    const { envelope: env } = envelope(signer);
    expect(
      codeOf(() => buildSignedStatement({ attestationId: attestationId(), envelope: env, signer })),
    ).toBe('ISSUER_UNAVAILABLE');
    expect(
      codeOf(() =>
        buildSignedStatement({ attestationId: attestationId(), envelope: env, signer: logSigner() }),
      ),
    ).toBe('ISSUER_UNAVAILABLE');
  });

  it('pins the root through an intermediate, and supports the eku policy and Ed25519', async () => {
    const deep = await statementSigner({ intermediate: true, leafAlgorithm: 'ED25519' });
    const { envelope: env } = envelope(deep);
    const s = buildSignedStatement({
      attestationId: attestationId(),
      envelope: env,
      signer: deep,
      caCertificates: deep.caCertificates,
      issuerPolicy: 'eku',
    });
    const header = cbor.decode(coseParts(s.bytes).protectedBytes) as Map<number, unknown>;
    expect(header.get(1)).toBe(-8);
    expect(header.get(33) as Buffer[]).toHaveLength(3);
    const pin = createHash('sha256').update(deep.caCertificates[0]!.raw).digest('base64url');
    expect(s.issuer).toBe(`did:x509:0:sha256:${pin}::eku:1.3.6.1.5.5.7.3.36`);
    expect(verifySignedStatement(s.bytes, { trustAnchors: deep.caCertificates }).subject).toBe(s.subject);
  });
});

describe('did:x509', () => {
  let signer: KeySigner;
  let chain: X509Certificate[];
  beforeAll(async () => {
    signer = await statementSigner();
    chain = [signer.certificateChain![0]!, signer.caCertificates[0]!];
  });

  it('percent-encodes everything outside ALPHA / DIGIT / - . _', () => {
    expect(percentEncode('aibom-vault dev signer')).toBe('aibom-vault%20dev%20signer');
    expect(percentEncode('a~b:c/é')).toBe('a%7Eb%3Ac%2F%C3%A9');
    expect(percentEncode('A.Z_0-9')).toBe('A.Z_0-9');
  });

  it('matches its own identifiers and rejects others', () => {
    const did = didX509(chain);
    expect(matchDidX509(did, chain)).toEqual({ ok: true });
    expect(matchDidX509(didX509(chain, { policy: 'eku' }), chain)).toEqual({ ok: true });
    const pin = did.split('::')[0]!;
    expect(matchDidX509(`${pin}::subject:CN:aibom-vault%20dev%20signer:O:aibom-vault%20dev`, chain).ok).toBe(
      true,
    );
    expect(matchDidX509(`${pin}::subject:CN:someone`, chain).ok).toBe(false);
    expect(matchDidX509(`${pin}::subject:CN:a:CN:b`, chain).ok).toBe(false);
    expect(matchDidX509(`${pin}::eku:1.3.6.1.5.5.7.3.1`, chain).ok).toBe(false);
    expect(matchDidX509(`${pin}::san:email:x%40y`, chain).ok).toBe(false);
    expect(
      matchDidX509(`did:x509:0:sha256:${'A'.repeat(43)}::subject:CN:aibom-vault%20dev%20signer`, chain).ok,
    ).toBe(false);
    // The leaf itself may not be the pinned CA.
    const leafPin = createHash('sha256').update(chain[0]!.raw).digest('base64url');
    expect(
      matchDidX509(`did:x509:0:sha256:${leafPin}::subject:CN:aibom-vault%20dev%20signer`, chain).ok,
    ).toBe(false);
    expect(matchDidX509('did:web:example.com', chain).ok).toBe(false);
  });
});
