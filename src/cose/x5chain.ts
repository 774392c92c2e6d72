import { X509Certificate } from 'node:crypto';
import { asBytes } from './cbor.ts';
import { CoseError } from './errors.ts';

/**
 * The `x5chain` header (label 33, RFC 9360): DER certificates, leaf first; one certificate as a
 * byte string, several as an array of them. Which certificates go in is the caller's policy
 * (C2PA leaves the root out, a SCITT statement carries it for did:x509).
 */
export function encodeX5chain(chain: readonly X509Certificate[]): Buffer | Buffer[] {
  if (chain.length === 0) throw new CoseError('INVALID_INPUT', 'x5chain needs at least one certificate');
  return chain.length === 1 ? chain[0]!.raw : chain.map((c) => c.raw);
}

/**
 * Parses an `x5chain` value; throws CoseError MALFORMED when it is missing, not byte strings, or a
 * certificate does not parse (including its public key, which Node otherwise parses lazily, so a
 * damaged SubjectPublicKeyInfo fails here and not in the middle of a verification).
 */
export function decodeX5chain(value: unknown): X509Certificate[] {
  const items: unknown[] = Array.isArray(value) ? (value as unknown[]) : value === undefined ? [] : [value];
  const ders = items.map(asBytes);
  if (ders.length === 0 || ders.includes(undefined)) {
    throw new CoseError('MALFORMED', 'x5chain missing or not byte strings');
  }
  return (ders as Buffer[]).map((der, i) => {
    try {
      const cert = new X509Certificate(der);
      void cert.publicKey;
      return cert;
    } catch (cause) {
      throw new CoseError('MALFORMED', `x5chain certificate #${i + 1} does not parse`, { cause });
    }
  });
}
