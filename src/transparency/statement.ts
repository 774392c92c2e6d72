import type { X509Certificate } from 'node:crypto';
import { envelopeDigest } from '../attest/digest.ts';
import type { DsseEnvelope } from '../attest/dsse.ts';
import { coseAlgorithmOf, CoseAlg } from '../cose/algorithms.ts';
import { asInt } from '../cose/cbor.ts';
import { cwtClaimsMap, readCwtClaims } from '../cose/cwt.ts';
import { CoseError } from '../cose/errors.ts';
import { Header, parseSign1, signSign1, verifySign1, type CoseSign1, type HeaderMap } from '../cose/sign1.ts';
import { decodeX5chain, encodeX5chain } from '../cose/x5chain.ts';
import { isSelfSigned, validateChain } from '../signing/chain.ts';
import type { Signer } from '../signing/signer.ts';
import { didX509, matchDidX509, type DidX509Policy } from './did-x509.ts';
import { TransparencyError, type TransparencyErrorCode } from './errors.ts';
import { MediaType } from './media-types.ts';

/**
 * SCITT signed statements: COSE_Sign1 (src/cose) with the headers SCITT requires, built from a
 * vault attestation and checked at registration. Pure: no I/O.
 */

/**
 * Parses COSE_Sign1 bytes that are meant to be a statement or a receipt; a malformed structure is
 * a TransparencyError with `code` (the caller says which: a malformed statement and a malformed
 * receipt are different failures).
 */
export function decodeSign1(bytes: Uint8Array, code: TransparencyErrorCode): CoseSign1 {
  try {
    return parseSign1(bytes);
  } catch (cause) {
    if (cause instanceof CoseError) throw new TransparencyError(code, cause.message, { cause });
    throw cause;
  }
}

/**
 * Certificate chain carried in a statement's x5chain: the signer's chain (leaf, intermediates)
 * plus the root that issued its last certificate when `caCertificates` has it. Unlike C2PA, a
 * SCITT statement carries its root: did:x509 pins a CA that must be in the chain the verifier
 * sees, and pinning the root keeps the issuer id stable across intermediate rotations.
 */
export function statementChain(
  signer: Signer,
  caCertificates: readonly X509Certificate[] = [],
): X509Certificate[] {
  const chain = [...(signer.certificateChain ?? [])];
  const top = chain.at(-1);
  if (top === undefined) {
    throw new TransparencyError('ISSUER_UNAVAILABLE', 'the statement signer has no certificate chain');
  }
  if (!isSelfSigned(top)) {
    const root = caCertificates.find((ca) => ca.ca && top.checkIssued(ca) && top.verify(ca.publicKey));
    if (root !== undefined && !root.raw.equals(top.raw)) chain.push(root);
  }
  return chain;
}

export interface StatementInput {
  /** The attestation id (UUIDv7): the statement's CWT `sub`. */
  readonly attestationId: string;
  /** The vault envelope; the statement signs SHA-256 over its RFC 8785 JSON (= the vault digest). */
  readonly envelope: DsseEnvelope;
  /** When given, must equal the recomputed digest (`sha256:<hex>`), else ATTESTATION_DIGEST_MISMATCH. */
  readonly digest?: string;
  /** The service signer; needs a certificate chain. */
  readonly signer: Signer;
  /** Roots (`ca.crt`); the one that issued the chain goes into x5chain and is pinned by did:x509. */
  readonly caCertificates?: readonly X509Certificate[];
  readonly issuerPolicy?: DidX509Policy;
  /** Where the preimage (the envelope) can be fetched, e.g. the attestation's API URL (header 260). */
  readonly payloadLocation?: string;
  /** Issued-at, seconds since the epoch; default now. */
  readonly issuedAt?: number;
}

export interface SignedStatement {
  /** COSE_Sign1_Tagged bytes. */
  readonly bytes: Buffer;
  readonly issuer: string;
  readonly subject: string;
  /** The payload: SHA-256 of the envelope's RFC 8785 JSON. */
  readonly payloadHash: Buffer;
}

interface IssuerIdentity {
  readonly caCertificates: readonly X509Certificate[] | undefined;
  readonly policy: StatementInput['issuerPolicy'];
  readonly chain: X509Certificate[];
  readonly issuer: string;
}

/** The last identity derived per signer: chain checks and did:x509 cost ~70 µs per statement. */
const issuerCache = new WeakMap<Signer, IssuerIdentity>();

/**
 * x5chain and did:x509 issuer of a signer. A signer's key and certificates never change once
 * loaded (a rotated Secret makes a new Signer), so the result is reused while the same CA list
 * and issuer policy are passed.
 */
function issuerOf(
  signer: Signer,
  caCertificates: readonly X509Certificate[] | undefined,
  policy: StatementInput['issuerPolicy'],
): IssuerIdentity {
  const cached = issuerCache.get(signer);
  if (cached !== undefined && cached.caCertificates === caCertificates && cached.policy === policy) {
    return cached;
  }
  const chain = statementChain(signer, caCertificates);
  const issuer = didX509(chain, policy !== undefined ? { policy } : {});
  const identity: IssuerIdentity = { caCertificates, policy, chain, issuer };
  issuerCache.set(signer, identity);
  return identity;
}

/**
 * The protected header both statements start with, in this order (the signed bytes depend on it):
 * alg, the content type when given, the CWT claims (did:x509 `iss`, `sub`, `iat`: default now) and
 * the x5chain with its root. Callers append their own entries after these.
 */
function issuerHeader(
  input: Pick<PayloadStatementInput, 'signer' | 'caCertificates' | 'issuerPolicy' | 'issuedAt'>,
  subject: string,
  contentType?: string,
): { issuer: string; protectedHeader: HeaderMap } {
  const { chain, issuer } = issuerOf(input.signer, input.caCertificates, input.issuerPolicy);
  const claims = cwtClaimsMap({ issuer, subject, issuedAt: input.issuedAt ?? Math.floor(Date.now() / 1000) });
  const protectedHeader: HeaderMap = new Map<number, unknown>([
    [Header.alg, coseAlgorithmOf(input.signer.algorithm)],
  ]);
  if (contentType !== undefined) protectedHeader.set(Header.contentType, contentType);
  protectedHeader.set(Header.cwtClaims, claims);
  protectedHeader.set(Header.x5chain, encodeX5chain(chain));
  return { issuer, protectedHeader };
}

/**
 * Builds the SCITT signed statement for one attestation: a COSE Hash Envelope (RFC 9995) whose
 * payload is the 32-byte SHA-256 of the DSSE envelope's RFC 8785 JSON, i.e. exactly the vault's
 * `digest` of that attestation. Protected header:
 *
 *   1: alg (-7 ES256 / -8 EdDSA)          33: x5chain (leaf first, root included)
 *   15: { 1: iss did:x509, 2: sub attestation id, 6: iat }
 *   258: -16 (SHA-256)   259: "application/vnd.dsse.envelope+json"   260: location (optional)
 *
 * No content type (3): RFC 9995 forbids it next to 259. Why a hash and not the envelope: the
 * statement goes to a remote log that keeps it forever and shows it to anyone; the envelope holds
 * tenant data (run ids, model names, prompts' digests) that must not leak there, and the digest
 * already commits to every byte of it. A verifier holding the exported envelope recomputes the
 * digest (docs/digest.md) and compares it with the payload.
 */
export function buildSignedStatement(input: StatementInput): SignedStatement {
  const digest = envelopeDigest(input.envelope);
  if (input.digest !== undefined && input.digest !== digest) {
    throw new TransparencyError(
      'ATTESTATION_DIGEST_MISMATCH',
      `attestation ${input.attestationId}: stored digest ${input.digest} but the envelope hashes to ${digest}`,
      { retryable: false },
    );
  }
  const payloadHash = Buffer.from(digest.slice('sha256:'.length), 'hex');
  const { issuer, protectedHeader } = issuerHeader(input, input.attestationId);
  protectedHeader.set(Header.payloadHashAlg, CoseAlg.SHA256);
  protectedHeader.set(Header.preimageContentType, MediaType.dsseEnvelope);
  if (input.payloadLocation !== undefined) protectedHeader.set(Header.payloadLocation, input.payloadLocation);
  const bytes = signSign1(input.signer, { protectedHeader, payload: payloadHash });
  return { bytes, issuer, subject: input.attestationId, payloadHash };
}

export interface PayloadStatementInput {
  /** The CWT `sub`: what the statement is about. */
  readonly subject: string;
  /** Signed as is (attached). */
  readonly payload: Buffer;
  /** Media type of the payload (header 3). */
  readonly contentType: string;
  /** The service signer; needs a certificate chain. */
  readonly signer: Signer;
  readonly caCertificates?: readonly X509Certificate[];
  readonly issuerPolicy?: DidX509Policy;
  /** Issued-at, seconds since the epoch; default now. */
  readonly issuedAt?: number;
}

/**
 * A SCITT signed statement over a payload of its own (not a hash envelope): the same issuer
 * identity as {@link buildSignedStatement} (x5chain with its root, did:x509 `iss`), a `sub` and a
 * content type. The vault's signed checkpoints are such statements (src/checkpoint), so one
 * registers in any SCITT log as it is.
 */
export function buildPayloadStatement(input: PayloadStatementInput): {
  readonly bytes: Buffer;
  readonly issuer: string;
} {
  const { issuer, protectedHeader } = issuerHeader(input, input.subject, input.contentType);
  return { bytes: signSign1(input.signer, { protectedHeader, payload: input.payload }), issuer };
}

export interface StatementClaims {
  readonly issuer: string;
  readonly subject: string;
  readonly issuedAt?: number;
}

/** CWT claims (header 15) of a statement's protected header; undefined unless iss and sub are set. */
export function cwtClaims(header: HeaderMap): StatementClaims | undefined {
  const { issuer, subject, issuedAt } = readCwtClaims(header);
  if (issuer === undefined || subject === undefined) return undefined;
  return { issuer, subject, ...(issuedAt !== undefined ? { issuedAt } : {}) };
}

/** Far beyond any real PKI; bounds the work an attacker-supplied statement can cause. */
const MAX_X5CHAIN = 8;

/** The x5chain (header 33) of a statement's protected header; undefined when unusable. */
function statementX5chain(header: HeaderMap): X509Certificate[] | undefined {
  try {
    const chain = decodeX5chain(header.get(Header.x5chain));
    return chain.length <= MAX_X5CHAIN ? chain : undefined;
  } catch (err) {
    if (err instanceof CoseError) return undefined;
    throw err;
  }
}

export interface VerifiedStatement extends StatementClaims {
  readonly sign1: CoseSign1;
  readonly chain: readonly X509Certificate[];
  /** The payload (for our statements, the envelope digest). */
  readonly payload: Buffer;
  readonly payloadHashAlg?: number;
  readonly preimageContentType?: string;
  /** Header 3, when the statement carries its payload's media type. */
  readonly contentType?: string;
}

export interface VerifyStatementOptions {
  /**
   * Roots the x5chain must lead to (the registration policy's trust anchors). Without them only
   * the signature and the did:x509 binding are checked: acceptable for a dry-run log, not for a
   * public service.
   */
  readonly trustAnchors?: readonly X509Certificate[];
  /** Time the chain must be valid at; default now. */
  readonly at?: Date;
  /** The payload when the statement's is detached. */
  readonly detachedPayload?: Uint8Array;
}

/**
 * What a transparency service checks at registration (SCITT architecture §"Registration"):
 * COSE_Sign1 with alg, x5chain and CWT iss/sub in the protected header; signature by the x5chain
 * leaf; `iss` a did:x509 that resolves against the x5chain; the chain valid up to a trust anchor
 * when anchors are given. Throws TransparencyError (MALFORMED_STATEMENT,
 * STATEMENT_SIGNATURE_INVALID, ISSUER_MISMATCH, UNTRUSTED_ISSUER).
 */
export function verifySignedStatement(
  bytes: Uint8Array,
  options: VerifyStatementOptions = {},
): VerifiedStatement {
  const sign1 = decodeSign1(bytes, 'MALFORMED_STATEMENT');
  const malformed = (why: string): never => {
    throw new TransparencyError('MALFORMED_STATEMENT', why, { retryable: false });
  };
  const claims = cwtClaims(sign1.protectedHeader) ?? malformed('protected CWT claims lack iss or sub');
  const chain =
    statementX5chain(sign1.protectedHeader) ?? malformed('protected header has no usable x5chain');
  const leaf = chain[0]!;
  const payload =
    options.detachedPayload !== undefined
      ? Buffer.from(options.detachedPayload)
      : (sign1.payload ?? malformed('detached payload not supplied'));
  if (!verifySign1(sign1, leaf.publicKey, payload)) {
    throw new TransparencyError(
      'STATEMENT_SIGNATURE_INVALID',
      'the statement signature does not verify with its x5chain leaf',
      { retryable: false },
    );
  }
  const match = matchDidX509(claims.issuer, chain);
  if (!match.ok) {
    // Fixed texts: the iss and the certificate names are the submitter's (docs/api.md: no error
    // quotes the request).
    throw new TransparencyError(
      'ISSUER_MISMATCH',
      'the statement iss is not a did:x509 matching its x5chain',
      {
        retryable: false,
      },
    );
  }
  if (options.trustAnchors !== undefined) {
    const result = validateChain(chain, options.trustAnchors, options.at ?? new Date());
    if (!result.ok)
      throw new TransparencyError(
        'UNTRUSTED_ISSUER',
        `the x5chain does not verify to a trust anchor (${result.failure})`,
        {
          retryable: false,
        },
      );
  }
  const hashAlg = asInt(sign1.protectedHeader.get(Header.payloadHashAlg));
  const preimage = sign1.protectedHeader.get(Header.preimageContentType);
  const contentType = sign1.protectedHeader.get(Header.contentType);
  return {
    ...claims,
    sign1,
    chain,
    payload,
    ...(typeof contentType === 'string' ? { contentType } : {}),
    ...(hashAlg !== undefined ? { payloadHashAlg: hashAlg } : {}),
    ...(typeof preimage === 'string' ? { preimageContentType: preimage } : {}),
  };
}
