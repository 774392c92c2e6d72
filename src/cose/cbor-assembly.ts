/**
 * CBOR heads (RFC 8949 §3) written by hand, for the one hot path that assembles COSE structures
 * from already-encoded parts without a generic encoder pass: the local log's receipts, one per
 * registered statement, all written into one buffer per commit batch, and the check that a
 * statement already is its own log entry. docs/adr/0006 records why (the transparency goal in
 * docs/bench.md) and why nothing else does this. The unit tests check every function here byte
 * for byte against `encodeCbor` (preferred serialisation: the shortest head).
 */

/** Major types used by the hand-assembled structures. */
export const CborMajor = { uint: 0, bytes: 2, array: 4, map: 5, tag: 6 } as const;

/** CBOR `nil`. */
export const CBOR_NIL = Buffer.from([0xf6]);

/** Length of the head {@link cborHead} writes for argument `n`. */
export function cborHeadLength(n: number): number {
  return n < 24 ? 1 : n < 0x100 ? 2 : n < 0x10000 ? 3 : n < 0x100000000 ? 5 : 9;
}

/** The head of a data item: major type and argument, shortest form. */
export function cborHead(major: number, n: number): Buffer {
  if (!Number.isSafeInteger(n) || n < 0) throw new RangeError(`CBOR argument ${n} is not a safe uint`);
  const out = Buffer.allocUnsafe(cborHeadLength(n));
  writeCborHead(out, 0, major, n);
  return out;
}

/** A byte string item: head + bytes. */
export function cborBytes(bytes: Uint8Array): Buffer[] {
  return [
    cborHead(CborMajor.bytes, bytes.length),
    Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength),
  ];
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
