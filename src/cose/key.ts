import { createPublicKey, hash, type JsonWebKey, type KeyObject } from 'node:crypto';
import { algorithmOf } from '../signing/signer.ts';
import { CoseAlg } from './algorithms.ts';
import { asBytes, asUint, decodeCbor, encodeCbor, isMap } from './cbor.ts';
import { CoseError } from './errors.ts';

/** COSE_Key (RFC 9052 §7) and COSE Key Sets: how a transparency log publishes its keys. */

const KTY_OKP = 1;
const KTY_EC2 = 2;
const CRV_P256 = 1;
const CRV_ED25519 = 6;

/** A verification key with its COSE key id (in SCITT: a transparency log's key). */
export interface LogKey {
  /** COSE `kid`: SHA-256 of the DER SubjectPublicKeyInfo (the hex of `keyIdOf`). */
  readonly kid: Buffer;
  readonly key: KeyObject;
}

const kidCache = new WeakMap<KeyObject, Buffer>();

/**
 * kid of a public key: raw SHA-256 over its SPKI DER (hex-identical to src/signing `keyIdOf`).
 * Cached per KeyObject (exporting the SPKI costs ~0.1 ms, once per receipt before).
 */
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
  throw new CoseError('UNSUPPORTED_ALGORITHM', 'only P-256 and Ed25519 keys have a COSE_Key form here');
}

/** COSE Key Set (a CBOR array of COSE_Key) of the given keys. */
export function encodeKeySet(keys: readonly LogKey[]): Buffer {
  return encodeCbor(keys.map(coseKeyOf));
}

/**
 * Parses a COSE Key Set; keys of unsupported types are skipped. Throws CoseError MALFORMED when
 * the bytes are not a CBOR array.
 */
export function decodeKeySet(bytes: Uint8Array): LogKey[] {
  let set: unknown;
  try {
    set = decodeCbor(bytes);
  } catch (cause) {
    throw new CoseError('MALFORMED', 'the key set is not CBOR', { cause });
  }
  if (!Array.isArray(set)) throw new CoseError('MALFORMED', 'the key set is not a CBOR array');
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
