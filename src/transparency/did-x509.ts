import { hash, type X509Certificate } from 'node:crypto';
import { TransparencyError } from './errors.ts';

/**
 * did:x509 issuer identifiers (method version 0, https://github.com/microsoft/did-x509), the form
 * SCITT services such as scitt-ccf-ledger expect in the CWT `iss` claim of a statement carrying an
 * x5chain:
 *
 *   did:x509:0:sha256:<base64url(SHA-256(DER of a CA certificate of the chain))>::<predicate>
 *
 * What this module produces, for the chain it is given (leaf first):
 * - the pinned CA is the LAST certificate of the chain (the root when the chain carries it, else
 *   the topmost intermediate). The method requires it to be a non-leaf certificate of the chain
 *   the verifier sees, which is why cose.ts puts the root into the statement's x5chain;
 * - the predicate is `subject:CN:<percent-encoded CN of the leaf>` by default, or
 *   `eku:<OID>` (documentSigning 1.3.6.1.5.5.7.3.36 when the leaf has it, else its first EKU).
 *
 * Percent-encoding follows the method: every byte of the UTF-8 value outside ALPHA / DIGIT / "-" /
 * "." / "_" becomes %XX (upper-case), so `aibom-vault dev signer` is `aibom-vault%20dev%20signer`.
 */

export type DidX509Policy = 'subject' | 'eku';

const EKU_DOCUMENT_SIGNING = '1.3.6.1.5.5.7.3.36';
const PREFIX = 'did:x509:0:';
const FINGERPRINT_ALGS = new Set(['sha256', 'sha384', 'sha512']);
const SUBJECT_KEYS = /^(?:CN|L|ST|O|OU|C|STREET|\d+(?:\.\d+)*)$/;

export function percentEncode(value: string): string {
  let out = '';
  for (const byte of Buffer.from(value, 'utf8')) {
    const c = String.fromCharCode(byte);
    out += /[A-Za-z0-9._-]/.test(c) ? c : `%${byte.toString(16).toUpperCase().padStart(2, '0')}`;
  }
  return out;
}

function percentDecode(value: string): string | undefined {
  if (!/^(?:[A-Za-z0-9._-]|%[0-9A-Fa-f]{2})+$/.test(value)) return undefined;
  try {
    return decodeURIComponent(value);
  } catch {
    return undefined;
  }
}

/** Subject attributes of a certificate; a key that occurs twice maps to undefined (ambiguous). */
export function subjectAttributes(cert: X509Certificate): Map<string, string | undefined> {
  const out = new Map<string, string | undefined>();
  // Node prints one `key=value` per line.
  for (const line of cert.subject.split('\n')) {
    const eq = line.indexOf('=');
    if (eq <= 0) continue;
    const key = line.slice(0, eq);
    out.set(key, out.has(key) ? undefined : line.slice(eq + 1));
  }
  return out;
}

function fingerprint(cert: X509Certificate, alg: string): string {
  return hash(alg, cert.raw, 'base64url');
}

/** The did:x509 of the leaf of `chain` (leaf first, at least one CA after it). */
export function didX509(
  chain: readonly X509Certificate[],
  options: { policy?: DidX509Policy; eku?: string } = {},
): string {
  const leaf = chain[0];
  const ca = chain.at(-1);
  if (leaf === undefined || ca === undefined || chain.length < 2) {
    throw new TransparencyError(
      'ISSUER_UNAVAILABLE',
      'a did:x509 issuer needs the CA certificate in the chain: configure ca.crt for the signer',
    );
  }
  const pin = `${PREFIX}sha256:${fingerprint(ca, 'sha256')}`;
  if ((options.policy ?? 'subject') === 'subject') {
    const cn = subjectAttributes(leaf).get('CN');
    if (cn === undefined || cn === '') {
      throw new TransparencyError(
        'ISSUER_UNAVAILABLE',
        'the signing certificate has no single CN: use the eku did:x509 policy',
      );
    }
    return `${pin}::subject:CN:${percentEncode(cn)}`;
  }
  const ekus = leaf.keyUsage ?? [];
  const eku = options.eku ?? (ekus.includes(EKU_DOCUMENT_SIGNING) ? EKU_DOCUMENT_SIGNING : ekus[0]);
  if (eku === undefined || !ekus.includes(eku)) {
    throw new TransparencyError(
      'ISSUER_UNAVAILABLE',
      `the signing certificate has no extended key usage ${eku ?? ''} for an eku did:x509`.trim(),
    );
  }
  return `${pin}::eku:${eku}`;
}

/**
 * Resolves `did` against `chain` (leaf first): some non-leaf certificate has the pinned
 * fingerprint and every predicate holds for the leaf. Supports the `subject` and `eku` predicates;
 * `san` and `fulcio-issuer` make the match fail (unsupported, never silently accepted).
 */
export function matchDidX509(
  did: string,
  chain: readonly X509Certificate[],
): { ok: true } | { ok: false; reason: string } {
  const fail = (reason: string): { ok: false; reason: string } => ({ ok: false, reason });
  if (!did.startsWith(PREFIX)) return fail('not a did:x509 version 0 identifier');
  const [pin, ...predicates] = did.slice(PREFIX.length).split('::');
  const [alg, print, extra] = (pin ?? '').split(':');
  if (alg === undefined || print === undefined || extra !== undefined || !FINGERPRINT_ALGS.has(alg))
    return fail('unsupported CA fingerprint');
  if (!/^[A-Za-z0-9_-]+$/.test(print)) return fail('CA fingerprint is not base64url');
  if (predicates.length === 0) return fail('no predicate');
  const leaf = chain[0];
  if (leaf === undefined) return fail('empty certificate chain');
  if (!chain.slice(1).some((c) => fingerprint(c, alg) === print))
    return fail('no CA certificate of the chain has the pinned fingerprint');
  for (const predicate of predicates) {
    const colon = predicate.indexOf(':');
    const name = colon < 0 ? predicate : predicate.slice(0, colon);
    const value = colon < 0 ? '' : predicate.slice(colon + 1);
    if (name === 'subject') {
      const items = value.split(':');
      if (items.length < 2 || items.length % 2 !== 0) return fail('malformed subject predicate');
      const subject = subjectAttributes(leaf);
      const seen = new Set<string>();
      for (let i = 0; i < items.length; i += 2) {
        const key = items[i]!;
        const expected = percentDecode(items[i + 1]!);
        if (!SUBJECT_KEYS.test(key) || seen.has(key) || expected === undefined)
          return fail('malformed subject predicate');
        seen.add(key);
        if (subject.get(key) !== expected) return fail(`leaf subject ${key} does not match`);
      }
    } else if (name === 'eku') {
      if (!/^\d+(?:\.\d+)+$/.test(value)) return fail('malformed eku predicate');
      if (!(leaf.keyUsage ?? []).includes(value)) return fail(`leaf lacks extended key usage ${value}`);
    } else {
      return fail(`unsupported did:x509 predicate ${name}`);
    }
  }
  return { ok: true };
}
