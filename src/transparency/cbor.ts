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

/**
 * The head of a CBOR data item (RFC 8949 §3): major type and argument, shortest form (preferred
 * serialisation, as the encoder above writes it). For the hot paths that assemble COSE structures
 * from already-encoded parts (log entries, receipts) without a generic encoder pass; unit tests
 * check them byte for byte against `encodeCbor`.
 */
export function cborHead(major: number, n: number): Buffer {
  if (!Number.isSafeInteger(n) || n < 0) throw new RangeError(`CBOR argument ${n} is not a safe uint`);
  const m = major << 5;
  if (n < 24) return Buffer.from([m | n]);
  if (n < 0x100) return Buffer.from([m | 24, n]);
  if (n < 0x10000) {
    const b = Buffer.allocUnsafe(3);
    b[0] = m | 25;
    b.writeUInt16BE(n, 1);
    return b;
  }
  if (n < 0x100000000) {
    const b = Buffer.allocUnsafe(5);
    b[0] = m | 26;
    b.writeUInt32BE(n, 1);
    return b;
  }
  const b = Buffer.allocUnsafe(9);
  b[0] = m | 27;
  b.writeBigUInt64BE(BigInt(n), 1);
  return b;
}

/** Major types used by the hand-assembled structures. */
export const CborMajor = { uint: 0, bytes: 2, array: 4, map: 5, tag: 6 } as const;

/** A byte string item: head + bytes. */
export function cborBytes(bytes: Uint8Array): Buffer[] {
  return [
    cborHead(CborMajor.bytes, bytes.length),
    Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength),
  ];
}

/** Length of the head `cborHead` writes for argument `n`. */
export function cborHeadLength(n: number): number {
  return n < 24 ? 1 : n < 0x100 ? 2 : n < 0x10000 ? 3 : n < 0x100000000 ? 5 : 9;
}

/** Writes `cborHead(major, n)` into `target` at `offset`; returns the offset after it. */
export function writeCborHead(target: Buffer, offset: number, major: number, n: number): number {
  const m = major << 5;
  if (n < 24) {
    target[offset] = m | n;
    return offset + 1;
  }
  if (n < 0x100) {
    target[offset] = m | 24;
    target[offset + 1] = n;
    return offset + 2;
  }
  if (n < 0x10000) {
    target[offset] = m | 25;
    return target.writeUInt16BE(n, offset + 1);
  }
  if (n < 0x100000000) {
    target[offset] = m | 26;
    return target.writeUInt32BE(n, offset + 1);
  }
  if (!Number.isSafeInteger(n)) throw new RangeError(`CBOR argument ${n} is not a safe uint`);
  target[offset] = m | 27;
  return target.writeBigUInt64BE(BigInt(n), offset + 1);
}
