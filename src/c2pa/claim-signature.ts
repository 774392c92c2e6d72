import type { X509Certificate } from 'node:crypto';
import { signatureAlgorithmOf, coseAlgorithmOf } from '../cose/algorithms.ts';
import { CoseError } from '../cose/errors.ts';
import { Header, parseSign1, signSign1, type CoseSign1 } from '../cose/sign1.ts';
import { decodeX5chain, encodeX5chain } from '../cose/x5chain.ts';
import { isSelfSigned, type SignatureAlgorithm, type Signer } from '../signing/index.ts';
import { C2paError } from './errors.ts';

/**
 * The claim signature as C2PA 1.4 writes it: COSE_Sign1_Tagged (src/cose), payload detached (the
 * claim CBOR, `nil` in the structure), protected header with `alg` and `x5chain` (leaf first, no
 * root). This file holds only what C2PA adds to COSE; the structure itself is src/cose's.
 */

/**
 * Signs `claim` and returns COSE_Sign1_Tagged with the payload detached. The chain is
 * `signer.certificateChain` minus any trailing self-signed certificate: the trust anchor is the
 * validator's to hold, not the manifest's to carry.
 */
export function signClaim(signer: Signer, claim: Buffer): Buffer {
  const certs = [...(signer.certificateChain ?? [])];
  if (certs.length === 0) {
    throw new C2paError('INVALID_INPUT', 'C2PA signing needs a signer with an X.509 certificate chain');
  }
  while (certs.length > 1 && isSelfSigned(certs.at(-1)!)) certs.pop();
  const protectedHeader = new Map<number, unknown>([
    [Header.alg, coseAlgorithmOf(signer.algorithm)],
    [Header.x5chain, encodeX5chain(certs)],
  ]);
  return signSign1(signer, { protectedHeader, payload: claim, detached: true });
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
