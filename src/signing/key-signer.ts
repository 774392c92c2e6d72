import {
  createPublicKey,
  hkdfSync,
  sign as signNow,
  type KeyObject,
  type X509Certificate,
} from 'node:crypto';
import { p256 } from '@noble/curves/nist.js';
import { chainFailureCode, validateChain } from './chain.ts';
import { SigningError } from './errors.ts';
import {
  algorithmOf,
  digestOf,
  keyIdOf,
  markKeepsNoReference,
  type SignatureEncoding,
  type Signer,
} from './signer.ts';

export interface KeySignerOptions {
  privateKey: KeyObject;
  /** Leaf first, then intermediates (the content of `tls.crt`). */
  certificateChain?: readonly X509Certificate[];
  /** Roots the chain must lead to (the content of `ca.crt`); checked at load time when given. */
  caCertificates?: readonly X509Certificate[];
  /** Time the chain is checked at; defaults to now. */
  at?: Date;
}

/** A signer over a local key, plus the CA certificates it was loaded with (for publishing trust). */
export interface KeySigner extends Signer {
  readonly caCertificates: readonly X509Certificate[];
  /**
   * The same key, signing deterministically: the same bytes always give the same signature
   * (Ed25519 is deterministic by definition; ECDSA uses RFC 6979 nonces). For signatures that are
   * part of content which must be reproducible byte for byte (export bundles, ADR 0009); every
   * other signature keeps OpenSSL's random nonces.
   */
  deterministic(): Signer;
}

/**
 * Builds a signer from an already parsed key. Everything that can be wrong with the material is
 * checked here, once, so that `sign` never fails for configuration reasons at attestation time:
 * supported key type, key matches the leaf, chain links up to `caCertificates` and is in date.
 */
export function createKeySigner(options: KeySignerOptions): KeySigner {
  const { privateKey, certificateChain = [], caCertificates = [] } = options;
  if (privateKey.type !== 'private') {
    throw new SigningError('UNSUPPORTED_KEY_TYPE', `expected a private key, got a ${privateKey.type} key`);
  }
  const algorithm = algorithmOf(privateKey);
  if (algorithm === undefined) {
    const curve = privateKey.asymmetricKeyDetails?.namedCurve;
    throw new SigningError(
      'UNSUPPORTED_KEY_TYPE',
      `unsupported key type ${privateKey.asymmetricKeyType ?? 'unknown'}${curve ? ` (${curve})` : ''}: ` +
        'only ECDSA P-256 and Ed25519 are accepted',
    );
  }
  const publicKey = createPublicKey(privateKey);
  const spki = publicKey.export({ type: 'spki', format: 'der' });
  const leaf = certificateChain[0];
  if (leaf !== undefined && !leaf.publicKey.export({ type: 'spki', format: 'der' }).equals(spki)) {
    throw new SigningError(
      'KEY_CERT_MISMATCH',
      `private key does not match the leaf certificate "${leaf.subject.replaceAll('\n', ', ')}"`,
    );
  }
  // tls.crt must be leaf first, each certificate issued by the next: C2PA x5chain and verifiers
  // rely on that order, and a misordered bundle should fail here, not in a customer's validator.
  for (let i = 0; i + 1 < certificateChain.length; i++) {
    const cert = certificateChain[i] as X509Certificate;
    const issuer = certificateChain[i + 1] as X509Certificate;
    if (!issuer.ca || !cert.checkIssued(issuer) || !cert.verify(issuer.publicKey)) {
      throw new SigningError(
        'CHAIN_INVALID',
        `tls.crt certificate #${i + 1} is not issued by certificate #${i + 2} (expected leaf first, then issuers)`,
      );
    }
  }
  if (leaf !== undefined && caCertificates.length > 0) {
    const result = validateChain(certificateChain, caCertificates, options.at ?? new Date());
    if (!result.ok) {
      throw new SigningError(chainFailureCode(result.failure, 'CHAIN_INVALID'), result.message);
    }
  }
  // Hoisted so the hot path is exactly one crypto.sign call on a pre-parsed KeyObject.
  const digest = digestOf(algorithm);
  const p1363 = { key: privateKey, dsaEncoding: 'ieee-p1363' } as const;
  const base = {
    keyId: keyIdOf(publicKey),
    algorithm,
    publicKey,
    ...(leaf !== undefined ? { certificateChain: Object.freeze([...certificateChain]) } : {}),
  };
  const sign = (data: Buffer, encoding?: SignatureEncoding): Buffer =>
    signNow(digest, data, encoding === 'ieee-p1363' ? p1363 : privateKey);
  let deterministic: Signer | undefined;
  const signer: KeySigner = {
    ...base,
    caCertificates: Object.freeze([...caCertificates]),
    sign,
    deterministic: () =>
      (deterministic ??= markKeepsNoReference(
        Object.freeze({ ...base, sign: deterministicSign(algorithm, privateKey, sign) }),
      )),
  };
  // Both sign functions read `data` during the call only (crypto.sign, noble's p256.sign).
  markKeepsNoReference(Object.freeze(signer));
  privateKeys.set(signer, privateKey);
  return signer;
}

/** The private key of each signer made here; only `deriveSecret` reads it. */
const privateKeys = new WeakMap<Signer, KeyObject>();

/**
 * 32 bytes derived from a signer's private key: HKDF-SHA256 over the raw private scalar (the JWK
 * `d`, the same whatever PEM form the key was loaded from), salt `aibom-vault`, `info` naming the
 * use. For protocols that must sign inside a library that cannot call a Signer (Biscuit, in wasm):
 * they get a key of their own, bound to the signer, and the signer's key never leaves this module.
 * Undefined for signers not made by createKeySigner (a remote KMS signer has no scalar to derive from).
 */
export function deriveSecret(signer: Signer, info: string): Buffer | undefined {
  const key = privateKeys.get(signer);
  if (key === undefined) return undefined;
  const d = Buffer.from(key.export({ format: 'jwk' }).d ?? '', 'base64url');
  return Buffer.from(hkdfSync('sha256', d, 'aibom-vault', info, 32));
}

/** RFC 6979 ECDSA P-256 over SHA-256 (noble), or the Ed25519 signer itself (already deterministic). */
function deterministicSign(
  algorithm: 'ECDSA_P256_SHA256' | 'ED25519',
  privateKey: KeyObject,
  random: (data: Buffer, encoding?: SignatureEncoding) => Buffer,
): (data: Buffer, encoding?: SignatureEncoding) => Buffer {
  if (algorithm === 'ED25519') return random;
  const d = Buffer.from(privateKey.export({ format: 'jwk' }).d ?? '', 'base64url');
  return (data, encoding) => {
    const compact = p256.sign(data, d, { prehash: true, format: 'compact' });
    return Buffer.from(
      encoding === 'ieee-p1363' ? compact : p256.Signature.fromBytes(compact, 'compact').toBytes('der'),
    );
  };
}
