import { keepsNoReference, type Signer } from '../signing/signer.ts';
import { canonicalJson } from './json.ts';
import { inTotoPreAuthEncodingOfText, preAuthEncoding } from './pae.ts';
import type { Statement } from './statement.ts';

export const IN_TOTO_PAYLOAD_TYPE = 'application/vnd.in-toto+json';

export interface DsseSignature {
  /** Hint only (DSSE): `Signer.keyId`, i.e. `sha256:<hex of SPKI DER>`. Never trusted for verification. */
  keyid: string;
  /** Standard base64 (with padding) of the raw signature: ASN.1 DER for ECDSA, 64 bytes for Ed25519. */
  sig: string;
}

export interface DsseEnvelope {
  /** Standard base64 (with padding) of the payload bytes. */
  payload: string;
  payloadType: string;
  signatures: DsseSignature[];
}

/**
 * Statement payload bytes: the RFC 8785 canonical JSON of the statement, UTF-8. Canonical so that
 * the same statement always yields the same payload (golden files compare bytes, and a re-signing
 * produces an identical payload); consumers need not care, any JSON parser reads it.
 */
export function statementPayload(statement: Statement): Buffer {
  return Buffer.from(canonicalJson(statement), 'utf8');
}

/** Signs `payload` under DSSE v1 with one signer. */
export function signPayload(payload: Buffer, payloadType: string, signer: Signer): DsseEnvelope {
  return envelopeOf(payload, payloadType, signer.keyId, signer.sign(preAuthEncoding(payloadType, payload)));
}

/**
 * The envelope of one signature. Its member order is JCS order and `payload`/`sig` are standard
 * base64 as Buffer#toString writes it: sealStatement relies on both (digest.ts, signedEnvelopeDigest).
 */
function envelopeOf(payload: Buffer, payloadType: string, keyid: string, sig: Buffer): DsseEnvelope {
  return {
    payload: payload.toString('base64'),
    payloadType,
    signatures: [{ keyid, sig: sig.toString('base64') }],
  };
}

/**
 * Wraps an in-toto statement in a signed DSSE envelope: the same bytes as
 * `signPayload(statementPayload(statement), IN_TOTO_PAYLOAD_TYPE, signer)`, with the canonical JSON
 * written straight into the PAE buffer (one allocation, no copy of the payload).
 */
export function signStatement(statement: Statement, signer: Signer): DsseEnvelope {
  // A signer that keeps no reference to what it signs gets the PAE in the reused buffer: nothing
  // else runs between writing it and the payload's base64 in envelopeOf (all synchronous).
  const { pae, payload } = inTotoPreAuthEncodingOfText(canonicalJson(statement), keepsNoReference(signer));
  return envelopeOf(payload, IN_TOTO_PAYLOAD_TYPE, signer.keyId, signer.sign(pae));
}

const STD_BASE64 = /^(?:[A-Za-z0-9+/]{4})*(?:[A-Za-z0-9+/]{2}==|[A-Za-z0-9+/]{3}=)?$/;

/**
 * Strict standard-base64 decoding: undefined unless `text` is the canonical encoding of its bytes.
 * `Buffer.from(…, 'base64')` would skip junk and accept URL-safe text, so that two different
 * envelope strings (hence two digests) could carry the same signed bytes.
 */
export function decodeBase64Strict(text: string): Buffer | undefined {
  if (!STD_BASE64.test(text)) return undefined;
  const bytes = Buffer.from(text, 'base64');
  return bytes.toString('base64') === text ? bytes : undefined;
}
