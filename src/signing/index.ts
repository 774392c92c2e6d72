export { isSelfSigned, validateChain, type ChainFailure, type ChainResult } from './chain.ts';
export { SigningError, type SigningErrorCode } from './errors.ts';
export { createKeySigner, deriveSecret, type KeySigner, type KeySignerOptions } from './key-signer.ts';
export { parseCertificates, parsePrivateKey, pemBlocks } from './pem.ts';
export {
  algorithmOf,
  certificateRef,
  digestOf,
  keyIdOf,
  signatureMetadata,
  verifyWith,
  type SignatureAlgorithm,
  type SignatureEncoding,
  type SignatureMetadata,
  type Signer,
} from './signer.ts';
export {
  loadSignerFromFiles,
  signerFromPem,
  signerFromTlsSecretData,
  type LoadOptions,
  type TlsFiles,
  type TlsMaterial,
} from './tls.ts';
export {
  resolveInKeyStore,
  resolveSignerCertificate,
  ROTATION_GRACE_MS,
  signedAtOf,
  type KeyResolution,
  type KnownCertificate,
  type ScopedCertificate,
} from './rotation.ts';
