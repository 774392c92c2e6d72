import type { X509Certificate } from 'node:crypto';

/** Why a chain is not acceptable; mapped to their own codes by the loader and the verifier. */
export type ChainFailure = 'BROKEN' | 'UNTRUSTED' | 'EXPIRED' | 'NOT_YET_VALID';

export type ChainResult =
  { ok: true; anchor: X509Certificate } | { ok: false; failure: ChainFailure; message: string };

/**
 * The code of a chain failure the signer loader and the record verifier share: a certificate out of
 * its validity period has its own code; any other failure is `otherwise` (each caller's own).
 */
export function chainFailureCode<Otherwise extends string>(
  failure: ChainFailure,
  otherwise: Otherwise,
): 'CERTIFICATE_EXPIRED' | 'CERTIFICATE_NOT_YET_VALID' | Otherwise {
  if (failure === 'EXPIRED') return 'CERTIFICATE_EXPIRED';
  if (failure === 'NOT_YET_VALID') return 'CERTIFICATE_NOT_YET_VALID';
  return otherwise;
}

/** Far beyond any real PKI; bounds the work an attacker-supplied chain can cause. */
const MAX_CHAIN_LENGTH = 8;

/**
 * Validates `chain` (leaf first, then intermediates in order) against `anchors` at time `at`:
 * every link is named by and signed by the next certificate, every issuer is a CA, the path ends at
 * an anchor (the anchor may also be in the chain, or be the leaf itself when pinned), and every
 * certificate on the path, anchor included, is within its validity period at `at`.
 *
 * Linkage and trust are checked before time so that a chain which is both foreign and expired
 * reports the more fundamental problem. No revocation checking: the vault has no CRL/OCSP source;
 * short-lived cert-manager certificates are the mitigation.
 */
export function validateChain(
  chain: readonly X509Certificate[],
  anchors: readonly X509Certificate[],
  at: Date,
): ChainResult {
  if (chain.length === 0) return { ok: false, failure: 'BROKEN', message: 'certificate chain is empty' };
  if (chain.length > MAX_CHAIN_LENGTH) {
    return { ok: false, failure: 'BROKEN', message: `certificate chain longer than ${MAX_CHAIN_LENGTH}` };
  }
  const path: X509Certificate[] = [];
  let anchor: X509Certificate | undefined;
  for (let i = 0; i < chain.length && anchor === undefined; i++) {
    const cert = chain[i] as X509Certificate;
    path.push(cert);
    const pinned = anchors.find((a) => a.raw.equals(cert.raw));
    if (pinned !== undefined) {
      anchor = pinned;
      break;
    }
    anchor = anchors.find((a) => a.ca && cert.checkIssued(a) && cert.verify(a.publicKey));
    if (anchor !== undefined) {
      path.push(anchor);
      break;
    }
    const next = chain[i + 1];
    if (next === undefined) {
      return {
        ok: false,
        failure: 'UNTRUSTED',
        message: 'the certificate chain does not lead to a trust anchor',
      };
    }
    if (!next.ca || !cert.checkIssued(next) || !cert.verify(next.publicKey)) {
      return {
        ok: false,
        failure: 'BROKEN',
        message: `certificate ${i + 1} of the chain is not issued and signed by certificate ${i + 2}, a CA`,
      };
    }
  }
  if (anchor === undefined) {
    // Unreachable: the loop either finds an anchor or returns; kept so the type narrows honestly.
    return { ok: false, failure: 'UNTRUSTED', message: 'no trust anchor' };
  }
  const when = at.getTime();
  for (const [i, cert] of path.entries()) {
    // The validity dates come from certificates the anchor vouches for (the path is linked by now).
    if (when < cert.validFromDate.getTime()) {
      return {
        ok: false,
        failure: 'NOT_YET_VALID',
        message: `${position(i, path.length)} is not valid before ${cert.validFromDate.toISOString()}`,
      };
    }
    if (when > cert.validToDate.getTime()) {
      return {
        ok: false,
        failure: 'EXPIRED',
        message: `${position(i, path.length)} expired at ${cert.validToDate.toISOString()}`,
      };
    }
  }
  return { ok: true, anchor };
}

/** A certificate that names and signs itself (a root); such a certificate anchors, never links. */
export function isSelfSigned(cert: X509Certificate): boolean {
  return cert.checkIssued(cert) && cert.verify(cert.publicKey);
}

/**
 * Which certificate of a path a message is about, by position: messages never quote a name from a
 * certificate, which whoever made the chain chose (a subject can read like anything, and messages
 * reach API answers and logs).
 */
function position(i: number, length: number): string {
  if (i === 0) return 'the signer certificate';
  return i === length - 1 ? 'the trust anchor' : `certificate ${i + 1} of the chain`;
}
