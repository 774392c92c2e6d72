import { Decoder, Encoder, Tag } from 'cbor-x';

/**
 * The one CBOR configuration of the service (C2PA claims and assertions, COSE structures, SCITT
 * statements, receipts, key sets, problem details). cbor-x defaults produce bytes no other CBOR
 * stack expects: Uint8Array tagged 64 (`tagUint8Array`), objects as records (tag 105,
 * `useRecords`), and, when `mapsAsObjects` is on, JS `Map`s wrapped in tag 259, which turns a COSE
 * protected header into something c2pa-rs cannot parse (it then fails with the misleading "could
 * not generate a trusted time stamp"). `variableMapSize` gives minimal-length map headers, the
 * preferred serialisation (RFC 8949 §4.1). Objects with string keys become maps in insertion order;
 * COSE headers are `Map`s because their labels are integers.
 *
 * Integers: cbor-x writes numbers above 2^32 - 1 as float64, which COSE parsers reject for sizes
 * and indexes; {@link cborUint} turns them into BigInt first, which cbor-x writes as uint64.
 */
const encoder = new Encoder({
  useRecords: false,
  tagUint8Array: false,
  variableMapSize: true,
  mapsAsObjects: false,
  pack: false,
  bundleStrings: false,
  encodeUndefinedAsNil: false,
});

/** COSE structures have integer labels: maps stay `Map`s so `1` and `"1"` remain distinct. */
const mapDecoder = new Decoder({ useRecords: false, mapsAsObjects: false });

/** C2PA claims and assertions have text keys: maps become plain objects. */
const objectDecoder = new Decoder({ useRecords: false, mapsAsObjects: true });

export { Tag };

export function encodeCbor(value: unknown): Buffer {
  return encoder.encode(value);
}

/**
 * Decodes exactly one CBOR item, maps as `Map`s; throws on trailing bytes or truncation. Untrusted
 * input is fine: every caller checks the shape of what comes back and treats anything unexpected
 * as malformed.
 */
export function decodeCbor(data: Uint8Array): unknown {
  return mapDecoder.decode(data);
}

/** {@link decodeCbor} with maps as plain objects (text-keyed documents such as C2PA claims). */
export function decodeCborObject(data: Uint8Array): unknown {
  return objectDecoder.decode(data);
}

/** A non-negative integer in the form cbor-x encodes as a CBOR uint (major type 0). */
export function cborUint(n: number): number | bigint {
  if (!Number.isSafeInteger(n) || n < 0) throw new RangeError(`${n} is not a non-negative safe integer`);
  return n > 0xffffffff ? BigInt(n) : n;
}

/** Non-negative safe integer from a decoded value (cbor-x yields bigint for uint64), else undefined. */
export function asUint(value: unknown): number | undefined {
  const n = asInt(value);
  return n !== undefined && n >= 0 ? n : undefined;
}

/** Integer (either sign) from a decoded value, else undefined. */
export function asInt(value: unknown): number | undefined {
  if (typeof value === 'number') return Number.isSafeInteger(value) ? value : undefined;
  if (typeof value === 'bigint') {
    const max = BigInt(Number.MAX_SAFE_INTEGER);
    return value >= -max && value <= max ? Number(value) : undefined;
  }
  return undefined;
}

/** A byte string as a Buffer (sharing memory), else undefined. */
export function asBytes(value: unknown): Buffer | undefined {
  if (Buffer.isBuffer(value)) return value;
  if (value instanceof Uint8Array) return Buffer.from(value.buffer, value.byteOffset, value.byteLength);
  return undefined;
}

export function isMap(value: unknown): value is Map<unknown, unknown> {
  return value instanceof Map;
}
