import { json as sigstoreJson } from '@sigstore/core';
import canonicalize from 'canonicalize';
import fc from 'fast-check';
import { createHash, verify } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import {
  decodeBase64Strict,
  envelopeDigest,
  sealStatement,
  signPayload,
  signStatement,
  statementPayload,
  stepStatement,
} from '../../../src/attest/index.ts';
import { envelopeJcs, signedEnvelopeDigest } from '../../../src/attest/digest.ts';
import { AttestError } from '../../../src/attest/errors.ts';
import { canonicalJson } from '../../../src/attest/json.ts';
import type { Signer } from '../../../src/signing/signer.ts';
import type { DsseEnvelope } from '../../../src/attest/dsse.ts';
import { modelStepInput } from './fixtures.ts';
import { ed25519Signer, p256Signer } from './keys.ts';

const statement = stepStatement(modelStepInput);

/** PAE written out independently of src/attest/pae.ts. */
function pae(payload: Buffer): Buffer {
  return Buffer.concat([Buffer.from(`DSSEv1 28 application/vnd.in-toto+json ${payload.length} `), payload]);
}

describe('DSSE envelope', () => {
  it.each([
    ['ECDSA P-256', p256Signer, 'sha256'],
    ['Ed25519', ed25519Signer, null],
  ] as const)('%s signature verifies with crypto.verify over the PAE bytes', (_name, makeSigner, digest) => {
    const signer = makeSigner();
    const envelope = signStatement(statement, signer);
    expect(Object.keys(envelope).sort()).toEqual(['payload', 'payloadType', 'signatures']);
    expect(envelope.payloadType).toBe('application/vnd.in-toto+json');
    const payload = Buffer.from(envelope.payload, 'base64');
    expect(payload.equals(statementPayload(statement))).toBe(true);
    expect(JSON.parse(payload.toString('utf8'))).toEqual(statement);
    expect(envelope.signatures).toHaveLength(1);
    const [entry] = envelope.signatures;
    expect(entry?.keyid).toBe(signer.keyId);
    const sig = Buffer.from(entry?.sig ?? '', 'base64');
    expect(verify(digest, pae(payload), signer.publicKey, sig)).toBe(true);
    // The signature is over the PAE, not over the raw payload.
    expect(verify(digest, payload, signer.publicKey, sig)).toBe(false);
  });

  it('encodes ECDSA signatures as ASN.1 DER (what cosign expects), Ed25519 as 64 raw bytes', () => {
    const ec = Buffer.from(signStatement(statement, p256Signer()).signatures[0]?.sig ?? '', 'base64');
    expect(ec[0]).toBe(0x30); // DER SEQUENCE
    expect(ec[1]).toBe(ec.length - 2);
    const ed = Buffer.from(signStatement(statement, ed25519Signer()).signatures[0]?.sig ?? '', 'base64');
    expect(ed).toHaveLength(64);
  });

  it('uses standard base64 with padding', () => {
    const envelope = signPayload(Buffer.from([0xfb, 0xff]), 'application/octet-stream', p256Signer());
    expect(envelope.payload).toBe('+/8=');
  });
});

describe('envelope digest', () => {
  it('is sha256 over the JCS canonical JSON of the envelope, written out by hand', () => {
    const envelope = signStatement(statement, p256Signer());
    const [s] = envelope.signatures;
    const jcs =
      `{"payload":"${envelope.payload}","payloadType":"application/vnd.in-toto+json",` +
      `"signatures":[{"keyid":"${s?.keyid}","sig":"${s?.sig}"}]}`;
    const expected = `sha256:${createHash('sha256').update(jcs, 'utf8').digest('hex')}`;
    expect(envelopeDigest(envelope)).toBe(expected);
    // Independent JCS implementation (sigstore-js) agrees; field order of the object is irrelevant.
    const shuffled = {
      signatures: envelope.signatures,
      payloadType: envelope.payloadType,
      payload: envelope.payload,
    };
    expect(sigstoreJson.canonicalize(shuffled)).toBe(jcs);
    expect(envelopeDigest(shuffled)).toBe(expected);
  });

  it('is returned by sealStatement with the signature metadata', () => {
    const signer = p256Signer();
    const sealed = sealStatement(statement, signer);
    expect(sealed.digest).toBe(envelopeDigest(sealed.envelope));
    expect(sealed.digest).toMatch(/^sha256:[0-9a-f]{64}$/);
    expect(sealed.signature).toEqual({ algorithm: 'ECDSA_P256_SHA256', key_id: signer.keyId });
  });
});

describe('envelope JCS fast path', () => {
  const str = fc.string({ unit: 'binary', maxLength: 40 });
  const signature = fc.record({ keyid: str, sig: str }, { requiredKeys: ['sig'] });
  const envelope = fc.record({
    payload: str,
    payloadType: str,
    signatures: fc.array(signature, { maxLength: 3 }),
  });
  const extra = fc.dictionary(str, fc.jsonValue({ maxDepth: 1 }), { maxKeys: 2 });

  it('agrees with the canonicalize package on envelope-shaped values, or defers to it', () => {
    let fastPathTaken = 0;
    fc.assert(
      fc.property(envelope, extra, fc.boolean(), (e, more, addExtra) => {
        const value = addExtra ? { ...more, ...e } : e;
        const fast = envelopeJcs(value);
        let generic: string | undefined;
        try {
          generic = canonicalize(value);
        } catch {
          generic = undefined; // lone surrogates: JCS refuses them
        }
        if (fast !== undefined) {
          fastPathTaken++;
          expect(fast).toBe(generic);
        }
        if (generic !== undefined) {
          expect(envelopeDigest(value as DsseEnvelope)).toBe(
            `sha256:${createHash('sha256').update(generic, 'utf8').digest('hex')}`,
          );
        }
      }),
      { numRuns: 2000 },
    );
    expect(fastPathTaken).toBeGreaterThan(200); // the comparison really exercised the fast path
  });
});

/** A signer that signs like `inner` under another key id (the DSSE hint: any string). */
function withKeyId(inner: Signer, keyId: string): Signer {
  return {
    keyId,
    algorithm: inner.algorithm,
    publicKey: inner.publicKey,
    sign: (data, encoding) => inner.sign(data, encoding),
  };
}

/** The generic digest, or the error code it throws. */
function digestOrCode(f: () => string): string {
  try {
    return f();
  } catch (err) {
    if (err instanceof AttestError) return `error ${err.code}`;
    throw err;
  }
}

describe('the seal path (signStatement, signedEnvelopeDigest): same bytes as the generic path', () => {
  // Ed25519 signatures are deterministic: the whole envelope can be compared byte for byte.
  const ed = ed25519Signer();
  const predicate = fc.jsonValue({ maxDepth: 3 });

  it('signStatement gives the envelope signPayload(statementPayload(…)) gives, for any statement', () => {
    fc.assert(
      fc.property(predicate, fc.string({ unit: 'grapheme', maxLength: 30 }), (p, name) => {
        const st = { ...statement, subject: [{ name, digest: { sha256: 'ab' } }], predicate: p };
        let expected: DsseEnvelope;
        try {
          expected = signPayload(statementPayload(st), 'application/vnd.in-toto+json', ed);
        } catch (err) {
          // A value JCS refuses (a lone surrogate): signStatement refuses it the same way.
          expect(() => signStatement(st, ed)).toThrow((err as Error).message);
          return;
        }
        const got = signStatement(st, ed);
        expect(got).toEqual(expected);
        expect(Buffer.from(got.payload, 'base64').toString('utf8')).toBe(canonicalJson(st));
      }),
      { numRuns: 300 },
    );
  });

  it('signedEnvelopeDigest equals envelopeDigest (or throws the same error) for any key id and payload', () => {
    let fast = 0;
    fc.assert(
      fc.property(
        fc.string({ unit: 'binary', maxLength: 24 }),
        fc.uint8Array({ maxLength: 200 }),
        (keyId, bytes) => {
          const envelope = signPayload(
            Buffer.from(bytes),
            'application/vnd.in-toto+json',
            withKeyId(ed, keyId),
          );
          const generic = digestOrCode(() => envelopeDigest(envelope));
          expect(digestOrCode(() => signedEnvelopeDigest(envelope))).toBe(generic);
          if (!generic.startsWith('error')) fast++;
        },
      ),
      { numRuns: 1000 },
    );
    expect(fast).toBeGreaterThan(500);
  });

  it('signedEnvelopeDigest keeps no key id of one envelope for the next (the last key id is cached)', () => {
    const ids = ['sha256:aa', 'k"\\\u00e9', 'sha256:aa', 'sha256:\ud800', 'sha256:aa', 'sha256:bb'];
    for (const keyId of [...ids, ...ids.reverse()]) {
      const envelope = signStatement(statement, withKeyId(ed, keyId));
      expect(
        digestOrCode(() => signedEnvelopeDigest(envelope)),
        keyId,
      ).toBe(digestOrCode(() => envelopeDigest(envelope)));
    }
  });

  it('takes the generic path for other payload types and more than one signature', () => {
    const one = signPayload(Buffer.from('{"a":1}'), 'application/json', ed);
    expect(signedEnvelopeDigest(one)).toBe(envelopeDigest(one));
    const two = signStatement(statement, ed);
    two.signatures.push({ keyid: 'k"\\2', sig: 'AAAA' });
    expect(signedEnvelopeDigest(two)).toBe(envelopeDigest(two));
    const none = { ...two, signatures: [] };
    expect(signedEnvelopeDigest(none)).toBe(envelopeDigest(none));
  });

  it('sealStatement refuses a key id with a lone surrogate as envelopeDigest does (JCS cannot encode it)', () => {
    expect(() => sealStatement(statement, withKeyId(ed, 'sha256:\ud800'))).toThrow(
      expect.objectContaining({ code: 'NOT_CANONICALIZABLE' }),
    );
  });

  it.each([
    ['P-256', p256Signer],
    ['Ed25519', ed25519Signer],
  ] as const)('%s: sealStatement digest = sha256 of the JCS written out by hand', (_n, make) => {
    const sealed = sealStatement(statement, withKeyId(make(), 'key "quoted" \\ é\n'));
    const [s] = sealed.envelope.signatures;
    const jcs = canonicalize(sealed.envelope);
    expect(jcs).toContain(`"keyid":${JSON.stringify(s?.keyid)}`);
    expect(sealed.digest).toBe(
      `sha256:${createHash('sha256')
        .update(jcs ?? '', 'utf8')
        .digest('hex')}`,
    );
  });
});

describe('strict base64', () => {
  it('accepts only the canonical standard encoding', () => {
    expect(decodeBase64Strict('aGk=')?.toString()).toBe('hi');
    expect(decodeBase64Strict('')?.length).toBe(0);
    for (const bad of ['aGk', 'aGk==', 'aG k=', '-_8=', 'aGl=', 'aGk=\n', 'a===']) {
      expect(decodeBase64Strict(bad), bad).toBeUndefined();
    }
  });
});
