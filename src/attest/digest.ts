import { canonicalJson, sha256Hex } from './json.ts';
import { IN_TOTO_PAYLOAD_TYPE, type DsseEnvelope } from './dsse.ts';

export const DIGEST_PATTERN = /^sha256:[0-9a-f]{64}$/;

/**
 * The vault digest of an envelope: `sha256:` + hex SHA-256 of the UTF-8 bytes of the RFC 8785
 * (JCS) canonical JSON of the whole envelope object (payload, payloadType, signatures). It covers
 * the predicate (inside the payload) and the signatures, so any change to either is detected.
 * See docs/digest.md for recomputing it with other tools.
 */
export function envelopeDigest(envelope: DsseEnvelope): string {
  return `sha256:${sha256Hex(envelopeJcs(envelope) ?? canonicalJson(envelope))}`;
}

const ENVELOPE_KEYS = new Set(['payload', 'payloadType', 'signatures']);
const SIGNATURE_KEYS = new Set(['keyid', 'sig']);

function isPlainStringRecord(value: unknown, allowed: Set<string>): value is Record<string, string> {
  if (typeof value !== 'object' || value === null || Object.getPrototypeOf(value) !== Object.prototype)
    return false;
  for (const [key, member] of Object.entries(value)) {
    if (!allowed.has(key) || typeof member !== 'string' || !member.isWellFormed()) return false;
  }
  return true;
}

/**
 * Fast path for the one shape the vault stores (the digest is computed on every insert and every
 * verification; the generic canonicalizer walks the ~1 KB base64 payload character by character).
 * For plain objects whose members are exactly the DSSE fields and whose values are well-formed
 * strings, JCS is: members in the fixed sorted order payload < payloadType < signatures and
 * keyid < sig, strings serialised as JSON.stringify does (RFC 8785 §3.2.2.2 adopts exactly the
 * ECMAScript rules; lone surrogates, which JCS forbids, are excluded by isWellFormed). Anything
 * else returns undefined and takes the generic path. A property test checks both paths agree.
 */
export function envelopeJcs(envelope: unknown): string | undefined {
  if (
    typeof envelope !== 'object' ||
    envelope === null ||
    Object.getPrototypeOf(envelope) !== Object.prototype
  ) {
    return undefined;
  }
  const e = envelope as Record<string, unknown>;
  const keys = Object.keys(e);
  if (keys.length !== 3 || !keys.every((k) => ENVELOPE_KEYS.has(k))) return undefined;
  const { payload, payloadType, signatures } = e;
  if (typeof payload !== 'string' || typeof payloadType !== 'string' || !Array.isArray(signatures))
    return undefined;
  if (!payload.isWellFormed() || !payloadType.isWellFormed()) return undefined;
  const parts: string[] = [];
  for (const s of signatures as unknown[]) {
    if (!isPlainStringRecord(s, SIGNATURE_KEYS)) return undefined;
    const members: string[] = [];
    if (s.keyid !== undefined) members.push(`"keyid":${JSON.stringify(s.keyid)}`);
    if (s.sig !== undefined) members.push(`"sig":${JSON.stringify(s.sig)}`);
    parts.push(`{${members.join(',')}}`);
  }
  return (
    `{"payload":${JSON.stringify(payload)},"payloadType":${JSON.stringify(payloadType)},` +
    `"signatures":[${parts.join(',')}]}`
  );
}

const IN_TOTO_TYPE_MEMBER = `,"payloadType":${JSON.stringify(IN_TOTO_PAYLOAD_TYPE)},"signatures":[{"keyid":`;

/**
 * envelopeDigest of an envelope that signStatement has just made (one signature, the in-toto
 * payload type, `payload` and `sig` standard base64 from Buffer#toString): its JCS text is
 * assembled from the pieces, without envelopeJcs's checks and JSON.stringify of the ~1 KB base64
 * payload (about 60% of envelopeDigest: profile of `npm run bench -- sign`, docs/bench.md). Base64
 * text needs no JSON escaping, so `"` + it + `"` is its JSON string. A key id that is not
 * well-formed, or any other envelope, takes envelopeDigest (same result or the same error). The
 * unit tests check both agree.
 */
export function signedEnvelopeDigest(envelope: DsseEnvelope): string {
  const signatures = envelope.signatures;
  const signature = signatures[0];
  if (signature === undefined || signatures.length !== 1 || envelope.payloadType !== IN_TOTO_PAYLOAD_TYPE) {
    return envelopeDigest(envelope);
  }
  const middle = keyMember(signature.keyid);
  if (middle === undefined) return envelopeDigest(envelope);
  return `sha256:${sha256Hex(`{"payload":"${envelope.payload}${middle}${signature.sig}"}]}`)}`;
}

/**
 * The JCS text between the payload and the signature for one key id (`","payloadType":…,"keyid":
 * <JSON string>,"sig":"`), kept for the last key id seen: a signer seals with one key id, and this
 * saves its checks, its JSON.stringify and two concatenations per seal (`npm run bench -- sign`:
 * sealStatement ~0.02–0.03× nearer its floor, docs/bench.md). Undefined for a key id JCS cannot
 * encode (a lone surrogate), which envelopeDigest then reports.
 */
let lastKeyid: string | undefined;
let lastMiddle = '';
function keyMember(keyid: string): string | undefined {
  if (keyid !== lastKeyid) {
    if (!keyid.isWellFormed()) return undefined;
    lastMiddle = `"${IN_TOTO_TYPE_MEMBER}${JSON.stringify(keyid)},"sig":"`;
    lastKeyid = keyid;
  }
  return lastMiddle;
}
