import { hash, verify, type KeyObject, type X509Certificate } from 'node:crypto';

/** The two signature schemes the vault issues and accepts; names follow the KMS/sigstore style. */
export type SignatureAlgorithm = 'ECDSA_P256_SHA256' | 'ED25519';

/**
 * How an ECDSA signature is written: ASN.1 DER `SEQUENCE { r, s }` (what DSSE verifiers such as
 * cosign and securesystemslib expect) or IEEE P1363 `r ‖ s`, fixed width (what COSE, RFC 9053
 * §2.1, and JWS require). Ed25519 signatures are the 64 raw bytes either way.
 */
export type SignatureEncoding = 'der' | 'ieee-p1363';

/**
 * Signs bytes with one key. Deliberately synchronous: every key the vault uses is a local
 * KeyObject (service Secret or customer Secret), where `crypto.sign` costs tens of microseconds and
 * a promise round trip through the libuv pool would cost as much again per call; a synchronous
 * signer also keeps statement → envelope → digest one pure function. A remote (KMS/HSM) signer
 * would need its own async interface at the edge, not a wider one here.
 *
 * Invariants: `keyId` is `keyIdOf(publicKey)`; `publicKey` is the key of `certificateChain[0]`
 * when a chain is present. The signer writes the encoding its caller needs (`encoding`, default
 * DER for DSSE; COSE asks for IEEE P1363), so no caller converts signatures.
 */
export interface Signer {
  readonly keyId: string;
  readonly algorithm: SignatureAlgorithm;
  readonly publicKey: KeyObject;
  /** Leaf first, then intermediates; the root (`ca.crt`) is not part of it. */
  readonly certificateChain?: readonly X509Certificate[];
  sign(data: Buffer, encoding?: SignatureEncoding): Buffer;
}

/** Signature metadata as the API and the AIBOM expose it (snake_case like the rest of the API). */
export interface SignatureMetadata {
  algorithm: SignatureAlgorithm;
  key_id: string;
  /** `sha256:<hex>` of the leaf certificate's DER, when the signer has a certificate. */
  cert_chain_ref?: string;
}

/**
 * Key id: `sha256:` + hex SHA-256 of the DER SubjectPublicKeyInfo of the public key. Anyone holding
 * the public key or the certificate recomputes it (`openssl pkey -pubin -outform DER | sha256sum`),
 * and it does not change when the certificate is renewed for the same key.
 */
export function keyIdOf(publicKey: KeyObject): string {
  return `sha256:${hash('sha256', publicKey.export({ type: 'spki', format: 'der' }))}`;
}

/** `sha256:<hex>` of a certificate's DER encoding (what `openssl x509 -outform DER | sha256sum` prints). */
export function certificateRef(cert: X509Certificate): string {
  return `sha256:${hash('sha256', cert.raw)}`;
}

/**
 * The scheme a key signs with, or undefined for keys the vault does not support. Works on public
 * and private keys; P-256 is named `prime256v1` by OpenSSL.
 */
export function algorithmOf(key: KeyObject): SignatureAlgorithm | undefined {
  if (key.asymmetricKeyType === 'ed25519') return 'ED25519';
  if (key.asymmetricKeyType === 'ec' && key.asymmetricKeyDetails?.namedCurve === 'prime256v1') {
    return 'ECDSA_P256_SHA256';
  }
  return undefined;
}

/** Digest argument of `crypto.sign`/`crypto.verify`: Ed25519 hashes internally and takes none. */
export function digestOf(algorithm: SignatureAlgorithm): 'sha256' | null {
  return algorithm === 'ED25519' ? null : 'sha256';
}

/**
 * Verifies a signature made by a `Signer` in `encoding` (default DER); false, never a throw, for
 * garbage signatures.
 */
export function verifyWith(
  algorithm: SignatureAlgorithm,
  publicKey: KeyObject,
  data: Buffer,
  signature: Buffer,
  encoding: SignatureEncoding = 'der',
): boolean {
  try {
    return verify(
      digestOf(algorithm),
      data,
      encoding === 'ieee-p1363' ? { key: publicKey, dsaEncoding: encoding } : publicKey,
      signature,
    );
  } catch {
    return false;
  }
}

/** Signers whose `sign` reads `data` during the call only and keeps no reference to it. */
const referenceFree = new WeakSet<Signer>();

/**
 * Declares that `signer.sign` reads its input only while it runs (a `crypto.sign` or noble call),
 * so a caller may hand it a view of a buffer it reuses afterwards (signStatement's PAE). Only
 * signers whose code says so are marked (createKeySigner's); any other keeps fresh buffers.
 */
export function markKeepsNoReference<S extends Signer>(signer: S): S {
  referenceFree.add(signer);
  return signer;
}

export function keepsNoReference(signer: Signer): boolean {
  return referenceFree.has(signer);
}

const metadataCache = new WeakMap<Signer, SignatureMetadata>();

/** Metadata of a signer; computed once per signer because it hashes the certificate. */
export function signatureMetadata(signer: Signer): SignatureMetadata {
  let meta = metadataCache.get(signer);
  if (meta === undefined) {
    const leaf = signer.certificateChain?.[0];
    meta = { algorithm: signer.algorithm, key_id: signer.keyId };
    if (leaf !== undefined) meta.cert_chain_ref = certificateRef(leaf);
    Object.freeze(meta);
    metadataCache.set(signer, meta);
  }
  return meta;
}
