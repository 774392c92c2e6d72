/**
 * PostgreSQL binary COPY format (https://www.postgresql.org/docs/current/sql-copy.html, "Binary
 * Format"): a signature header, then per row a 16-bit field count and per field a 32-bit length
 * (-1 for NULL) and the value in the type's binary send format, then a -1 trailer.
 *
 * Binary COPY is the cheapest way to hand PostgreSQL rows with bytea columns: no hex escaping in
 * this process, no hex parsing or per-row executor work in the server (measured 3× cheaper on the
 * server than INSERT … SELECT FROM unnest(...) for SCITT log entries).
 */

const SIGNATURE = Buffer.from('PGCOPY\n\xff\r\n\0', 'latin1');
/** Signature, flags (no OIDs), header extension length 0. */
export const COPY_BINARY_HEADER: Buffer = Buffer.concat([SIGNATURE, Buffer.alloc(8)]);
/** Field count -1: end of data. */
export const COPY_BINARY_TRAILER: Buffer = Buffer.from([0xff, 0xff]);

/** 2000-01-01T00:00:00Z in Unix milliseconds: PostgreSQL's timestamp epoch. */
const PG_EPOCH_MS = 946_684_800_000;

/** A field already in binary send format; null is SQL NULL. */
export type CopyField = Buffer | null;

export function int8Field(n: number): Buffer {
  if (!Number.isSafeInteger(n)) throw new RangeError(`${n} is not a safe integer`);
  const b = Buffer.allocUnsafe(8);
  b.writeBigInt64BE(BigInt(n));
  return b;
}

export function textField(s: string): Buffer {
  return Buffer.from(s, 'utf8');
}

/** timestamptz: microseconds since 2000-01-01 UTC (integer datetimes, the only kind since PG 10). */
export function timestamptzField(d: Date): Buffer {
  const b = Buffer.allocUnsafe(8);
  b.writeBigInt64BE(BigInt(d.getTime() - PG_EPOCH_MS) * 1000n);
  return b;
}

/** Rows in binary COPY format, in one buffer (no header or trailer: stream those once). */
export function encodeCopyRows(rows: readonly (readonly CopyField[])[]): Buffer {
  let size = 0;
  for (const row of rows) {
    size += 2;
    for (const f of row) size += 4 + (f === null ? 0 : f.length);
  }
  const out = Buffer.allocUnsafe(size);
  let at = 0;
  for (const row of rows) {
    at = out.writeInt16BE(row.length, at);
    for (const f of row) {
      if (f === null) {
        at = out.writeInt32BE(-1, at);
        continue;
      }
      at = out.writeInt32BE(f.length, at);
      at += f.copy(out, at);
    }
  }
  return out;
}
