import type { Rfc3161SignedTimestamp } from '../timestamp/sigstore.ts';
import type { DsseEnvelope } from '../vault/index.ts';
import { dsseJson, jsonString, type DsseJson } from './json.ts';

/** Media type of a Sigstore bundle v0.3 (protobuf-specs `Bundle`, JSON form). */
export const SIGSTORE_BUNDLE_V03 = 'application/vnd.dev.sigstore.bundle.v0.3+json';

/**
 * A Sigstore bundle v0.3 around one stored DSSE envelope, for `cosign verify-blob-attestation
 * --bundle … --insecure-ignore-tlog` and other Sigstore clients, offline:
 *
 * - verification material: a public-key hint (the vault key id), not the certificate: cosign
 *   verifies a certificate bundle only with a Fulcio-style identity (a SAN and an OIDC issuer),
 *   which service signers do not have; with the hint, `--key` takes the key the key-distribution
 *   endpoint serves (ADR 0009);
 * - no transparency-log entries: the vault's transparency is SCITT, shipped beside as COSE files;
 * - the record's RFC 3161 time-stamp, when it has one, in
 *   `timestampVerificationData.rfc3161Timestamps` (over the raw signature bytes, what sigstore-go
 *   hashes), so `cosign … --use-signed-timestamps --trusted-root <root naming the TSA>` uses it;
 * - the envelope's signatures WITHOUT their `keyid`: cosign 3.1 finds no valid signature in a
 *   bundle whose DSSE signature carries a keyid that is not its own hint format (checked,
 *   /work/shared/NOTES.md); the signature bytes, payload and payload type are the stored ones.
 *
 * Field order is fixed (the protobuf-specs order), so a bundle is a pure function of its inputs.
 */
export interface SigstoreBundle {
  mediaType: typeof SIGSTORE_BUNDLE_V03;
  verificationMaterial: {
    publicKey: { hint: string };
    tlogEntries: [];
    timestampVerificationData: { rfc3161Timestamps: Rfc3161SignedTimestamp[] };
  };
  dsseEnvelope: { payload: string; payloadType: string; signatures: { sig: string }[] };
}

export interface SignerMaterial {
  readonly keyId: string;
}

export function sigstoreBundle(
  envelope: DsseEnvelope,
  signer: SignerMaterial,
  timestamps: readonly Rfc3161SignedTimestamp[] = [],
): SigstoreBundle {
  return {
    mediaType: SIGSTORE_BUNDLE_V03,
    verificationMaterial: {
      publicKey: { hint: signer.keyId },
      tlogEntries: [],
      timestampVerificationData: {
        rfc3161Timestamps: timestamps.map((t) => ({ signedTimestamp: t.signedTimestamp })),
      },
    },
    dsseEnvelope: {
      payload: envelope.payload,
      payloadType: envelope.payloadType,
      signatures: envelope.signatures.map((s) => ({ sig: s.sig })),
    },
  };
}

/**
 * `JSON.stringify(sigstoreBundle(envelope, signer, timestamps))`, built from the envelope's shared
 * JSON texts (json.ts) when it has them.
 */
export function sigstoreBundleJson(
  envelope: DsseEnvelope,
  signer: SignerMaterial,
  timestamps: readonly Rfc3161SignedTimestamp[] = [],
  dsse: DsseJson | null = dsseJson(envelope),
): string {
  if (
    dsse === null ||
    typeof signer.keyId !== 'string' ||
    !timestamps.every((t) => typeof t.signedTimestamp === 'string')
  ) {
    return JSON.stringify(sigstoreBundle(envelope, signer, timestamps));
  }
  const times = timestamps.map((t) => `{"signedTimestamp":${jsonString(t.signedTimestamp)}}`).join(',');
  const sigs = dsse.signatures.map((s) => `{"sig":${s.sig}}`).join(',');
  return (
    `{"mediaType":"${SIGSTORE_BUNDLE_V03}","verificationMaterial":{"publicKey":{"hint":${jsonString(signer.keyId)}},` +
    `"tlogEntries":[],"timestampVerificationData":{"rfc3161Timestamps":[${times}]}},` +
    `"dsseEnvelope":{"payload":${dsse.payload},"payloadType":${dsse.payloadType},"signatures":[${sigs}]}}`
  );
}

/**
 * Why `bundle` is not the Sigstore form of `envelope` signed by `signer` with the record's
 * `timestamps` (empty when it is): same payload, payload type and signatures, and the verification
 * material names the same signer and carries the same time-stamps.
 */
export function sigstoreBundleProblems(
  bundle: unknown,
  envelope: DsseEnvelope,
  signer: SignerMaterial,
  timestamps: readonly Rfc3161SignedTimestamp[] = [],
): string[] {
  const canonical = sigstoreBundle(envelope, signer, timestamps);
  const expected = JSON.stringify(canonical);
  let actual: string;
  try {
    actual = JSON.stringify(bundle);
  } catch {
    return ['not JSON'];
  }
  if (actual === expected) return [];
  const b = bundle as Partial<SigstoreBundle> | null;
  const problems: string[] = [];
  if (b?.mediaType !== SIGSTORE_BUNDLE_V03) problems.push(`mediaType is not ${SIGSTORE_BUNDLE_V03}`);
  if (JSON.stringify(b?.dsseEnvelope) !== JSON.stringify(canonical.dsseEnvelope)) {
    problems.push('dsseEnvelope differs from the attestation envelope');
  }
  const { timestampVerificationData: expectedTimes, ...expectedSigner } = canonical.verificationMaterial;
  const { timestampVerificationData: actualTimes, ...actualSigner } = b?.verificationMaterial ?? {};
  if (JSON.stringify(actualSigner) !== JSON.stringify(expectedSigner)) {
    problems.push("verificationMaterial does not name the record's signer");
  }
  if (JSON.stringify(actualTimes) !== JSON.stringify(expectedTimes)) {
    problems.push("timestampVerificationData does not carry the record's RFC 3161 time-stamp");
  }
  if (problems.length === 0) problems.push('differs from the canonical bundle of this envelope');
  return problems;
}
