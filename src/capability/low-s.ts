/**
 * ECDSA signatures are malleable: for a valid (r, s), (r, n − s) verifies too, so one credential
 * would have two valid encodings (two token ids, two revocation lookups, a replay filter keyed on
 * the bytes fooled). The VC-JWT projection therefore emits and accepts only the low-S form
 * (s ≤ n/2, the form Bitcoin's BIP 62 and most JOSE verifiers that care require), for ES256 (P-256)
 * signatures in IEEE P1363 form (r ‖ s, 32 bytes each).
 */

/** The order of the P-256 group. */
const P256_N = 0xffffffff00000000ffffffffffffffffbce6faada7179e84f3b9cac2fc632551n;
const HALF_N = P256_N >> 1n;
const SIZE = 32;

const toBig = (b: Buffer): bigint => BigInt(`0x${b.toString('hex') || '0'}`);
const toBytes = (v: bigint): Buffer => Buffer.from(v.toString(16).padStart(SIZE * 2, '0'), 'hex');

/** Whether a P1363 ES256 signature has s ≤ n/2 (false for anything that is not 64 bytes). */
export function isLowS(signature: Buffer): boolean {
  if (signature.length !== 2 * SIZE) return false;
  const s = toBig(signature.subarray(SIZE));
  return s > 0n && s <= HALF_N;
}

/** The low-S form of a P1363 ES256 signature (the same signature when it already is). */
export function toLowS(signature: Buffer): Buffer {
  if (signature.length !== 2 * SIZE) return signature;
  const s = toBig(signature.subarray(SIZE));
  if (s <= HALF_N) return signature;
  return Buffer.concat([signature.subarray(0, SIZE), toBytes(P256_N - s)]);
}
