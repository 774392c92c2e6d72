import type { SignatureAlgorithm } from '../signing/signer.ts';

/** COSE algorithm identifiers used here (IANA COSE Algorithms registry). */
export const CoseAlg = { ES256: -7, EdDSA: -8, SHA256: -16 } as const;

/** The signature schemes of `src/signing` and their COSE identifiers: the only table of them. */
const BY_SIGNATURE: Readonly<Record<SignatureAlgorithm, number>> = {
  ECDSA_P256_SHA256: CoseAlg.ES256,
  ED25519: CoseAlg.EdDSA,
};

export function coseAlgorithmOf(algorithm: SignatureAlgorithm): number {
  return BY_SIGNATURE[algorithm];
}

/** The signature scheme of a COSE `alg` value; undefined for anything else (ES384, RSA, garbage). */
export function signatureAlgorithmOf(alg: unknown): SignatureAlgorithm | undefined {
  if (alg === CoseAlg.ES256) return 'ECDSA_P256_SHA256';
  if (alg === CoseAlg.EdDSA) return 'ED25519';
  return undefined;
}
