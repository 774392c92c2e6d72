import type { X509Certificate } from 'node:crypto';
import type { Timestamper } from './client.ts';
import { TimestampError } from './errors.ts';
import { verifyTimestamp, type VerifiedTimestamp } from './rfc3161.ts';

/**
 * RFC 3161 time-stamps in Sigstore bundles (v0.3): one entry of
 * `verificationMaterial.timestampVerificationData.rfc3161Timestamps`, whose `signedTimestamp` is
 * the base64 DER TimeStampResp (protobuf-specs `RFC3161SignedTimestamp`). For a bundle holding a
 * DSSE envelope, the time-stamped data is the envelope's signature (the raw bytes of
 * `signatures[0].sig`), which is what sigstore-go, and so cosign, hashes to check the imprint.
 */
export interface Rfc3161SignedTimestamp {
  signedTimestamp: string;
}

/** The part of a DSSE envelope whose signature is time-stamped. */
export interface SignedEnvelope {
  readonly signatures: readonly { readonly sig: string }[];
}

/** The raw bytes of the envelope's first signature (what Sigstore verifiers time-stamp). */
export function dsseSignatureBytes(envelope: SignedEnvelope): Buffer {
  const sig = envelope.signatures[0]?.sig;
  if (sig === undefined || sig === '') {
    throw new TimestampError('MALFORMED_TIMESTAMP', 'the DSSE envelope has no signature to time-stamp');
  }
  return Buffer.from(sig, 'base64');
}

/**
 * Time-stamps a DSSE envelope's signature and returns the bundle entry for it, ready for
 * `verificationMaterial.timestampVerificationData.rfc3161Timestamps` (with the verified
 * time-stamp, for callers that record its time).
 */
export async function timestampDsseSignature(
  envelope: SignedEnvelope,
  tsa: Timestamper,
): Promise<{ entry: Rfc3161SignedTimestamp; timestamp: VerifiedTimestamp }> {
  const timestamp = await tsa.timestamp(dsseSignatureBytes(envelope));
  return { entry: { signedTimestamp: timestamp.response.toString('base64') }, timestamp };
}

/** Verifies a bundle's time-stamp entry against the envelope it accompanies. */
export function verifyDsseSignatureTimestamp(
  envelope: SignedEnvelope,
  entry: Rfc3161SignedTimestamp,
  trustAnchors: readonly X509Certificate[],
): VerifiedTimestamp {
  return verifyTimestamp(Buffer.from(entry.signedTimestamp, 'base64'), {
    data: dsseSignatureBytes(envelope),
    trustAnchors,
  });
}
