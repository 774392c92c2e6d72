import { createPublicKey, hash, verify, X509Certificate, type KeyObject, type JsonWebKey } from 'node:crypto';
import { envelopeDigest } from '../attest/digest.ts';
import type { DsseEnvelope } from '../attest/dsse.ts';
import { validateChain } from '../signing/chain.ts';
import { algorithmOf, type SignatureAlgorithm, type Signer } from '../signing/signer.ts';
import {
  asBytes,
  asInt,
  asUint,
  cborBytes,
  cborHead,
  cborHeadLength,
  CborMajor,
  cborUint,
  decodeCbor,
  encodeCbor,
  isMap,
  Tag,
} from './cbor.ts';
import { didX509, matchDidX509, type DidX509Policy } from './did-x509.ts';
import { TransparencyError, type TransparencyErrorCode } from './errors.ts';

/**
 * COSE_Sign1 (RFC 9052 §4.2) for SCITT: signed statements (this file) and receipts (receipt.ts).
 * Pure: no I/O. Signatures are made by a `Signer` (which returns ASN.1 DER for ECDSA, what DSSE
 * wants) and converted to IEEE P1363 r‖s, which COSE requires (RFC 9053 §2.1).
 */

export const COSE_SIGN1_TAG = 18;

/** COSE header labels used here (IANA COSE Header Parameters; 258-260 RFC 9995, 394-396 RFC 9942). */
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

/** CWT claim keys (RFC 8392) used in header 15 (RFC 9597). */
export const Claim = { iss: 1, sub: 2, iat: 6 } as const;

/** COSE algorithm identifiers. */
export const CoseAlg = { ES256: -7, EdDSA: -8, SHA256: -16 } as const;

/** Media types of the SCITT wire protocol and of our statement preimage. */
export const MediaType = {
  cose: 'application/cose',
  cbor: 'application/cbor',
  problem: 'application/concise-problem-details+cbor',
  /** What the hash in a statement is the hash of: the RFC 8785 JSON of a DSSE envelope. */
  dsseEnvelope: 'application/vnd.dsse.envelope+json',
} as const;

export type HeaderMap = Map<number | string, unknown>;

export interface CoseSign1 {
  /** The serialized protected header exactly as received: what the signature covers. */
  readonly protectedBytes: Buffer;
  readonly protectedHeader: HeaderMap;
  readonly unprotectedHeader: HeaderMap;
  /** Null when detached. */
  readonly payload: Buffer | null;
  readonly signature: Buffer;
}

const COSE_ALG: Record<SignatureAlgorithm, number> = {
  ECDSA_P256_SHA256: CoseAlg.ES256,
  ED25519: CoseAlg.EdDSA,
};

export function coseAlgorithmOf(algorithm: SignatureAlgorithm): number {
  return COSE_ALG[algorithm];
}

/** P-256 scalar size; IEEE P1363 is r ‖ s, each left-padded to it. */
const P256_SCALAR = 32;

/** DER `SEQUENCE { INTEGER r, INTEGER s }` → IEEE P1363 `r ‖ s` (throws on malformed DER). */
export function derToP1363(der: Buffer, size = P256_SCALAR): Buffer {
  let at = 0;
  const fail = (): never => {
    throw new TypeError('malformed DER ECDSA signature');
  };
  const length = (): number => {
    const first = der[at++] ?? fail();
    if (first < 0x80) return first;
    if (first !== 0x81) fail();
    return der[at++] ?? fail();
  };
  if (der[at++] !== 0x30) fail();
  const sequence = length();
  if (at + sequence !== der.length) fail();
  const out = Buffer.alloc(size * 2);
  for (let i = 0; i < 2; i++) {
    if (der[at++] !== 0x02) fail();
    const len = length();
    let value = der.subarray(at, at + len);
    if (value.length !== len) fail();
    at += len;
    while (value.length > 0 && value[0] === 0) value = value.subarray(1);
    if (value.length > size) fail();
    value.copy(out, i * size + (size - value.length));
  }
  if (at !== der.length) fail();
  return out;
}

/** Sig_structure for COSE_Sign1 (RFC 9052 §4.4), external_aad empty. */
export function sigStructure(protectedBytes: Uint8Array, payload: Uint8Array): Buffer {
  return encodeCbor(['Signature1', protectedBytes, Buffer.alloc(0), payload]);
}

export interface Sign1Input {
  readonly protectedHeader: HeaderMap;
  readonly unprotectedHeader?: HeaderMap;
  readonly payload: Uint8Array;
  /** Leave the payload out of the structure (`nil`); it still is what gets signed. */
  readonly detached?: boolean;
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
  if (alg !== COSE_ALG[signer.algorithm]) {
    throw new TypeError(`protected alg ${String(alg)} does not match the ${signer.algorithm} signer`);
  }
  const protectedBytes = encodeCbor(protectedHeader);
  const raw = signer.sign(sigStructure(protectedBytes, payload));
  const signature = signer.algorithm === 'ECDSA_P256_SHA256' ? derToP1363(raw) : raw;
  return { protectedBytes, signature };
}

/** CBOR `nil`, `{}`: fixed one-byte items. */
const CBOR_NIL = Buffer.from([0xf6]);
const CBOR_EMPTY_MAP = Buffer.from([0xa0]);
/** Tag 18 + array of 4: the start of every COSE_Sign1_Tagged. */
const SIGN1_START = Buffer.concat([cborHead(CborMajor.tag, COSE_SIGN1_TAG), cborHead(CborMajor.array, 4)]);

/**
 * COSE_Sign1_Tagged from signed parts; `payload` null when detached. `unprotected` is a header map
 * or its encoded bytes (a receipt's proofs, assembled by the caller). Assembled directly rather
 * than through the generic encoder (same bytes, checked in the unit tests): the log builds one per
 * entry and one per receipt.
 */
export function encodeSign1Parts(
  signed: Sign1Signature,
  unprotected: HeaderMap | Buffer,
  payload: Uint8Array | null,
): Buffer {
  const header = Buffer.isBuffer(unprotected)
    ? unprotected
    : unprotected.size === 0
      ? CBOR_EMPTY_MAP
      : encodeCbor(unprotected);
  return Buffer.concat([
    SIGN1_START,
    ...cborBytes(signed.protectedBytes),
    header,
    ...(payload === null ? [CBOR_NIL] : cborBytes(payload)),
    ...cborBytes(signed.signature),
  ]);
}

/**
 * The log entry of a statement: COSE_Sign1_Tagged with an empty unprotected header, in preferred
 * serialisation (what `encodeSign1(sign1, new Map())` writes). When the input already is exactly
 * that — tagged, unprotected header empty, and as long as the shortest encoding of its parts
 * (any longer head, indefinite length or extra byte would show in the length) — its bytes are
 * copied instead of re-encoded.
 */
export function sign1Entry(bytes: Uint8Array, sign1: CoseSign1): Buffer {
  const item = (n: number): number => cborHeadLength(n) + n;
  const shortest =
    2 +
    item(sign1.protectedBytes.length) +
    1 +
    (sign1.payload === null ? 1 : item(sign1.payload.length)) +
    item(sign1.signature.length);
  if (sign1.unprotectedHeader.size === 0 && bytes[0] === 0xd2 && bytes.length === shortest) {
    return Buffer.from(bytes);
  }
  return encodeSign1(sign1, new Map());
}

/** Signs and returns COSE_Sign1_Tagged bytes. The protected header's `alg` must match the signer. */
export function signSign1(signer: Signer, input: Sign1Input): Buffer {
  return encodeSign1Parts(
    signSign1Parts(signer, input.protectedHeader, input.payload),
    input.unprotectedHeader ?? (new Map() as HeaderMap),
    input.detached === true ? null : input.payload,
  );
}

/**
 * Parses COSE_Sign1 (tagged 18 or untagged). Throws TransparencyError with `code` (the caller
 * says which: a malformed statement and a malformed receipt are different failures).
 */
export function decodeSign1(bytes: Uint8Array, code: TransparencyErrorCode): CoseSign1 {
  const bad = (why: string, cause?: unknown): never => {
    throw new TransparencyError(code, `not a COSE_Sign1: ${why}`, cause !== undefined ? { cause } : {});
  };
  let item: unknown;
  try {
    item = decodeCbor(bytes);
  } catch (cause) {
    bad('not a single CBOR item', cause);
  }
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
    protectedBytes,
    protectedHeader: protectedHeader as HeaderMap,
    unprotectedHeader: u as HeaderMap,
    payload: body,
    signature,
  };
}

/** Re-encodes a parsed COSE_Sign1 as COSE_Sign1_Tagged with another unprotected header. */
export function encodeSign1(
  sign1: CoseSign1,
  unprotectedHeader: HeaderMap = sign1.unprotectedHeader,
): Buffer {
  return encodeSign1Parts(sign1, unprotectedHeader, sign1.payload);
}

/**
 * Verifies the signature of a parsed COSE_Sign1 with `key`, over its own payload or over
 * `detachedPayload`. ES256 (P1363) and EdDSA only; false, never a throw, for anything else.
 */
export function verifySign1(sign1: CoseSign1, key: KeyObject, detachedPayload?: Uint8Array): boolean {
  const payload = detachedPayload ?? sign1.payload;
  if (payload === null) return false;
  const alg = sign1.protectedHeader.get(Header.alg);
  const keyAlg = algorithmOf(key);
  if (keyAlg === undefined || alg !== COSE_ALG[keyAlg]) return false;
  const data = sigStructure(sign1.protectedBytes, payload);
  try {
    return keyAlg === 'ED25519'
      ? verify(null, data, key, sign1.signature)
      : sign1.signature.length === 2 * P256_SCALAR &&
          verify('sha256', data, { key, dsaEncoding: 'ieee-p1363' }, sign1.signature);
  } catch {
    return false;
  }
}

// --- Signed statements --------------------------------------------------------------------------

/**
 * Certificate chain carried in a statement's x5chain: the signer's chain (leaf, intermediates)
 * plus the root that issued its last certificate when `caCertificates` has it. Unlike C2PA, a
 * SCITT statement carries its root: did:x509 pins a CA that must be in the chain the verifier
 * sees, and pinning the root keeps the issuer id stable across intermediate rotations.
 */
export function statementChain(
  signer: Signer,
  caCertificates: readonly X509Certificate[] = [],
): X509Certificate[] {
  const chain = [...(signer.certificateChain ?? [])];
  const top = chain.at(-1);
  if (top === undefined) {
    throw new TransparencyError('ISSUER_UNAVAILABLE', 'the statement signer has no certificate chain');
  }
  const selfSigned = top.checkIssued(top) && top.verify(top.publicKey);
  if (!selfSigned) {
    const root = caCertificates.find((ca) => ca.ca && top.checkIssued(ca) && top.verify(ca.publicKey));
    if (root !== undefined && !root.raw.equals(top.raw)) chain.push(root);
  }
  return chain;
}

export interface StatementInput {
  /** The attestation id (UUIDv7): the statement's CWT `sub`. */
  readonly attestationId: string;
  /** The vault envelope; the statement signs SHA-256 over its RFC 8785 JSON (= the vault digest). */
  readonly envelope: DsseEnvelope;
  /** When given, must equal the recomputed digest (`sha256:<hex>`), else ATTESTATION_DIGEST_MISMATCH. */
  readonly digest?: string;
  /** The service signer; needs a certificate chain. */
  readonly signer: Signer;
  /** Roots (`ca.crt`); the one that issued the chain goes into x5chain and is pinned by did:x509. */
  readonly caCertificates?: readonly X509Certificate[];
  readonly issuerPolicy?: DidX509Policy;
  /** Where the preimage (the envelope) can be fetched, e.g. the attestation's API URL (header 260). */
  readonly payloadLocation?: string;
  /** Issued-at, seconds since the epoch; default now. */
  readonly issuedAt?: number;
}

export interface SignedStatement {
  /** COSE_Sign1_Tagged bytes. */
  readonly bytes: Buffer;
  readonly issuer: string;
  readonly subject: string;
  /** The payload: SHA-256 of the envelope's RFC 8785 JSON. */
  readonly payloadHash: Buffer;
}

/**
 * Builds the SCITT signed statement for one attestation: a COSE Hash Envelope (RFC 9995) whose
 * payload is the 32-byte SHA-256 of the DSSE envelope's RFC 8785 JSON, i.e. exactly the vault's
 * `digest` of that attestation. Protected header:
 *
 *   1: alg (-7 ES256 / -8 EdDSA)          33: x5chain (leaf first, root included)
 *   15: { 1: iss did:x509, 2: sub attestation id, 6: iat }
 *   258: -16 (SHA-256)   259: "application/vnd.dsse.envelope+json"   260: location (optional)
 *
 * No content type (3): RFC 9995 forbids it next to 259. Why a hash and not the envelope: the
 * statement goes to a remote log that keeps it forever and shows it to anyone; the envelope holds
 * tenant data (run ids, model names, prompts' digests) that must not leak there, and the digest
 * already commits to every byte of it. A verifier holding the exported envelope recomputes the
 * digest (docs/digest.md) and compares it with the payload.
 */
interface IssuerIdentity {
  readonly caCertificates: readonly X509Certificate[] | undefined;
  readonly policy: StatementInput['issuerPolicy'];
  readonly chain: X509Certificate[];
  readonly issuer: string;
}

/** The last identity derived per signer: chain checks and did:x509 cost ~70 µs per statement. */
const issuerCache = new WeakMap<Signer, IssuerIdentity>();

/**
 * x5chain and did:x509 issuer of a signer. A signer's key and certificates never change once
 * loaded (a rotated Secret makes a new Signer), so the result is reused while the same CA list
 * and issuer policy are passed.
 */
function issuerOf(
  signer: Signer,
  caCertificates: readonly X509Certificate[] | undefined,
  policy: StatementInput['issuerPolicy'],
): IssuerIdentity {
  const cached = issuerCache.get(signer);
  if (cached !== undefined && cached.caCertificates === caCertificates && cached.policy === policy) {
    return cached;
  }
  const chain = statementChain(signer, caCertificates);
  const issuer = didX509(chain, policy !== undefined ? { policy } : {});
  const identity: IssuerIdentity = { caCertificates, policy, chain, issuer };
  issuerCache.set(signer, identity);
  return identity;
}

export function buildSignedStatement(input: StatementInput): SignedStatement {
  const digest = envelopeDigest(input.envelope);
  if (input.digest !== undefined && input.digest !== digest) {
    throw new TransparencyError(
      'ATTESTATION_DIGEST_MISMATCH',
      `attestation ${input.attestationId}: stored digest ${input.digest} but the envelope hashes to ${digest}`,
      { retryable: false },
    );
  }
  const payloadHash = Buffer.from(digest.slice('sha256:'.length), 'hex');
  const { chain, issuer } = issuerOf(input.signer, input.caCertificates, input.issuerPolicy);
  const claims = new Map<number, unknown>([
    [Claim.iss, issuer],
    [Claim.sub, input.attestationId],
    [Claim.iat, cborUint(input.issuedAt ?? Math.floor(Date.now() / 1000))],
  ]);
  const protectedHeader: HeaderMap = new Map<number, unknown>([
    [Header.alg, COSE_ALG[input.signer.algorithm]],
    [Header.cwtClaims, claims],
    [Header.x5chain, chain.map((c) => c.raw)],
    [Header.payloadHashAlg, CoseAlg.SHA256],
    [Header.preimageContentType, MediaType.dsseEnvelope],
  ]);
  if (input.payloadLocation !== undefined) protectedHeader.set(Header.payloadLocation, input.payloadLocation);
  const bytes = signSign1(input.signer, { protectedHeader, payload: payloadHash });
  return { bytes, issuer, subject: input.attestationId, payloadHash };
}

export interface StatementClaims {
  readonly issuer: string;
  readonly subject: string;
  readonly issuedAt?: number;
}

/** CWT claims (header 15) of a protected header; undefined unless iss and sub are strings. */
export function cwtClaims(header: HeaderMap): StatementClaims | undefined {
  const claims = header.get(Header.cwtClaims);
  if (!isMap(claims)) return undefined;
  const iss = claims.get(Claim.iss);
  const sub = claims.get(Claim.sub);
  if (typeof iss !== 'string' || typeof sub !== 'string' || iss === '' || sub === '') return undefined;
  const iat = asInt(claims.get(Claim.iat));
  return { issuer: iss, subject: sub, ...(iat !== undefined ? { issuedAt: iat } : {}) };
}

/** The x5chain (header 33) of a protected header: one bstr or an array of them (RFC 9360). */
export function x5chainOf(header: HeaderMap): X509Certificate[] | undefined {
  const value = header.get(Header.x5chain);
  const items = Array.isArray(value) ? (value as unknown[]) : [value];
  if (items.length === 0 || items.length > 8) return undefined;
  const out: X509Certificate[] = [];
  for (const item of items) {
    const der = asBytes(item);
    if (der === undefined) return undefined;
    try {
      out.push(new X509Certificate(der));
    } catch {
      return undefined;
    }
  }
  return out;
}

export interface VerifiedStatement extends StatementClaims {
  readonly sign1: CoseSign1;
  readonly chain: readonly X509Certificate[];
  /** The payload (for our statements, the envelope digest). */
  readonly payload: Buffer;
  readonly payloadHashAlg?: number;
  readonly preimageContentType?: string;
}

export interface VerifyStatementOptions {
  /**
   * Roots the x5chain must lead to (the registration policy's trust anchors). Without them only
   * the signature and the did:x509 binding are checked: acceptable for a dry-run log, not for a
   * public service.
   */
  readonly trustAnchors?: readonly X509Certificate[];
  /** Time the chain must be valid at; default now. */
  readonly at?: Date;
  /** The payload when the statement's is detached. */
  readonly detachedPayload?: Uint8Array;
}

/**
 * What a transparency service checks at registration (SCITT architecture §"Registration"):
 * COSE_Sign1 with alg, x5chain and CWT iss/sub in the protected header; signature by the x5chain
 * leaf; `iss` a did:x509 that resolves against the x5chain; the chain valid up to a trust anchor
 * when anchors are given. Throws TransparencyError (MALFORMED_STATEMENT,
 * STATEMENT_SIGNATURE_INVALID, ISSUER_MISMATCH, UNTRUSTED_ISSUER).
 */
export function verifySignedStatement(
  bytes: Uint8Array,
  options: VerifyStatementOptions = {},
): VerifiedStatement {
  const sign1 = decodeSign1(bytes, 'MALFORMED_STATEMENT');
  const malformed = (why: string): never => {
    throw new TransparencyError('MALFORMED_STATEMENT', why, { retryable: false });
  };
  const claims = cwtClaims(sign1.protectedHeader) ?? malformed('protected CWT claims lack iss or sub');
  const chain = x5chainOf(sign1.protectedHeader) ?? malformed('protected header has no usable x5chain');
  const leaf = chain[0]!;
  const payload =
    options.detachedPayload !== undefined
      ? Buffer.from(options.detachedPayload)
      : (sign1.payload ?? malformed('detached payload not supplied'));
  if (!verifySign1(sign1, leaf.publicKey, payload)) {
    throw new TransparencyError(
      'STATEMENT_SIGNATURE_INVALID',
      'the statement signature does not verify with its x5chain leaf',
      { retryable: false },
    );
  }
  const match = matchDidX509(claims.issuer, chain);
  if (!match.ok) {
    throw new TransparencyError('ISSUER_MISMATCH', `iss ${claims.issuer}: ${match.reason}`, {
      retryable: false,
    });
  }
  if (options.trustAnchors !== undefined) {
    const result = validateChain(chain, options.trustAnchors, options.at ?? new Date());
    if (!result.ok) throw new TransparencyError('UNTRUSTED_ISSUER', result.message, { retryable: false });
  }
  const hashAlg = asInt(sign1.protectedHeader.get(Header.payloadHashAlg));
  const preimage = sign1.protectedHeader.get(Header.preimageContentType);
  return {
    ...claims,
    sign1,
    chain,
    payload,
    ...(hashAlg !== undefined ? { payloadHashAlg: hashAlg } : {}),
    ...(typeof preimage === 'string' ? { preimageContentType: preimage } : {}),
  };
}

// --- COSE keys (RFC 9052 §7) for /.well-known/scitt-keys ----------------------------------------

const KTY_OKP = 1;
const KTY_EC2 = 2;
const CRV_P256 = 1;
const CRV_ED25519 = 6;

/** A log's public key with its COSE key id. */
export interface LogKey {
  /** COSE `kid`: SHA-256 of the DER SubjectPublicKeyInfo (the hex of `keyIdOf`). */
  readonly kid: Buffer;
  readonly key: KeyObject;
}

/** kid of a public key: raw SHA-256 over its SPKI DER (hex-identical to src/signing `keyIdOf`). */
const kidCache = new WeakMap<KeyObject, Buffer>();

/** SHA-256 of the SPKI; cached per KeyObject (exporting the SPKI costs ~0.1 ms, once per receipt before). */
export function coseKid(publicKey: KeyObject): Buffer {
  let kid = kidCache.get(publicKey);
  if (kid === undefined) {
    kid = hash('sha256', publicKey.export({ type: 'spki', format: 'der' }), 'buffer');
    kidCache.set(publicKey, kid);
  }
  // A copy: callers may hand it to encoders or mutate it; the cached bytes must stay the key's.
  return Buffer.from(kid);
}

export function logKeyOf(publicKey: KeyObject): LogKey {
  return { kid: coseKid(publicKey), key: publicKey };
}

/** COSE_Key map of a public key (EC2 P-256 or OKP Ed25519). */
export function coseKeyOf(key: LogKey): Map<number, unknown> {
  const jwk = key.key.export({ format: 'jwk' });
  const b = (s: string | undefined): Buffer => Buffer.from(s ?? '', 'base64url');
  const algorithm = algorithmOf(key.key);
  if (algorithm === 'ECDSA_P256_SHA256') {
    return new Map<number, unknown>([
      [1, KTY_EC2],
      [2, key.kid],
      [3, CoseAlg.ES256],
      [-1, CRV_P256],
      [-2, b(jwk.x)],
      [-3, b(jwk.y)],
    ]);
  }
  if (algorithm === 'ED25519') {
    return new Map<number, unknown>([
      [1, KTY_OKP],
      [2, key.kid],
      [3, CoseAlg.EdDSA],
      [-1, CRV_ED25519],
      [-2, b(jwk.x)],
    ]);
  }
  throw new TypeError('only P-256 and Ed25519 log keys are supported');
}

/** COSE Key Set (a CBOR array of COSE_Key) of the given keys. */
export function encodeKeySet(keys: readonly LogKey[]): Buffer {
  return encodeCbor(keys.map(coseKeyOf));
}

/** Parses a COSE Key Set; keys of unsupported types are skipped, a malformed set throws. */
export function decodeKeySet(bytes: Uint8Array): LogKey[] {
  let set: unknown;
  try {
    set = decodeCbor(bytes);
  } catch (cause) {
    throw new TransparencyError('BAD_RESPONSE', 'the key set is not CBOR', { cause });
  }
  if (!Array.isArray(set)) throw new TransparencyError('BAD_RESPONSE', 'the key set is not a CBOR array');
  const out: LogKey[] = [];
  for (const item of set as unknown[]) {
    if (!isMap(item)) continue;
    const kty = asUint(item.get(1));
    const crv = asUint(item.get(-1));
    const x = asBytes(item.get(-2));
    const y = asBytes(item.get(-3));
    let jwk: JsonWebKey | undefined;
    if (kty === KTY_EC2 && crv === CRV_P256 && x?.length === 32 && y?.length === 32) {
      jwk = { kty: 'EC', crv: 'P-256', x: x.toString('base64url'), y: y.toString('base64url') };
    } else if (kty === KTY_OKP && crv === CRV_ED25519 && x?.length === 32) {
      jwk = { kty: 'OKP', crv: 'Ed25519', x: x.toString('base64url') };
    }
    if (jwk === undefined) continue;
    let key: KeyObject;
    try {
      key = createPublicKey({ key: jwk, format: 'jwk' });
    } catch {
      continue;
    }
    out.push({ kid: asBytes(item.get(2)) ?? coseKid(key), key });
  }
  return out;
}
