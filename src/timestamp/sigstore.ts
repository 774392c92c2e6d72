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

/** Media type of a Sigstore trusted root (protobuf-specs `TrustedRoot`, JSON form). */
export const SIGSTORE_TRUSTED_ROOT = 'application/vnd.dev.sigstore.trustedroot+json;version=0.1';

/** `CN`/`O` of a distinguished name as node prints it (one `key=value` per line). */
function dnPart(dn: string, key: string): string | undefined {
  return dn
    .split('\n')
    .find((l) => l.startsWith(`${key}=`))
    ?.slice(key.length + 1);
}

/**
 * A Sigstore trusted root naming only time-stamping authorities, one per root certificate: what
 * `cosign verify-blob-attestation --bundle … --key … --use-signed-timestamps --trusted-root` needs
 * to accept a bundle's RFC 3161 time-stamps offline (checked with cosign 3.1.3: the TSA's root alone
 * suffices, the token carries the TSA's own certificate). No CAs, logs or CT logs: keys come from
 * `--key`, and the vault's transparency is SCITT.
 */
export function tsaTrustedRoot(roots: readonly X509Certificate[]): object {
  return {
    mediaType: SIGSTORE_TRUSTED_ROOT,
    tlogs: [],
    certificateAuthorities: [],
    ctlogs: [],
    timestampAuthorities: roots.map((c) => ({
      subject: {
        organization: dnPart(c.subject, 'O') ?? '',
        commonName: dnPart(c.subject, 'CN') ?? '',
      },
      uri: `urn:aibom-vault:tsa:${c.fingerprint256.replaceAll(':', '').toLowerCase()}`,
      certChain: { certificates: [{ rawBytes: c.raw.toString('base64') }] },
      validFor: { start: c.validFromDate.toISOString(), end: c.validToDate.toISOString() },
    })),
  };
}
