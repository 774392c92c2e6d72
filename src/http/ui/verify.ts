import { createPublicKey, type X509Certificate } from 'node:crypto';
import { verifyRecord, type Trust } from '../../attest/index.ts';
import { parseCertificates } from '../../signing/index.ts';

/**
 * The verification state the run page shows for each attestation: the checks `service-ctl verify`
 * makes offline (digest, DSSE signature, statement and predicate schema, labels), made by the
 * sidecar on the record as /v1 served it, against the trust bundle of GET /v1/keys (the signer's
 * chain named by `cert_chain_ref`, up to the CA of that bundle). It tells a record altered in the
 * database from an intact one; it cannot vouch for the service itself, so every row also names the
 * command that checks the same record independently (docs/adr/0016-web-ui.md).
 */

export interface TrustBundleView {
  readonly trust_anchors_pem: string;
  readonly signers: readonly { cert_chain_ref: string; key_id: string; chain_pem: string; ca_pem?: string }[];
}

export type VerificationState =
  | { readonly state: 'verified'; readonly keyId: string }
  | { readonly state: 'failed'; readonly problems: readonly string[] }
  | { readonly state: 'unknown_key'; readonly problems: readonly string[] };

const certs = (pem: string | undefined, what: string): X509Certificate[] => {
  if (pem === undefined || !pem.includes('BEGIN CERTIFICATE')) return [];
  try {
    return parseCertificates(pem, what);
  } catch {
    return [];
  }
};

/** A verifier over one trust bundle (its certificates parsed once per page). */
export function recordVerifier(
  bundle: TrustBundleView,
): (record: Record<string, unknown>) => VerificationState {
  const anchors = certs(bundle.trust_anchors_pem, 'trust anchors');
  const trustFor = new Map<string, Trust>();
  for (const entry of bundle.signers) {
    if (trustFor.has(entry.cert_chain_ref)) continue;
    if (entry.chain_pem.includes('BEGIN CERTIFICATE')) {
      trustFor.set(entry.cert_chain_ref, {
        certificateChain: certs(entry.chain_pem, 'signer chain'),
        trustAnchors: [...anchors, ...certs(entry.ca_pem, 'signer CA')],
      });
    } else {
      try {
        trustFor.set(entry.cert_chain_ref, { publicKeys: [createPublicKey(entry.chain_pem)] });
      } catch {
        /* not a key: left unknown */
      }
    }
  }
  return (record) => {
    const signature = record.signature as { cert_chain_ref?: string | null; key_id?: string } | undefined;
    const ref = signature?.cert_chain_ref ?? signature?.key_id ?? '';
    const trust = trustFor.get(ref);
    if (trust === undefined) {
      return { state: 'unknown_key', problems: [`no key in the trust bundle for ${ref || 'this record'}`] };
    }
    const result = verifyRecord(record, trust);
    if (result.ok && result.keyId !== undefined) return { state: 'verified', keyId: result.keyId };
    return { state: 'failed', problems: result.problems.map((p) => `${p.code}: ${p.message}`) };
  };
}
