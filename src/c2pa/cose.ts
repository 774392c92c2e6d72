import { X509Certificate, verify, type KeyObject } from 'node:crypto';
import { Tag } from 'cbor-x';
import { digestOf, type SignatureAlgorithm, type Signer } from '../signing/index.ts';
import { decodeCborMaps, encodeCbor } from './cbor.ts';
import { C2paError } from './errors.ts';

/**
 * COSE_Sign1 (RFC 9052) as C2PA 1.4 uses it for the claim signature: tag 18, detached payload
 * (the claim CBOR, `nil` in the structure), protected header with `alg` and `x5chain`
 * (RFC 9360: one certificate as a byte string, several as an array; leaf first, no root).
 */

export const COSE_SIGN1_TAG = 18;
const HEADER_ALG = 1;
const HEADER_X5CHAIN = 33;

/** COSE algorithm identifiers (IANA COSE Algorithms registry). */
const COSE_ALG: Record<SignatureAlgorithm, number> = { ECDSA_P256_SHA256: -7, ED25519: -8 };

function algorithmOfCose(alg: unknown): SignatureAlgorithm | undefined {
  if (alg === -7) return 'ECDSA_P256_SHA256';
  if (alg === -8) return 'ED25519';
  return undefined;
}

/** P-256 scalars are 32 bytes; IEEE P1363 is r ‖ s, each left-padded to that length. */
const P256_SCALAR = 32;

/**
 * DER `SEQUENCE { INTEGER r, INTEGER s }` → IEEE P1363 `r ‖ s`. The `Signer` interface returns
 * DER because DSSE verifiers want it; COSE (RFC 9053 §2.1) wants the fixed-width form.
 */
export function derToP1363(der: Buffer, size = P256_SCALAR): Buffer {
  let offset = 0;
  const fail = (): never => {
    throw new C2paError('INVALID_INPUT', 'signer returned a malformed DER ECDSA signature');
  };
  const readLength = (): number => {
    const first = der[offset++] ?? fail();
    if (first < 0x80) return first;
    if (first !== 0x81) fail();
    return der[offset++] ?? fail();
  };
  if (der[offset++] !== 0x30) fail();
  const seqLength = readLength();
  if (offset + seqLength !== der.length) fail();
  const out = Buffer.alloc(size * 2);
  for (let i = 0; i < 2; i++) {
    if (der[offset++] !== 0x02) fail();
    const length = readLength();
    let value = der.subarray(offset, offset + length);
    if (value.length !== length) fail();
    offset += length;
    while (value.length > 0 && value[0] === 0) value = value.subarray(1);
    if (value.length > size) fail();
    value.copy(out, i * size + (size - value.length));
  }
  if (offset !== der.length) fail();
  return out;
}

function sigStructure(protectedBytes: Buffer, payload: Buffer): Buffer {
  return encodeCbor(['Signature1', protectedBytes, Buffer.alloc(0), payload]);
}

/**
 * Signs `payload` (the claim bytes) and returns COSE_Sign1_Tagged with the payload detached.
 * The chain is `signer.certificateChain` minus any trailing self-signed certificate: the trust
 * anchor is the validator's to hold, not the manifest's to carry.
 */
export function signCose(signer: Signer, payload: Buffer): Buffer {
  const chain = x5chainOf(signer);
  const protectedHeader = new Map<number, unknown>([
    [HEADER_ALG, COSE_ALG[signer.algorithm]],
    [HEADER_X5CHAIN, chain.length === 1 ? chain[0] : chain],
  ]);
  const protectedBytes = encodeCbor(protectedHeader);
  const raw = signer.sign(sigStructure(protectedBytes, payload));
  const signature = signer.algorithm === 'ECDSA_P256_SHA256' ? derToP1363(raw) : raw;
  return encodeCbor(new Tag([protectedBytes, new Map(), null, signature], COSE_SIGN1_TAG));
}

function x5chainOf(signer: Signer): Buffer[] {
  const certs = [...(signer.certificateChain ?? [])];
  const leaf = certs[0];
  if (leaf === undefined) {
    throw new C2paError('INVALID_INPUT', 'C2PA signing needs a signer with an X.509 certificate chain');
  }
  if (
    !leaf.publicKey
      .export({ type: 'spki', format: 'der' })
      .equals(signer.publicKey.export({ type: 'spki', format: 'der' }))
  ) {
    throw new C2paError('INVALID_INPUT', 'signer key does not match its leaf certificate');
  }
  while (certs.length > 1) {
    const last = certs[certs.length - 1] as X509Certificate;
    if (!(last.checkIssued(last) && last.verify(last.publicKey))) break;
    certs.pop();
  }
  return certs.map((c) => c.raw);
}

export interface ParsedCose {
  algorithm: SignatureAlgorithm;
  /** Leaf first. */
  chain: X509Certificate[];
  protectedBytes: Buffer;
  signature: Buffer;
}

function malformed(message: string): C2paError {
  return new C2paError('MALFORMED_MANIFEST', `COSE_Sign1: ${message}`);
}

/** Parses COSE_Sign1_Tagged; throws `C2paError` (MALFORMED_MANIFEST / UNSUPPORTED_MANIFEST). */
export function parseCose(data: Buffer): ParsedCose {
  let decoded: unknown;
  try {
    decoded = decodeCborMaps(data);
  } catch (cause) {
    throw new C2paError('MALFORMED_MANIFEST', 'COSE_Sign1: not CBOR', { cause });
  }
  if (!(decoded instanceof Tag) || decoded.tag !== COSE_SIGN1_TAG) throw malformed('not tagged 18');
  const value: unknown = decoded.value;
  if (!Array.isArray(value) || value.length !== 4) throw malformed('not a four-element array');
  const [protectedBytes, unprotected, payload, signature] = value as unknown[];
  if (!Buffer.isBuffer(protectedBytes) || !Buffer.isBuffer(signature)) {
    throw malformed('protected header or signature is not a byte string');
  }
  if (!(unprotected instanceof Map)) throw malformed('unprotected header is not a map');
  // C2PA signs the claim as detached content; an attached payload would be a second claim copy.
  if (payload !== null) throw malformed('payload is not detached (nil)');
  let protectedHeader: unknown;
  try {
    protectedHeader = protectedBytes.length === 0 ? new Map() : decodeCborMaps(protectedBytes);
  } catch (cause) {
    throw new C2paError('MALFORMED_MANIFEST', 'COSE_Sign1: protected header is not CBOR', { cause });
  }
  if (!(protectedHeader instanceof Map)) throw malformed('protected header is not a map');
  const algorithm = algorithmOfCose(protectedHeader.get(HEADER_ALG));
  if (algorithm === undefined) {
    throw new C2paError(
      'UNSUPPORTED_MANIFEST',
      `COSE_Sign1: unsupported or missing alg ${String(protectedHeader.get(HEADER_ALG))} (ES256 and EdDSA are accepted)`,
    );
  }
  // C2PA 1.4 puts x5chain in the protected header; 1.0–1.2 allowed the unprotected one.
  const x5chain: unknown = protectedHeader.get(HEADER_X5CHAIN) ?? unprotected.get(HEADER_X5CHAIN);
  const ders: unknown[] = Buffer.isBuffer(x5chain) ? [x5chain] : Array.isArray(x5chain) ? x5chain : [];
  if (ders.length === 0 || !ders.every((d) => Buffer.isBuffer(d)))
    throw malformed('x5chain missing or not byte strings');
  const chain = ders.map((der, i) => {
    try {
      const cert = new X509Certificate(der);
      // Node parses the key lazily; a damaged SubjectPublicKeyInfo must fail here, not later.
      void cert.publicKey;
      return cert;
    } catch (cause) {
      throw new C2paError('MALFORMED_MANIFEST', `COSE_Sign1: x5chain certificate #${i + 1} does not parse`, {
        cause,
      });
    }
  });
  return { algorithm, chain, protectedBytes, signature };
}

/** Verifies the signature over the detached `payload` with `key`; false for any bad signature. */
export function verifyCose(cose: ParsedCose, payload: Buffer, key: KeyObject): boolean {
  try {
    return verify(
      digestOf(cose.algorithm),
      sigStructure(cose.protectedBytes, payload),
      cose.algorithm === 'ECDSA_P256_SHA256' ? { key, dsaEncoding: 'ieee-p1363' } : key,
      cose.signature,
    );
  } catch {
    return false;
  }
}
