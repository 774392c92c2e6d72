import { Decoder, Encoder, Tag } from 'cbor-x';

/**
 * One CBOR configuration for everything SCITT. cbor-x defaults produce bytes no COSE stack
 * expects: Uint8Array tagged 64 (`tagUint8Array`), objects as records (tag 105, `useRecords`), and
 * with `mapsAsObjects` JS Maps wrapped in tag 259. COSE headers are `Map`s with integer labels;
 * `variableMapSize` gives minimal-length map headers (preferred serialisation, RFC 8949 §4.1).
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

/** Maps stay `Map`s so integer labels (1) and text labels ("1") remain distinct. */
const decoder = new Decoder({ useRecords: false, mapsAsObjects: false });

export { Tag };

export function encodeCbor(value: unknown): Buffer {
  return encoder.encode(value);
}

/**
 * Decodes exactly one CBOR item; throws on trailing bytes or truncation. Untrusted input is fine:
 * every caller checks the shape of what comes back and treats anything unexpected as malformed.
 */
export function decodeCbor(data: Uint8Array): unknown {
  return decoder.decode(data);
}

/** A non-negative integer in the form cbor-x encodes as a CBOR uint (major type 0). */
export function cborUint(n: number): number | bigint {
  if (!Number.isSafeInteger(n) || n < 0) throw new RangeError(`${n} is not a non-negative safe integer`);
  return n > 0xffffffff ? BigInt(n) : n;
}

/** Non-negative safe integer from a decoded value (cbor-x yields bigint for uint64), else undefined. */
export function asUint(value: unknown): number | undefined {
  if (typeof value === 'number') return Number.isSafeInteger(value) && value >= 0 ? value : undefined;
  if (typeof value === 'bigint') {
    return value >= 0n && value <= BigInt(Number.MAX_SAFE_INTEGER) ? Number(value) : undefined;
  }
  return undefined;
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
