import { hash, type X509Certificate } from 'node:crypto';
import { algorithmOf, keyIdOf, parseCertificates, validateChain } from '../signing/index.ts';
import { decodeCborObject } from '../cose/cbor.ts';
import { verifySign1 } from '../cose/sign1.ts';
import { TimestampError, type TimestampErrorCode } from '../timestamp/errors.ts';
import { readTimestamp, verifyTimestamp } from '../timestamp/rfc3161.ts';
import { parseClaimSignature, sigTstOf, timestampedData, type ClaimSignature } from './claim-signature.ts';
import { C2paError, type C2paProblem } from './errors.ts';
import { childSuperBoxes, contentBoxes, parseJumbf, payloadOf, Uuids, type SuperBox } from './jumbf.ts';
import {
  ASSERTION_STORE_LABEL,
  ATTESTATIONS_LABEL,
  CLAIM_LABEL,
  DATA_HASH_LABEL,
  SIGNATURE_LABEL,
  STORE_LABEL,
} from './labels.ts';

export interface VerifyManifestInput {
  /** The `.c2pa` sidecar bytes. */
  store: Buffer;
  /** The artifact bytes the manifest claims to describe. */
  asset: Buffer;
  /**
   * SHA-256 of the asset, when the caller hashed a stream (then `asset` is ignored); only manifests
   * whose data hash uses sha256 can be checked this way.
   */
  assetSha256?: Buffer;
  /** PEM bundle (or parsed certificates) of the CAs a signer must chain to. */
  trustAnchors: string | readonly X509Certificate[];
  /**
   * Time the certificate chain is checked at when the manifest carries no trusted time-stamp;
   * default now.
   */
  at?: Date;
  /**
   * Roots of the time-stamping authorities whose `sigTst` tokens are trusted (PEM or parsed). With
   * a token that verifies against them, the signer's chain is judged at the token's time instead.
   */
  tsaTrustAnchors?: string | readonly X509Certificate[];
}

/** The claim signature's RFC 3161 time-stamp (`sigTst`), as the verifier judged it. */
export interface ManifestTimestamp {
  /** The token's genTime. */
  time: Date;
  /** Subject of the TSA certificate, one line (when the token could be read that far). */
  tsa?: string;
  /** The token verified against `tsaTrustAnchors`: certificates were judged at `time`. */
  trusted: boolean;
  /** Why it is not trusted (`CODE: message`, TimestampError codes), when it is not. */
  reason?: string;
}

export interface VerifyManifestResult {
  /** True only when there are no problems: bound to the asset, intact, signed by a trusted signer. */
  ok: boolean;
  problems: C2paProblem[];
  manifestLabel?: string;
  /** `sha256:<hex>` of the leaf's SubjectPublicKeyInfo (same scheme as `Signer.keyId`). */
  signerKeyId?: string;
  /** Subject of the leaf certificate, one line. */
  signer?: string;
  /** The x5chain leaf; its key is trusted only when `ok`. */
  signerCertificate?: X509Certificate;
  /** The whole x5chain, leaf first. */
  chain?: X509Certificate[];
  /** The time the signer's certificate chain was judged at: a trusted time-stamp's, else `at` or now. */
  checkedAt?: Date;
  /** Present when the claim signature carries a `sigTst` time-stamp. */
  timestamp?: ManifestTimestamp;
  claimGenerator?: string;
  title?: string;
  format?: string;
  instanceId?: string;
  /**
   * Content of the vault assertion, present when the claim signature verifies and the assertion
   * matches its hash in the claim. Trusted only when `ok` (the signer may still be unknown).
   */
  runId?: string;
  attestationIds?: string[];
}

/** EKUs C2PA 1.4 (§14.5.1) lists for claim signers, plus the C2PA-specific claim-signing purpose. */
const ACCEPTED_EKUS = new Set([
  '1.3.6.1.5.5.7.3.4', // emailProtection
  '1.3.6.1.5.5.7.3.36', // documentSigning
  '1.3.6.1.5.5.7.3.8', // timeStamping
  '1.3.6.1.5.5.7.3.9', // OCSPSigning
  '1.3.6.1.4.1.311.76.59.1.9', // Microsoft document signing
  '1.3.6.1.4.1.62558.2.1', // c2pa-kp-claimSigning
]);

const MANIFEST_LABEL =
  /^urn:(?:uuid|c2pa):[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}(?::[^/:]*){0,2}$/i;

const ANY_EKU = '2.5.29.37.0';

const HASH_ALGS = new Set(['sha256', 'sha384', 'sha512']);

interface HashedUri {
  url: string;
  hash: Buffer;
  alg?: string;
}

interface Claim {
  claim_generator: string;
  signature: string;
  assertions: HashedUri[];
  'dc:format': string;
  instanceID: string;
  'dc:title'?: string;
  alg?: string;
}

const isRecord = (v: unknown): v is Record<string, unknown> =>
  typeof v === 'object' && v !== null && !Array.isArray(v) && !Buffer.isBuffer(v);

function malformed(message: string): C2paError {
  return new C2paError('MALFORMED_MANIFEST', message);
}

function decodeCbor(box: SuperBox, what: string): unknown {
  const content = contentBoxes(box).find((c) => c.type === 'cbor');
  if (content === undefined) throw malformed(`${what} has no CBOR content box`);
  try {
    return decodeCborObject(content.payload);
  } catch (cause) {
    throw new C2paError('MALFORMED_MANIFEST', `${what} is not valid CBOR`, { cause });
  }
}

function parseClaim(value: unknown): Claim {
  if (!isRecord(value)) throw malformed('claim is not a map');
  const text = (key: string, optional = false): void => {
    if (value[key] === undefined && optional) return;
    if (typeof value[key] !== 'string') throw malformed(`claim field "${key}" is missing or not text`);
  };
  text('claim_generator');
  text('signature');
  text('dc:format');
  text('instanceID');
  text('dc:title', true);
  text('alg', true);
  const assertions = value.assertions;
  if (!Array.isArray(assertions) || assertions.length === 0) throw malformed('claim has no assertions');
  for (const a of assertions as unknown[]) {
    if (!isRecord(a) || typeof a.url !== 'string' || !Buffer.isBuffer(a.hash)) {
      throw malformed('claim assertion reference is not a hashed URI {url, hash}');
    }
    if (a.alg !== undefined && typeof a.alg !== 'string') throw malformed('hashed URI alg is not text');
  }
  return value as unknown as Claim;
}

/** Resolves `self#jumbf=` URIs relative to the manifest (`c2pa.assertions/x`) or absolute (`/c2pa/<label>/…`). */
function resolveInManifest(url: string, manifestLabel: string): string | undefined {
  const prefix = 'self#jumbf=';
  if (!url.startsWith(prefix)) return undefined;
  const path = url.slice(prefix.length);
  const absolute = `/${STORE_LABEL}/${manifestLabel}/`;
  if (path.startsWith(absolute)) return path.slice(absolute.length);
  return path.startsWith('/') ? undefined : path;
}

function oneLine(dn: string): string {
  return dn.replaceAll('\n', ', ');
}

/** C2PA signer profile (1.4 §14.5.1) as far as it matters here: an end-entity with an accepted EKU. */
function signerProfileProblem(leaf: X509Certificate): string | undefined {
  if (leaf.ca) return 'leaf certificate is a CA';
  if (leaf.checkIssued(leaf)) return 'leaf certificate is self-signed';
  // Node exposes the *extended* key usage OIDs as `keyUsage`; undefined without the extension.
  const ekus = leaf.keyUsage as string[] | undefined;
  if (ekus?.includes(ANY_EKU)) return 'leaf certificate allows anyExtendedKeyUsage';
  if (ekus !== undefined && !ekus.some((oid) => ACCEPTED_EKUS.has(oid))) {
    return `leaf certificate has no extended key usage C2PA accepts (has ${ekus.join(', ')})`;
  }
  return undefined;
}

/**
 * Verifies a sidecar manifest store against the asset bytes, offline: JUMBF structure, claim,
 * every hashed URI, the hard-binding data hash, the COSE signature with the x5chain leaf, and the
 * chain to `trustAnchors`. Collects all problems instead of stopping at the first one; only
 * structural damage that makes further checks meaningless ends it early (MALFORMED_MANIFEST).
 * Throws only for an unusable `trustAnchors` argument (a caller bug, not a manifest problem).
 */
export function verifyManifest(input: VerifyManifestInput): VerifyManifestResult {
  const anchors =
    typeof input.trustAnchors === 'string'
      ? parseCertificates(input.trustAnchors, 'trustAnchors')
      : [...input.trustAnchors];
  const tsaAnchors =
    typeof input.tsaTrustAnchors === 'string'
      ? parseCertificates(input.tsaTrustAnchors, 'tsaTrustAnchors')
      : [...(input.tsaTrustAnchors ?? [])];
  const result: VerifyManifestResult = { ok: false, problems: [] };
  try {
    check(input, anchors, tsaAnchors, result);
  } catch (error) {
    if (!(error instanceof C2paError) || error.code === 'INVALID_INPUT') throw error;
    result.problems.push({ code: error.code, message: error.message });
  }
  result.ok = result.problems.length === 0;
  return result;
}

function check(
  input: VerifyManifestInput,
  anchors: X509Certificate[],
  tsaAnchors: X509Certificate[],
  result: VerifyManifestResult,
): void {
  const problems = result.problems;
  const store = parseJumbf(input.store);
  if (!store.uuid.equals(Uuids.manifestStore) || store.label !== STORE_LABEL) {
    throw malformed('top-level box is not a C2PA manifest store');
  }
  // The active manifest is the last one in the store (C2PA 1.4 §11.1.4.1).
  const manifest = childSuperBoxes(store)
    .filter((b) => b.uuid.equals(Uuids.manifest))
    .at(-1);
  if (manifest === undefined) throw malformed('manifest store contains no manifest');
  // Claim v1 does not sign the manifest label; checking its form is all a verifier can do.
  if (!MANIFEST_LABEL.test(manifest.label))
    throw malformed(`manifest label "${manifest.label}" is not a URN`);
  result.manifestLabel = manifest.label;
  const parts = childSuperBoxes(manifest);
  const find = (uuid: Buffer, label: string): SuperBox => {
    const found = parts.filter((b) => b.uuid.equals(uuid) && b.label === label);
    if (found.length !== 1) throw malformed(`manifest must contain exactly one "${label}" box`);
    return found[0] as SuperBox;
  };
  const assertionStore = find(Uuids.assertionStore, ASSERTION_STORE_LABEL);
  const claimBox = find(Uuids.claim, CLAIM_LABEL);
  const signatureBox = find(Uuids.signature, SIGNATURE_LABEL);

  const claimBytes = contentBoxes(claimBox).find((c) => c.type === 'cbor')?.payload;
  if (claimBytes === undefined) throw malformed('claim box has no CBOR content');
  const claim = parseClaim(decodeCbor(claimBox, 'claim'));
  result.claimGenerator = claim.claim_generator;
  result.format = claim['dc:format'];
  result.instanceId = claim.instanceID;
  if (claim['dc:title'] !== undefined) result.title = claim['dc:title'];
  if (resolveInManifest(claim.signature, manifest.label) !== SIGNATURE_LABEL) {
    throw malformed(`claim signature reference "${claim.signature}" does not name this manifest's signature`);
  }
  const claimAlg = claim.alg ?? 'sha256';

  // Signature and trust first: a failed signature makes everything the claim says untrustworthy,
  // but the hash checks still run so a report shows what exactly was changed.
  const signatureContent = contentBoxes(signatureBox).find((c) => c.type === 'cbor');
  if (signatureContent === undefined) throw malformed('signature box has no CBOR content');
  checkSignature(
    parseClaimSignature(signatureContent.payload),
    claimBytes,
    { anchors, tsaAnchors, at: input.at ?? new Date() },
    result,
  );

  const assertionBoxes = new Map<string, SuperBox>();
  for (const box of childSuperBoxes(assertionStore)) {
    if (assertionBoxes.has(box.label)) throw malformed(`duplicate assertion "${box.label}"`);
    assertionBoxes.set(box.label, box);
  }
  const referenced = new Map<string, SuperBox>();
  for (const ref of claim.assertions) {
    const alg = ref.alg ?? claimAlg;
    const path = resolveInManifest(ref.url, manifest.label);
    const prefix = `${ASSERTION_STORE_LABEL}/`;
    if (path === undefined || !path.startsWith(prefix)) {
      throw malformed(`assertion reference "${ref.url}" does not point into this manifest's assertion store`);
    }
    const label = path.slice(prefix.length);
    const box = assertionBoxes.get(label);
    if (box === undefined) {
      problems.push({
        code: 'ASSERTION_HASH_MISMATCH',
        message: `assertion "${label}" referenced by the claim is missing`,
      });
      continue;
    }
    if (!HASH_ALGS.has(alg))
      throw new C2paError('UNSUPPORTED_MANIFEST', `unsupported hash algorithm "${alg}"`);
    if (!hash(alg, payloadOf(box), 'buffer').equals(ref.hash)) {
      problems.push({
        code: 'ASSERTION_HASH_MISMATCH',
        message: `assertion "${label}" does not match its hash in the claim`,
      });
      continue;
    }
    referenced.set(label, box);
  }

  const dataHashBox = referenced.get(DATA_HASH_LABEL);
  if (dataHashBox === undefined) {
    if (!problems.some((p) => p.code === 'ASSERTION_HASH_MISMATCH')) {
      problems.push({
        code: 'MALFORMED_MANIFEST',
        message: `claim has no hard binding (${DATA_HASH_LABEL})`,
      });
    }
  } else {
    const dataHash = decodeCbor(dataHashBox, DATA_HASH_LABEL);
    if (!isRecord(dataHash) || !Buffer.isBuffer(dataHash.hash)) throw malformed('data hash has no hash');
    const alg = typeof dataHash.alg === 'string' ? dataHash.alg : claimAlg;
    if (!HASH_ALGS.has(alg))
      throw new C2paError('UNSUPPORTED_MANIFEST', `unsupported hash algorithm "${alg}"`);
    // Exclusions leave bytes unbound; they exist for embedding, which a sidecar does not do.
    const { exclusions } = dataHash;
    if (exclusions !== undefined && !(Array.isArray(exclusions) && exclusions.length === 0)) {
      throw new C2paError(
        'UNSUPPORTED_MANIFEST',
        'data hash excludes byte ranges of the asset (embedded manifest?)',
      );
    }
    if (input.assetSha256 !== undefined && alg !== 'sha256') {
      throw new C2paError('UNSUPPORTED_MANIFEST', `data hash uses ${alg}; only sha256 can be checked here`);
    }
    const actual = input.assetSha256 ?? hash(alg, input.asset, 'buffer');
    if (!actual.equals(dataHash.hash)) {
      problems.push({
        code: 'DATA_HASH_MISMATCH',
        message: 'asset bytes do not match the manifest data hash',
      });
    }
  }

  const attestationsBox = referenced.get(ATTESTATIONS_LABEL);
  if (attestationsBox === undefined) {
    if (!assertionBoxes.has(ATTESTATIONS_LABEL)) {
      problems.push({
        code: 'UNSUPPORTED_MANIFEST',
        message: `manifest has no ${ATTESTATIONS_LABEL} assertion`,
      });
    }
  } else {
    const body = decodeCbor(attestationsBox, ATTESTATIONS_LABEL);
    if (
      !isRecord(body) ||
      typeof body.run_id !== 'string' ||
      !Array.isArray(body.attestation_ids) ||
      !(body.attestation_ids as unknown[]).every((id) => typeof id === 'string')
    ) {
      throw malformed(`${ATTESTATIONS_LABEL} is not {run_id, attestation_ids}`);
    }
    // Only what the signed claim vouches for is reported; `ok` still decides whether to trust it.
    if (!problems.some((p) => p.code === 'SIGNATURE_INVALID')) {
      result.runId = body.run_id;
      result.attestationIds = body.attestation_ids as string[];
    }
  }
}

/**
 * The time the signer's chain is judged at: the `sigTst` token's genTime when the token verifies
 * for this claim signature against the TSA anchors (`result.timestamp.trusted`), else `fallback`.
 * A token that is not for this signature (imprint, CMS signature, structure) is a problem of its
 * own; one from a TSA that is not trusted here is reported as untrusted and ignored, as c2pa-rs
 * does (`timeStamp.untrusted` is informational).
 */
function signingTime(
  cose: ClaimSignature,
  claimBytes: Buffer,
  tsaAnchors: readonly X509Certificate[],
  fallback: Date,
  result: VerifyManifestResult,
): { at: Date; trusted: boolean } {
  const response = sigTstOf(cose.sign1);
  if (response === undefined) return { at: fallback, trusted: false };
  try {
    const v = verifyTimestamp(response, {
      data: timestampedData(cose.sign1.protectedBytes, claimBytes),
      trustAnchors: tsaAnchors,
    });
    result.timestamp = { time: v.genTime, tsa: v.tsa, trusted: true };
    return { at: v.genTime, trusted: true };
  } catch (err) {
    if (!(err instanceof TimestampError)) throw err;
    if (TAMPERED.has(err.code)) {
      result.problems.push({ code: 'TIMESTAMP_INVALID', message: `sigTst: ${err.message}` });
      return { at: fallback, trusted: false };
    }
    let time: Date | undefined;
    try {
      time = readTimestamp(response).genTime;
    } catch {
      // unreadable: reported through `reason` only
    }
    result.timestamp = {
      time: time ?? new Date(Number.NaN),
      trusted: false,
      reason: `${err.code}: ${err.message}`,
    };
    return { at: fallback, trusted: false };
  }
}

/** Time-stamp failures that mean the token is not genuinely this signature's. */
const TAMPERED = new Set<TimestampErrorCode>([
  'IMPRINT_MISMATCH',
  'TIMESTAMP_SIGNATURE_INVALID',
  'MALFORMED_TIMESTAMP',
]);

function checkSignature(
  cose: ClaimSignature,
  claimBytes: Buffer,
  trust: { anchors: readonly X509Certificate[]; tsaAnchors: readonly X509Certificate[]; at: Date },
  result: VerifyManifestResult,
): void {
  const { anchors } = trust;
  const { at, trusted } = signingTime(cose, claimBytes, trust.tsaAnchors, trust.at, result);
  result.checkedAt = at;
  const leaf = cose.chain[0] as X509Certificate;
  result.signerKeyId = keyIdOf(leaf.publicKey);
  result.signer = oneLine(leaf.subject);
  result.signerCertificate = leaf;
  result.chain = cose.chain;
  if (algorithmOf(leaf.publicKey) !== cose.algorithm) {
    result.problems.push({
      code: 'SIGNATURE_INVALID',
      message: `COSE alg ${cose.algorithm} does not match the leaf certificate key`,
    });
  } else if (!verifySign1(cose.sign1, leaf.publicKey, claimBytes)) {
    result.problems.push({
      code: 'SIGNATURE_INVALID',
      message: 'claim signature does not verify with the x5chain leaf',
    });
  }
  const profile = signerProfileProblem(leaf);
  if (profile !== undefined) result.problems.push({ code: 'UNTRUSTED_SIGNER', message: profile });
  let chain: ReturnType<typeof validateChain>;
  try {
    chain = validateChain(cose.chain, anchors, at);
  } catch (cause) {
    // OpenSSL rejects some malformed certificates only when asked to verify with them.
    chain = {
      ok: false,
      failure: 'BROKEN',
      message: `certificate chain cannot be checked: ${String(cause)}`,
    };
  }
  if (!chain.ok) {
    const expired = chain.failure === 'EXPIRED' || chain.failure === 'NOT_YET_VALID';
    result.problems.push({
      code: !expired ? 'UNTRUSTED_SIGNER' : trusted ? 'TIMESTAMP_OUTSIDE_VALIDITY' : 'CERTIFICATE_EXPIRED',
      message: trusted
        ? `${chain.message}; the claim's trusted time-stamp is ${at.toISOString()}`
        : chain.message,
    });
  }
}
