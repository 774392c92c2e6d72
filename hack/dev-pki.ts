// @peculiar/x509 resolves its algorithm providers through tsyringe, which needs the Reflect
// metadata polyfill loaded first (ES modules evaluate in import order).
import 'reflect-metadata';
import { KeyObject, webcrypto } from 'node:crypto';
import * as x509 from '@peculiar/x509';
import type { SignatureAlgorithm } from '../src/signing/signer.ts';
import type { TlsMaterial } from '../src/signing/tls.ts';

/**
 * Development and test PKI: a CA (optionally an intermediate) and a signing leaf, generated in
 * memory so no key is ever committed. The leaf satisfies what C2PA validators demand of a signer:
 * not self-signed, not a CA, keyUsage digitalSignature, and an EKU they accept (emailProtection and
 * documentSigning). The local stack uses it to create its signer Secret; tests and benchmarks use it
 * for every key they sign with. A development tool: it is not part of the built package, and
 * @peculiar/x509 (with reflect-metadata) is a devDependency. Production parses the PEM that
 * cert-manager (or an operator) put into the Secret with node:crypto (src/signing/tls.ts).
 */

const EKU_EMAIL_PROTECTION = '1.3.6.1.5.5.7.3.4';
const EKU_DOCUMENT_SIGNING = '1.3.6.1.5.5.7.3.36';
const EKU_TIME_STAMPING = '1.3.6.1.5.5.7.3.8';

export interface DevPkiOptions {
  /** Key type of the leaf (the signer). Default ECDSA P-256. */
  leafAlgorithm?: SignatureAlgorithm;
  /** Key type of the CA and intermediate. Default ECDSA P-256. */
  caAlgorithm?: SignatureAlgorithm;
  /** Put an intermediate CA between root and leaf (it then appears in `tls.crt`). */
  intermediate?: boolean;
  leafCommonName?: string;
  caCommonName?: string;
  /**
   * A URI subject alternative name on the leaf: Sigstore verifiers (cosign with a certificate in
   * the bundle) match identities against SANs and refuse a certificate without one.
   */
  leafUri?: string;
  /**
   * Extended key usages added to the leaf's (emailProtection, documentSigning), e.g. codeSigning
   * (1.3.6.1.5.5.7.3.3), which Sigstore verifiers require of a bundle's certificate.
   */
  extraLeafEkus?: string[];
  /** Leaf validity; default from one minute ago for one day. */
  notBefore?: Date;
  notAfter?: Date;
  /** CA validity; default from one minute ago for ten years. */
  caNotBefore?: Date;
  caNotAfter?: Date;
}

/** PEMs named like the keys of the `kubernetes.io/tls` Secret they are meant for. */
export interface DevPki extends TlsMaterial {
  /** Leaf then intermediate (if any). */
  'tls.crt': string;
  /** PKCS#8. */
  'tls.key': string;
  /** Root CA. */
  'ca.crt': string;
}

const subtle = webcrypto.subtle;

function keyParams(algorithm: SignatureAlgorithm): webcrypto.EcKeyGenParams | webcrypto.Algorithm {
  return algorithm === 'ED25519' ? { name: 'Ed25519' } : { name: 'ECDSA', namedCurve: 'P-256' };
}

function signingParams(algorithm: SignatureAlgorithm): webcrypto.EcdsaParams | webcrypto.Algorithm {
  return algorithm === 'ED25519' ? { name: 'Ed25519' } : { name: 'ECDSA', hash: 'SHA-256' };
}

async function generateKeys(algorithm: SignatureAlgorithm): Promise<webcrypto.CryptoKeyPair> {
  return (await subtle.generateKey(keyParams(algorithm), true, [
    'sign',
    'verify',
  ])) as webcrypto.CryptoKeyPair;
}

interface Issuer {
  cert: x509.X509Certificate;
  keys: webcrypto.CryptoKeyPair;
  algorithm: SignatureAlgorithm;
}

async function issueCa(
  name: string,
  algorithm: SignatureAlgorithm,
  notBefore: Date,
  notAfter: Date,
  parent?: Issuer,
): Promise<Issuer> {
  const keys = await generateKeys(algorithm);
  const extensions: x509.Extension[] = [
    new x509.BasicConstraintsExtension(true, parent === undefined ? 1 : 0, true),
    new x509.KeyUsagesExtension(x509.KeyUsageFlags.keyCertSign | x509.KeyUsageFlags.cRLSign, true),
    await x509.SubjectKeyIdentifierExtension.create(keys.publicKey, false, webcrypto),
  ];
  const common = { notBefore, notAfter, extensions };
  const cert =
    parent === undefined
      ? await x509.X509CertificateGenerator.createSelfSigned(
          { ...common, name, keys, signingAlgorithm: signingParams(algorithm) },
          webcrypto,
        )
      : await x509.X509CertificateGenerator.create(
          {
            ...common,
            subject: name,
            issuer: parent.cert.subject,
            publicKey: keys.publicKey,
            signingKey: parent.keys.privateKey,
            signingAlgorithm: signingParams(parent.algorithm),
            extensions: [
              ...extensions,
              await x509.AuthorityKeyIdentifierExtension.create(parent.keys.publicKey, false, webcrypto),
            ],
          },
          webcrypto,
        );
  return { cert, keys, algorithm };
}

interface LeafOptions {
  name: string;
  algorithm: SignatureAlgorithm;
  notBefore: Date;
  notAfter: Date;
  ekus: string[];
  ekuCritical: boolean;
  uri?: string;
}

async function issueLeaf(
  issuer: Issuer,
  o: LeafOptions,
): Promise<{ cert: x509.X509Certificate; keys: webcrypto.CryptoKeyPair }> {
  const keys = await generateKeys(o.algorithm);
  const cert = await x509.X509CertificateGenerator.create(
    {
      subject: o.name,
      issuer: issuer.cert.subject,
      publicKey: keys.publicKey,
      signingKey: issuer.keys.privateKey,
      signingAlgorithm: signingParams(issuer.algorithm),
      notBefore: o.notBefore,
      notAfter: o.notAfter,
      extensions: [
        new x509.BasicConstraintsExtension(false, undefined, true),
        new x509.KeyUsagesExtension(x509.KeyUsageFlags.digitalSignature, true),
        new x509.ExtendedKeyUsageExtension(o.ekus, o.ekuCritical),
        await x509.SubjectKeyIdentifierExtension.create(keys.publicKey, false, webcrypto),
        await x509.AuthorityKeyIdentifierExtension.create(issuer.keys.publicKey, false, webcrypto),
        ...(o.uri !== undefined
          ? [new x509.SubjectAlternativeNameExtension([{ type: 'url', value: o.uri }], false)]
          : []),
      ],
    },
    webcrypto,
  );
  return { cert, keys };
}

export async function generateDevPki(options: DevPkiOptions = {}): Promise<DevPki> {
  const now = Date.now();
  const caAlgorithm = options.caAlgorithm ?? 'ECDSA_P256_SHA256';
  const leafAlgorithm = options.leafAlgorithm ?? 'ECDSA_P256_SHA256';
  const caNotBefore = options.caNotBefore ?? new Date(now - 60_000);
  const caNotAfter = options.caNotAfter ?? new Date(now + 10 * 365 * 86_400_000);
  const root = await issueCa(
    `CN=${options.caCommonName ?? 'aibom-vault dev CA'}, O=aibom-vault dev`,
    caAlgorithm,
    caNotBefore,
    caNotAfter,
  );
  const issuer =
    options.intermediate === true
      ? await issueCa(
          'CN=aibom-vault dev intermediate CA, O=aibom-vault dev',
          caAlgorithm,
          caNotBefore,
          caNotAfter,
          root,
        )
      : root;

  const { cert: leaf, keys: leafKeys } = await issueLeaf(issuer, {
    name: `CN=${options.leafCommonName ?? 'aibom-vault dev signer'}, O=aibom-vault dev`,
    algorithm: leafAlgorithm,
    notBefore: options.notBefore ?? new Date(now - 60_000),
    notAfter: options.notAfter ?? new Date(now + 86_400_000),
    ekus: [EKU_EMAIL_PROTECTION, EKU_DOCUMENT_SIGNING, ...(options.extraLeafEkus ?? [])],
    ekuCritical: false,
    ...(options.leafUri !== undefined ? { uri: options.leafUri } : {}),
  });

  const chain = issuer === root ? [leaf] : [leaf, issuer.cert];
  return {
    'tls.crt': chain.map((c) => c.toString('pem')).join('\n') + '\n',
    'tls.key': KeyObject.from(leafKeys.privateKey).export({ type: 'pkcs8', format: 'pem' }) as string,
    'ca.crt': root.cert.toString('pem') + '\n',
  };
}

/** The `data` object of a `kubernetes.io/tls` Secret holding this PKI (values base64). */
export function toSecretData(pki: DevPki): Record<'tls.crt' | 'tls.key' | 'ca.crt', string> {
  const b64 = (pem: string): string => Buffer.from(pem, 'utf8').toString('base64');
  return { 'tls.crt': b64(pki['tls.crt']), 'tls.key': b64(pki['tls.key']), 'ca.crt': b64(pki['ca.crt']) };
}

/** A time-stamping authority's chain: leaf, then root (the order RFC 3161 servers load it in). */
export interface DevTsaPki {
  /** Leaf (timeStamping), then the root. */
  'chain.pem': string;
  /** PKCS#8 key of the leaf. */
  'tsa.key': string;
  /** The root alone: the trust anchor verifiers configure for this TSA. */
  'ca.crt': string;
}

export interface DevTsaPkiOptions {
  caCommonName?: string;
  /** Leaf validity; default from one minute ago for ten years. */
  notBefore?: Date;
  notAfter?: Date;
}

/**
 * A CA → leaf chain for an RFC 3161 time-stamping authority (the local stack's, or a test's).
 * RFC 3161 §2.3 asks of the TSA certificate exactly one extended key usage, timeStamping, marked
 * critical; the Sigstore timestamp authority refuses a chain without it, and C2PA validators check
 * the same purpose on the certificate a time-stamp token carries.
 */
export async function generateTsaPki(options: DevTsaPkiOptions = {}): Promise<DevTsaPki> {
  const now = Date.now();
  const root = await issueCa(
    `CN=${options.caCommonName ?? 'aibom-vault dev TSA CA'}, O=aibom-vault dev`,
    'ECDSA_P256_SHA256',
    new Date(now - 60_000),
    new Date(now + 20 * 365 * 86_400_000),
  );
  const { cert, keys } = await issueLeaf(root, {
    name: 'CN=aibom-vault dev time-stamping authority, O=aibom-vault dev',
    algorithm: 'ECDSA_P256_SHA256',
    notBefore: options.notBefore ?? new Date(now - 60_000),
    notAfter: options.notAfter ?? new Date(now + 10 * 365 * 86_400_000),
    ekus: [EKU_TIME_STAMPING],
    ekuCritical: true,
  });
  return {
    'chain.pem': `${cert.toString('pem')}\n${root.cert.toString('pem')}\n`,
    'tsa.key': KeyObject.from(keys.privateKey).export({ type: 'pkcs8', format: 'pem' }) as string,
    'ca.crt': root.cert.toString('pem') + '\n',
  };
}
