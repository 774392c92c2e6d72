import type { X509Certificate } from 'node:crypto';
import { signatureAlgorithmOf, coseAlgorithmOf } from '../cose/algorithms.ts';
import { CoseError } from '../cose/errors.ts';
import { asBytes, encodeCbor } from '../cose/cbor.ts';
import { Header, parseSign1, signSign1, type CoseSign1, type HeaderMap } from '../cose/sign1.ts';
import { decodeX5chain, encodeX5chain } from '../cose/x5chain.ts';
import { isSelfSigned, type SignatureAlgorithm, type Signer } from '../signing/index.ts';
import { C2paError } from './errors.ts';

/**
 * The claim signature as C2PA 1.4 writes it: COSE_Sign1_Tagged (src/cose), payload detached (the
 * claim CBOR, `nil` in the structure), protected header with `alg` and `x5chain` (leaf first, no
 * root). This file holds only what C2PA adds to COSE; the structure itself is src/cose's.
 */

/** The claim signature's protected header: `alg` and `x5chain` (leaf first, trust anchor left out). */
function protectedHeaderOf(signer: Signer): HeaderMap {
  const certs = [...(signer.certificateChain ?? [])];
  if (certs.length === 0) {
    throw new C2paError('INVALID_INPUT', 'C2PA signing needs a signer with an X.509 certificate chain');
  }
  // The trust anchor is the validator's to hold, not the manifest's to carry.
  while (certs.length > 1 && isSelfSigned(certs.at(-1)!)) certs.pop();
  return new Map<number, unknown>([
    [Header.alg, coseAlgorithmOf(signer.algorithm)],
    [Header.x5chain, encodeX5chain(certs)],
  ]);
}

/**
 * Label of the unprotected header holding an RFC 3161 time-stamp of the claim signature (C2PA 1.4,
 * "v1" time-stamps; 2.x also knows `sigTst2`). Its value is a `tstContainer`:
 * `{ "tstTokens": [ { "val": bstr } ] }`, `val` being the DER TimeStampResp the TSA answered.
 */
export const SIG_TST = 'sigTst';

/**
 * What a C2PA 1.4 time-stamp is over: the COSE countersignature structure of the claim signature,
 * `["CounterSignature", body_protected, external_aad (empty), payload]` (RFC 9052 §4.4 with the
 * RFC 9338 context), the claim being the payload. It covers the certificate chain (x5chain is in
 * the protected header) and the claim, not the signature value, so the time-stamp can be taken
 * before signing. c2pa-rs computes the same bytes (`cose_countersign_data`).
 */
export function timestampedData(protectedBytes: Uint8Array, claim: Uint8Array): Buffer {
  return encodeCbor(['CounterSignature', protectedBytes, Buffer.alloc(0), claim]);
}

/** The bytes a time-stamp of `signer`'s signature over `claim` must cover ({@link timestampedData}). */
export function claimTimestampData(signer: Signer, claim: Buffer): Buffer {
  return timestampedData(encodeCbor(protectedHeaderOf(signer)), claim);
}

/**
 * Signs `claim` and returns COSE_Sign1_Tagged with the payload detached; with `timestampResponse`
 * (a DER TimeStampResp over {@link claimTimestampData}), the unprotected header carries it as
 * `sigTst`. The protected header is encoded deterministically, so the time-stamped bytes and the
 * signed ones name the same header.
 */
export function signClaim(signer: Signer, claim: Buffer, timestampResponse?: Buffer): Buffer {
  const unprotectedHeader: HeaderMap = new Map();
  if (timestampResponse !== undefined) {
    unprotectedHeader.set(SIG_TST, { tstTokens: [{ val: timestampResponse }] });
  }
  return signSign1(signer, {
    protectedHeader: protectedHeaderOf(signer),
    unprotectedHeader,
    payload: claim,
    detached: true,
  });
}

/**
 * The DER TimeStampResp of a parsed claim signature's `sigTst`, undefined when it has none. Throws
 * MALFORMED_MANIFEST when the header is there but is not a tstContainer with one token (C2PA
 * validators read only the first; more would be ambiguous).
 */
export function sigTstOf(sign1: CoseSign1): Buffer | undefined {
  const value = sign1.unprotectedHeader.get(SIG_TST);
  if (value === undefined) return undefined;
  const tokens: unknown = value instanceof Map ? value.get('tstTokens') : undefined;
  const first: unknown = Array.isArray(tokens) && tokens.length === 1 ? tokens[0] : undefined;
  const val = first instanceof Map ? asBytes(first.get('val')) : undefined;
  if (val === undefined) {
    throw new C2paError('MALFORMED_MANIFEST', 'claim signature: sigTst is not a tstContainer with one token');
  }
  return val;
}

export interface ClaimSignature {
  readonly algorithm: SignatureAlgorithm;
  /** Leaf first. */
  readonly chain: X509Certificate[];
  readonly sign1: CoseSign1;
}

function malformed(message: string): C2paError {
  return new C2paError('MALFORMED_MANIFEST', `claim signature: ${message}`);
}

/** A CoseError from src/cose becomes MALFORMED_MANIFEST (what the bytes were meant to be). */
function asManifestError(cause: unknown): unknown {
  return cause instanceof CoseError
    ? new C2paError('MALFORMED_MANIFEST', `claim signature: ${cause.message}`, { cause })
    : cause;
}

/** Parses the claim signature; throws `C2paError` (MALFORMED_MANIFEST / UNSUPPORTED_MANIFEST). */
export function parseClaimSignature(data: Buffer): ClaimSignature {
  let sign1: CoseSign1;
  try {
    sign1 = parseSign1(data);
  } catch (cause) {
    throw asManifestError(cause);
  }
  if (!sign1.tagged) throw malformed('COSE_Sign1 is not tagged 18');
  // C2PA signs the claim as detached content; an attached payload would be a second claim copy.
  if (sign1.payload !== null) throw malformed('payload is not detached (nil)');
  const alg = sign1.protectedHeader.get(Header.alg);
  const algorithm = signatureAlgorithmOf(alg);
  if (algorithm === undefined) {
    throw new C2paError(
      'UNSUPPORTED_MANIFEST',
      `claim signature: unsupported or missing alg ${String(alg)} (ES256 and EdDSA are accepted)`,
    );
  }
  // C2PA 1.4 puts x5chain in the protected header; 1.0–1.2 allowed the unprotected one.
  let chain: X509Certificate[];
  try {
    chain = decodeX5chain(
      sign1.protectedHeader.get(Header.x5chain) ?? sign1.unprotectedHeader.get(Header.x5chain),
    );
  } catch (cause) {
    throw asManifestError(cause);
  }
  return { algorithm, chain, sign1 };
}
