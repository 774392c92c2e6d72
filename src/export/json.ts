import type { DsseEnvelope } from '../vault/index.ts';

/**
 * JSON texts of a record's DSSE envelope for the export, built from parts instead of
 * `JSON.stringify` of whole objects, with the same bytes. The payload (base64, ~1.3 KiB for the
 * benchmark's records) is in three entries of each record — `envelope.json`, `sigstore.json` and
 * its `.intoto.jsonl` line — and `JSON.stringify` scans it for characters to escape each time
 * (about 1 ns a character). Here it is checked once per record ({@link dsseJson}) and its JSON
 * text shared ({@link intotoLine}, `sigstoreBundleJson`, {@link viewJson}). Shapes the vault does
 * not store fall back to `JSON.stringify`; test/unit/export/json.test.ts checks both paths.
 */

/** Printable ASCII without `"` and `\`: JSON.stringify only adds the quotes (base64, ids, media types). */
const JSON_PLAIN = /^[\x20\x21\x23-\x5b\x5d-\x7e]*$/;

/** `JSON.stringify(s)`; a string that needs no escaping skips V8's escaping pass (half the cost). */
export function jsonString(s: string): string {
  return JSON_PLAIN.test(s) ? `"${s}"` : JSON.stringify(s);
}

/** The JSON texts of a stored DSSE envelope's members, made once per record. */
export interface DsseJson {
  /** `JSON.stringify(envelope.payload)` */
  readonly payload: string;
  /** `JSON.stringify(envelope.payloadType)` */
  readonly payloadType: string;
  /** `JSON.stringify` of each signature's `keyid` and `sig`. */
  readonly signatures: readonly { readonly keyid: string; readonly sig: string }[];
  /**
   * `JSON.stringify({ payload, payloadType, signatures: [{ keyid, sig }, …] })`: the `.intoto.jsonl`
   * line without its newline, and the API view's `envelope` member.
   */
  readonly envelope: string;
}

/**
 * The JSON texts of `envelope`'s members, or null when it is not of the shape the vault stores
 * (strings where strings belong): the callers then serialise their objects with JSON.stringify.
 */
export function dsseJson(envelope: DsseEnvelope): DsseJson | null {
  if (typeof envelope.payload !== 'string' || typeof envelope.payloadType !== 'string') return null;
  if (!Array.isArray(envelope.signatures)) return null;
  const signatures: { keyid: string; sig: string }[] = [];
  let sigs = '';
  for (const s of envelope.signatures as unknown[]) {
    if (typeof s !== 'object' || s === null) return null;
    const { keyid, sig } = s as Record<string, unknown>;
    if (typeof keyid !== 'string' || typeof sig !== 'string') return null;
    const text = { keyid: jsonString(keyid), sig: jsonString(sig) };
    signatures.push(text);
    sigs += `${sigs === '' ? '' : ','}{"keyid":${text.keyid},"sig":${text.sig}}`;
  }
  const payload = jsonString(envelope.payload);
  const payloadType = jsonString(envelope.payloadType);
  return {
    payload,
    payloadType,
    signatures,
    envelope: `{"payload":${payload},"payloadType":${payloadType},"signatures":[${sigs}]}`,
  };
}

/** The object the `.intoto.jsonl` line and the view's `envelope` member serialise. */
function envelopeObject(envelope: DsseEnvelope): object {
  return {
    payload: envelope.payload,
    payloadType: envelope.payloadType,
    signatures: envelope.signatures.map((s) => ({ keyid: s.keyid, sig: s.sig })),
  };
}

/** A line of the `.intoto.jsonl`: the DSSE envelope exactly as stored (its digest is the record's). */
export function intotoLine(envelope: DsseEnvelope, dsse: DsseJson | null = dsseJson(envelope)): string {
  return `${dsse !== null ? dsse.envelope : JSON.stringify(envelopeObject(envelope))}\n`;
}

/** A plain object whose own keys are exactly `keys`, in this order (JSON.stringify writes them so). */
function plainWithKeys(value: unknown, keys: readonly string[]): value is Record<string, unknown> {
  if (typeof value !== 'object' || value === null || Object.getPrototypeOf(value) !== Object.prototype) {
    return false;
  }
  const own = Object.keys(value);
  return own.length === keys.length && own.every((k, i) => k === keys[i]);
}

/**
 * `value` serialises as {@link DsseJson.envelope} of `envelope`: a plain object with exactly the
 * members payload, payloadType and signatures (a plain array of plain objects with exactly keyid
 * and sig), holding the very strings of `envelope` — what toApiEnvelope builds.
 */
function isEnvelopeOf(value: unknown, envelope: DsseEnvelope): boolean {
  if (!plainWithKeys(value, ['payload', 'payloadType', 'signatures'])) return false;
  if (value.payload !== envelope.payload || value.payloadType !== envelope.payloadType) return false;
  const sigs = value.signatures;
  if (!Array.isArray(sigs) || Object.getPrototypeOf(sigs) !== Array.prototype) return false;
  if (sigs.length !== envelope.signatures.length) return false;
  for (let i = 0; i < sigs.length; i++) {
    const s: unknown = sigs[i];
    if (!plainWithKeys(s, ['keyid', 'sig'])) return false;
    if (s.keyid !== envelope.signatures[i]!.keyid || s.sig !== envelope.signatures[i]!.sig) return false;
  }
  return true;
}

const hasToJson = (value: unknown): boolean =>
  typeof (value as { toJSON?: unknown } | null | undefined)?.toJSON === 'function';

/**
 * `JSON.stringify(view)` for a record's API view (envelope.json), without scanning the payload a
 * third time: when the view's `envelope` member is `envelope` as the view builder copies it, the
 * view is serialised with a placeholder there and {@link DsseJson.envelope} put in its place.
 * (JSON.stringify writes an object's members in order, each as `"key":` + JSON.stringify of its
 * value, leaving out those without JSON; so the text ends with the placeholder member followed by
 * the members after it, which are serialised apart to find it.) Anything else: JSON.stringify.
 */
export function viewJson(view: object, envelope: DsseEnvelope, dsse: DsseJson | null): string {
  if (dsse === null || Object.getPrototypeOf(view) !== Object.prototype || hasToJson(view)) {
    return JSON.stringify(view);
  }
  const v = view as Record<string, unknown>;
  const keys = Object.keys(v);
  const at = keys.indexOf('envelope');
  if (at < 0 || !isEnvelopeOf(v.envelope, envelope)) return JSON.stringify(view);
  let tail = '';
  for (let i = at + 1; i < keys.length; i++) {
    const value = v[keys[i]!];
    // toJSON is called with the member's name: only the whole serialisation passes it.
    if (hasToJson(value)) return JSON.stringify(view);
    const text = JSON.stringify(value) as string | undefined;
    if (text !== undefined) tail += `,${jsonString(keys[i]!)}:${text}`;
  }
  const placeholder = JSON.stringify({ ...v, envelope: 0 });
  const suffix = `"envelope":0${tail}}`;
  if (!placeholder.endsWith(suffix)) return JSON.stringify(view);
  return `${placeholder.slice(0, placeholder.length - suffix.length)}"envelope":${dsse.envelope}${tail}}`;
}
