import type { KeyObject } from 'node:crypto';
import { algorithmOf, verifyWith, type Signer } from '../signing/signer.ts';
import { coseAlgorithmOf } from './algorithms.ts';
import { asBytes, decodeCbor, encodeCbor, isMap, Tag } from './cbor.ts';
import { CoseError } from './errors.ts';

/**
 * COSE_Sign1 (RFC 9052 §4.2), the one implementation shared by C2PA claim signatures and SCITT
 * statements and receipts. Pure: no I/O. Signatures are IEEE P1363 `r ‖ s` for ECDSA (RFC 9053
 * §2.1), asked of the `Signer` directly; Ed25519 signatures are the 64 raw bytes.
 */

export const COSE_SIGN1_TAG = 18;

/**
 * COSE header labels used by this service (IANA COSE Header Parameters; 258–260 RFC 9995 hash
 * envelopes, 394–396 RFC 9942 receipts).
 */
export const Header = {
  alg: 1,
  contentType: 3,
  kid: 4,
  cwtClaims: 15,
  x5chain: 33,
  payloadHashAlg: 258,
  preimageContentType: 259,
  payloadLocation: 260,
  receipts: 394,
  vds: 395,
  vdp: 396,
} as const;

export type HeaderMap = Map<number | string, unknown>;

export interface CoseSign1 {
  /** Whether the bytes carried tag 18 (COSE_Sign1_Tagged). */
  readonly tagged: boolean;
  /** The serialized protected header exactly as received: what the signature covers. */
  readonly protectedBytes: Buffer;
  readonly protectedHeader: HeaderMap;
  readonly unprotectedHeader: HeaderMap;
  /** Null when detached. */
  readonly payload: Buffer | null;
  readonly signature: Buffer;
}

/** Sig_structure for COSE_Sign1 (RFC 9052 §4.4), external_aad empty. */
export function sigStructure(protectedBytes: Uint8Array, payload: Uint8Array): Buffer {
  return encodeCbor(['Signature1', protectedBytes, Buffer.alloc(0), payload]);
}

/** The signed parts of a COSE_Sign1: protected header bytes and the signature over them + payload. */
export interface Sign1Signature {
  readonly protectedBytes: Buffer;
  readonly signature: Buffer;
}

/**
 * Signs `payload` under `protectedHeader` (Sig_structure, RFC 9052 §4.4). The unprotected header is
 * not covered: one signature can be wrapped in many COSE_Sign1 structures that differ only there
 * (how a log's receipts for one tree head share its signature). `alg` must match the signer.
 */
export function signSign1Parts(
  signer: Signer,
  protectedHeader: HeaderMap,
  payload: Uint8Array,
): Sign1Signature {
  const alg = protectedHeader.get(Header.alg);
  if (alg !== coseAlgorithmOf(signer.algorithm)) {
    throw new CoseError(
      'INVALID_INPUT',
      `protected alg ${String(alg)} does not match the ${signer.algorithm} signer`,
    );
  }
  const protectedBytes = encodeCbor(protectedHeader);
  const signature = signer.sign(sigStructure(protectedBytes, payload), 'ieee-p1363');
  return { protectedBytes, signature };
}

/** COSE_Sign1_Tagged from signed parts; `payload` null when detached. */
export function encodeSign1Parts(
  signed: Sign1Signature,
  unprotectedHeader: HeaderMap,
  payload: Uint8Array | null,
): Buffer {
  return encodeCbor(
    new Tag([signed.protectedBytes, unprotectedHeader, payload, signed.signature], COSE_SIGN1_TAG),
  );
}

export interface Sign1Input {
  readonly protectedHeader: HeaderMap;
  readonly unprotectedHeader?: HeaderMap;
  readonly payload: Uint8Array;
  /** Leave the payload out of the structure (`nil`); it still is what gets signed. */
  readonly detached?: boolean;
}

/** Signs and returns COSE_Sign1_Tagged bytes. The protected header's `alg` must match the signer. */
export function signSign1(signer: Signer, input: Sign1Input): Buffer {
  return encodeSign1Parts(
    signSign1Parts(signer, input.protectedHeader, input.payload),
    input.unprotectedHeader ?? (new Map() as HeaderMap),
    input.detached === true ? null : input.payload,
  );
}

/** Re-encodes a parsed COSE_Sign1 as COSE_Sign1_Tagged, with another unprotected header if given. */
export function encodeSign1(
  sign1: CoseSign1,
  unprotectedHeader: HeaderMap = sign1.unprotectedHeader,
): Buffer {
  return encodeSign1Parts(sign1, unprotectedHeader, sign1.payload);
}

/**
 * Parses COSE_Sign1 (tagged 18 or untagged; `tagged` says which). Throws CoseError MALFORMED: the
 * caller translates it into what the bytes were meant to be (a malformed statement, receipt or
 * C2PA claim signature are different failures).
 */
export function parseSign1(bytes: Uint8Array): CoseSign1 {
  const bad = (why: string, cause?: unknown): never => {
    throw new CoseError('MALFORMED', `not a COSE_Sign1: ${why}`, cause !== undefined ? { cause } : {});
  };
  let item: unknown;
  try {
    item = decodeCbor(bytes);
  } catch (cause) {
    bad('not a single CBOR item', cause);
  }
  const tagged = item instanceof Tag;
  if (item instanceof Tag) {
    if (item.tag !== COSE_SIGN1_TAG) bad(`tag ${String(item.tag)} instead of 18`);
    item = item.value;
  }
  if (!Array.isArray(item) || item.length !== 4) bad('not a 4-element array');
  const [p, u, payload, sig] = item as unknown[];
  const protectedBytes = asBytes(p) ?? bad('protected header is not a byte string');
  let protectedHeader: unknown = new Map();
  if (protectedBytes.length > 0) {
    try {
      protectedHeader = decodeCbor(protectedBytes);
    } catch (cause) {
      bad('protected header is not CBOR', cause);
    }
  }
  if (!isMap(protectedHeader)) bad('protected header is not a map');
  if (!isMap(u)) bad('unprotected header is not a map');
  const body = payload === null ? null : (asBytes(payload) ?? bad('payload is neither bytes nor nil'));
  const signature = asBytes(sig) ?? bad('signature is not a byte string');
  return {
    tagged,
    protectedBytes,
    protectedHeader: protectedHeader as HeaderMap,
    unprotectedHeader: u as HeaderMap,
    payload: body,
    signature,
  };
}

/** An ES256 signature in IEEE P1363 form: r ‖ s, 32 bytes each. */
const ES256_SIGNATURE_BYTES = 64;

/**
 * Verifies the signature of a parsed COSE_Sign1 with `key`, over its own payload or over
 * `detachedPayload`. The protected `alg` must be the key's (ES256 with P1363 signatures, EdDSA);
 * false, never a throw, for anything else.
 */
export function verifySign1(sign1: CoseSign1, key: KeyObject, detachedPayload?: Uint8Array): boolean {
  const payload = detachedPayload ?? sign1.payload;
  if (payload === null) return false;
  const algorithm = algorithmOf(key);
  if (algorithm === undefined || sign1.protectedHeader.get(Header.alg) !== coseAlgorithmOf(algorithm)) {
    return false;
  }
  if (algorithm === 'ECDSA_P256_SHA256' && sign1.signature.length !== ES256_SIGNATURE_BYTES) return false;
  return verifyWith(
    algorithm,
    key,
    sigStructure(sign1.protectedBytes, payload),
    sign1.signature,
    'ieee-p1363',
  );
}
