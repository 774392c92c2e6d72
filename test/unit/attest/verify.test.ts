import { generateKeyPairSync, type X509Certificate } from 'node:crypto';
import { beforeAll, describe, expect, it } from 'vitest';
import {
  VerificationError,
  aibomStatement,
  artifactStatement,
  assertVerified,
  capabilityStatement,
  envelopeDigest,
  policyStatement,
  runStatement,
  sealStatement,
  signPayload,
  stepStatement,
  type DsseEnvelope,
  type ProblemCode,
  type Statement,
  type Trust,
} from '../../../src/attest/index.ts';
import { verifyRecord } from '../../../src/attest/verify.ts';
import { generateDevPki } from '../../../hack/dev-pki.ts';
import type { KeySigner } from '../../../src/signing/key-signer.ts';
import { parseCertificates } from '../../../src/signing/pem.ts';
import type { Signer } from '../../../src/signing/signer.ts';
import { signerFromPem } from '../../../src/signing/tls.ts';
import {
  aibomInput,
  artifactInput,
  capabilityInput,
  modelStepInput,
  policyInput,
  runInput,
  toolStepInput,
} from './fixtures.ts';
import { ed25519Signer, p256Signer } from './keys.ts';

const DAY = 86_400_000;

/** A record as the API returns it: envelope + digest, and unrelated fields the verifier must ignore. */
function record(
  statement: Statement,
  signer: Signer,
): Record<string, unknown> & { envelope: DsseEnvelope; digest: string } {
  const sealed = sealStatement(statement, signer);
  return {
    id: '0190f3a0-7c1e-7a4b-9d2e-0000000000aa',
    predicate_type: statement.predicateType,
    predicate: statement.predicate,
    signature: sealed.signature,
    transparency: { status: 'queued', job_id: 'j-1' },
    envelope: sealed.envelope,
    digest: sealed.digest,
  };
}

/** Signs an arbitrary statement, bypassing the builders' schema check (an attacker or a bug). */
function forged(statement: unknown, signer: Signer, payloadType = 'application/vnd.in-toto+json') {
  const envelope = signPayload(Buffer.from(JSON.stringify(statement)), payloadType, signer);
  return { envelope, digest: envelopeDigest(envelope) };
}

function codes(rec: unknown, trust: Trust): ProblemCode[] {
  return verifyRecord(rec, trust).problems.map((p) => p.code);
}

const statements: [string, () => Statement][] = [
  ['run', () => runStatement(runInput)],
  ['model step', () => stepStatement(modelStepInput)],
  ['tool step', () => stepStatement(toolStepInput)],
  ['artifact', () => artifactStatement(artifactInput)],
  ['policy', () => policyStatement(policyInput)],
  ['capability', () => capabilityStatement(capabilityInput)],
  ['aibom', () => aibomStatement(aibomInput)],
];

let pkiSigner: KeySigner;
let chain: X509Certificate[];
let anchors: X509Certificate[];
let foreignAnchors: X509Certificate[];

beforeAll(async () => {
  const pki = await generateDevPki({ intermediate: true });
  pkiSigner = signerFromPem(pki);
  chain = [...(pkiSigner.certificateChain ?? [])];
  anchors = parseCertificates(pki['ca.crt'], 'ca.crt');
  foreignAnchors = parseCertificates((await generateDevPki())['ca.crt'], 'ca.crt');
});

describe('verifyRecord: valid records', () => {
  it.each(statements)('%s statement verifies with the public key (P-256 and Ed25519)', (_name, build) => {
    for (const signer of [p256Signer(), ed25519Signer()]) {
      const statement = build();
      const result = verifyRecord(record(statement, signer), { publicKeys: [signer.publicKey] });
      expect(result.problems).toEqual([]);
      expect(result.ok).toBe(true);
      expect(result.keyId).toBe(signer.keyId);
      expect(result.predicateType).toBe(statement.predicateType);
      expect(result.statement).toEqual(statement);
    }
  });

  it('verifies through a certificate chain (leaf + intermediate) to the trust anchor', () => {
    const result = verifyRecord(record(stepStatement(modelStepInput), pkiSigner), {
      certificateChain: chain,
      trustAnchors: anchors,
    });
    expect(result.problems).toEqual([]);
    expect(result.ok).toBe(true);
    expect(result.keyId).toBe(pkiSigner.keyId);
  });

  it('accepts a record with only envelope and digest', () => {
    const signer = p256Signer();
    const { envelope, digest } = record(policyStatement(policyInput), signer);
    expect(verifyRecord({ envelope, digest }, { publicKeys: [signer.publicKey] }).ok).toBe(true);
  });

  it('accepts when one of several signatures is by a trusted key', () => {
    const trusted = p256Signer();
    const other = ed25519Signer();
    const rec = record(artifactStatement(artifactInput), trusted);
    const extra = signPayload(Buffer.from(rec.envelope.payload, 'base64'), rec.envelope.payloadType, other);
    rec.envelope.signatures.unshift(...extra.signatures);
    rec.digest = envelopeDigest(rec.envelope);
    expect(verifyRecord(rec, { publicKeys: [trusted.publicKey] }).ok).toBe(true);
  });
});

describe('verifyRecord: tampering is reported with the right code', () => {
  const signer = p256Signer();
  const trust: Trust = { publicKeys: [signer.publicKey] };
  const fresh = () => record(stepStatement(modelStepInput), signer);

  it('payload byte changed', () => {
    const { envelope, digest } = fresh(); // without the unsigned predicate projection
    const rec = { envelope, digest };
    const payload = Buffer.from(rec.envelope.payload, 'base64');
    const at = payload.indexOf('10:02:10Z');
    payload[at + 7] = '9'.charCodeAt(0); // still a valid statement, only the signature breaks
    rec.envelope.payload = payload.toString('base64');
    expect(codes(rec, trust)).toEqual(['DIGEST_MISMATCH', 'SIGNATURE_INVALID']);
    // An attacker who also recomputes the digest is still caught by the signature.
    rec.digest = envelopeDigest(rec.envelope);
    expect(codes(rec, trust)).toEqual(['SIGNATURE_INVALID']);
  });

  it('signature changed', () => {
    const rec = fresh();
    const sig = Buffer.from(rec.envelope.signatures[0]?.sig ?? '', 'base64');
    sig.writeUInt8(sig.readUInt8(sig.length - 1) ^ 0x01, sig.length - 1);
    (rec.envelope.signatures[0] as { sig: string }).sig = sig.toString('base64');
    expect(codes(rec, trust)).toEqual(['DIGEST_MISMATCH', 'SIGNATURE_INVALID']);
    rec.digest = envelopeDigest(rec.envelope);
    expect(codes(rec, trust)).toEqual(['SIGNATURE_INVALID']);
  });

  it('digest changed', () => {
    const rec = fresh();
    rec.digest = `sha256:${'0'.repeat(64)}`;
    expect(codes(rec, trust)).toEqual(['DIGEST_MISMATCH']);
    rec.digest = 'sha256:XYZ';
    expect(codes(rec, trust)).toEqual(['MALFORMED_ENVELOPE']);
  });

  it('predicate field invalid, signed by a trusted key', () => {
    const bad = { ...stepStatement(modelStepInput) };
    bad.predicate = { ...bad.predicate, phase: 'running' as 'succeeded' };
    expect(codes(forged(bad, signer), trust)).toEqual(['PREDICATE_INVALID']);
  });

  it('subject not matching the predicate, signed by a trusted key', () => {
    const bad = stepStatement(modelStepInput);
    bad.subject = [{ name: 'step:other:summarize', digest: bad.subject[0]?.digest ?? { sha256: '' } }];
    expect(codes(forged(bad, signer), trust)).toEqual(['STATEMENT_INVALID']);
  });

  it('payload not an in-toto statement', () => {
    expect(codes(forged({ hello: 'world' }, signer), trust)).toEqual(['STATEMENT_INVALID']);
    const notJson = signPayload(Buffer.from('not json'), 'application/vnd.in-toto+json', signer);
    expect(codes({ envelope: notJson, digest: envelopeDigest(notJson) }, trust)).toEqual([
      'STATEMENT_INVALID',
    ]);
  });

  it('unknown predicate type', () => {
    const other = { ...stepStatement(modelStepInput), predicateType: 'https://example.com/other/v1' };
    expect(codes(forged(other, signer), trust)).toEqual(['PREDICATE_TYPE_UNSUPPORTED']);
  });

  it('payload type other than in-toto', () => {
    expect(codes(forged(stepStatement(modelStepInput), signer, 'application/json'), trust)).toEqual([
      'PAYLOAD_TYPE_UNSUPPORTED',
    ]);
  });

  it('unsigned record fields disagreeing with the signed statement', () => {
    const rec = fresh();
    rec.predicate_type = 'https://vault.service.dev/attestations/policy/v1';
    expect(codes(rec, trust)).toEqual(['RECORD_MISMATCH']);
    const rec2 = fresh();
    rec2.predicate = { ...(rec2.predicate as object), phase: 'failed' };
    expect(codes(rec2, trust)).toEqual(['RECORD_MISMATCH']);
  });

  it('wrong key', () => {
    const rec = fresh();
    expect(codes(rec, { publicKeys: [p256Signer().publicKey] })).toEqual(['UNTRUSTED_KEY']);
    expect(codes(rec, { publicKeys: [] })).toEqual(['UNTRUSTED_KEY']);
    const rsa = generateKeyPairSync('rsa', { modulusLength: 2048 }).publicKey;
    expect(codes(rec, { publicKeys: [rsa] })).toEqual(['UNTRUSTED_KEY']);
  });

  it('certificate chain not leading to the trust anchor', () => {
    const rec = record(stepStatement(modelStepInput), pkiSigner);
    expect(codes(rec, { certificateChain: chain, trustAnchors: foreignAnchors })).toEqual(['UNTRUSTED_KEY']);
    // Intermediate missing: the leaf alone does not reach the root.
    expect(codes(rec, { certificateChain: chain.slice(0, 1), trustAnchors: anchors })).toEqual([
      'UNTRUSTED_KEY',
    ]);
  });

  it('chain valid but the record was signed by another key', () => {
    const rec = fresh();
    expect(codes(rec, { certificateChain: chain, trustAnchors: anchors })).toEqual(['UNTRUSTED_KEY']);
  });

  it('expired and not yet valid certificates', async () => {
    const now = Date.now();
    const pki = await generateDevPki({
      caNotBefore: new Date(now - 10 * DAY),
      notBefore: new Date(now - 3 * DAY),
      notAfter: new Date(now - DAY),
    });
    const expired = signerFromPem(pki, { at: new Date(now - 2 * DAY) });
    const rec = record(stepStatement(modelStepInput), expired);
    const trustAt = (at?: Date): Trust => ({
      certificateChain: expired.certificateChain ?? [],
      trustAnchors: parseCertificates(pki['ca.crt'], 'ca.crt'),
      ...(at !== undefined ? { at } : {}),
    });
    expect(codes(rec, trustAt())).toEqual(['CERTIFICATE_EXPIRED']);
    expect(codes(rec, trustAt(new Date(now - 2 * DAY)))).toEqual([]);
    expect(codes(rec, trustAt(new Date(now - 4 * DAY)))).toEqual(['CERTIFICATE_NOT_YET_VALID']);
  });

  it('malformed records and envelopes', () => {
    const rec = fresh();
    const cases: unknown[] = [
      null,
      'x',
      { digest: rec.digest },
      { envelope: { ...rec.envelope, signatures: [] }, digest: rec.digest },
      { envelope: { ...rec.envelope, payload: 42 }, digest: rec.digest },
      { envelope: { ...rec.envelope, signatures: [{ keyid: 'k' }] }, digest: rec.digest },
    ];
    for (const c of cases) expect(codes(c, trust), JSON.stringify(c)).toEqual(['MALFORMED_ENVELOPE']);
    const urlSafe = {
      ...rec,
      envelope: { ...rec.envelope, payload: rec.envelope.payload.replace(/=+$/, '') },
    };
    expect(codes(urlSafe, trust)).toContain('MALFORMED_ENVELOPE');
  });
});

describe('assertVerified', () => {
  it('throws a VerificationError carrying the first code and all problems', () => {
    const signer = p256Signer();
    const rec = record(policyStatement(policyInput), signer);
    rec.digest = `sha256:${'1'.repeat(64)}`;
    const result = verifyRecord(rec, { publicKeys: [p256Signer().publicKey] });
    expect(() => assertVerified(result)).toThrow(VerificationError);
    try {
      assertVerified(result);
    } catch (err) {
      expect((err as VerificationError).code).toBe('DIGEST_MISMATCH');
      expect((err as VerificationError).problems.map((p) => p.code)).toEqual([
        'DIGEST_MISMATCH',
        'UNTRUSTED_KEY',
      ]);
    }
    const good = verifyRecord(record(policyStatement(policyInput), signer), {
      publicKeys: [signer.publicKey],
    });
    expect(() => assertVerified(good)).not.toThrow();
  });
});
