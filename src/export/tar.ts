/**
 * Deterministic POSIX ustar, written and read by hand (no dependency at run time): an export is a
 * stream of many small entries, and a header is 512 bytes from a handful of fixed fields, so a
 * writer that fills one preallocated block per entry is both simpler and faster than a general
 * tar library (bench/export.ts measures it against that same work done raw). Independent readers
 * (`tar-stream`, GNU tar) read the result in the tests.
 *
 * Every header is a function of the path and the size alone: mode 0644, uid/gid 0, empty
 * user/group names, mtime 0, regular file. So the same entries always give the same bytes, and a
 * verifier can rebuild each header and notice a change in any of its bytes.
 */

import { ExportError } from './errors.ts';
import { InvariantError } from '../errors.ts';

export const BLOCK = 512;
/** End of archive: two zero blocks (shared: never write to it). */
export const END_OF_ARCHIVE = Buffer.alloc(2 * BLOCK);

const MAX_OCTAL_SIZE = 0o77777777777; // 11 octal digits: 8 GiB − 1

export class TarPathError extends ExportError {
  constructor(message: string) {
    super('TAR_PATH_INVALID', message);
  }
}

/**
 * Largest entry content `readTar` collects in memory (64 MiB). Every entry of an export but the
 * streamed `attestations.intoto.jsonl` is small: an envelope.json, a Sigstore bundle, a receipt, a
 * certificate chain, a segment index (≤ 1000 records) or an AIBOM with its manifest and metadata,
 * all derived from one Run, and a Run is a Kubernetes object (etcd refuses requests over 1.5 MiB),
 * so the largest real entry is a few MiB. The cap keeps a wide margin over that while a hostile
 * header (a gzip of zeros whose one entry claims 1.5 GB) can no longer make the reader buffer
 * what it claims.
 */
export const MAX_BUFFERED_ENTRY = 64 * 1024 * 1024;

/** An entry the reader refuses to read because of its size; `path` names it. */
export class TarEntryTooLargeError extends ExportError {
  readonly path: string;
  constructor(path: string, message: string) {
    super('TAR_ENTRY_TOO_LARGE', message);
    this.path = path;
  }
}

/** A header that does not parse; `path` is the name it holds (as far as readable). */
export class TarHeaderError extends ExportError {
  readonly path: string;
  constructor(path: string, message: string) {
    super('TAR_HEADER_INVALID', message);
    this.path = path;
  }
}

/**
 * Sum of the character codes of `path` when every character is in '!'..'~', else -1 (a loop: the
 * regex cost 2 µs a path, a third of a header; the sum is the path's share of the header checksum).
 */
function printableAsciiSum(path: string): number {
  if (path.length === 0) return -1;
  let sum = 0;
  for (let i = 0; i < path.length; i++) {
    const c = path.charCodeAt(i);
    if (c < 0x21 || c > 0x7e) return -1;
    sum += c;
  }
  return sum;
}

/**
 * Splits a path into ustar `prefix` (≤ 155) and `name` (≤ 100) at a slash; ASCII only. `sum` is the
 * sum of the bytes both fields hold (the checksum's share of the path).
 */
function splitPath(path: string): { name: string; prefix: string; sum: number } {
  const dotdot = path === '..' || path.startsWith('../') || path.endsWith('/..') || path.includes('/../');
  const sum = printableAsciiSum(path);
  if (sum < 0 || path.startsWith('/') || dotdot) {
    throw new TarPathError(`tar path "${path}" must be relative printable ASCII without ".."`);
  }
  if (path.length <= 100) return { name: path, prefix: '', sum };
  for (let i = path.length - 101; i < path.length; i++) {
    if (i > 0 && path[i] === '/' && i <= 155 && path.length - i - 1 <= 100) {
      // The slash between prefix and name is not stored.
      return { name: path.slice(i + 1), prefix: path.slice(0, i), sum: sum - 0x2f };
    }
  }
  throw new TarPathError(`tar path "${path}" is too long for ustar`);
}

function writeOctal(block: Buffer, offset: number, width: number, value: number): void {
  block.write(value.toString(8).padStart(width - 1, '0'), offset, width - 1, 'ascii');
  block[offset + width - 1] = 0;
}

/**
 * The fields every header shares (mode, owner, group, mtime, type, magic, version; name, prefix
 * and size empty, checksum as spaces), and the sum of its bytes: a header is this block copied,
 * plus name, prefix and size, and a checksum of `TEMPLATE_SUM` + their bytes.
 */
const TEMPLATE = (() => {
  const h = Buffer.alloc(BLOCK);
  writeOctal(h, 100, 8, 0o644);
  writeOctal(h, 108, 8, 0);
  writeOctal(h, 116, 8, 0);
  h.fill(0, 124, 136); // size: per entry
  writeOctal(h, 136, 12, 0);
  h.fill(0x20, 148, 156); // checksum field counts as spaces
  h[156] = 0x30; // '0': regular file
  h.write('ustar\0', 257, 6, 'ascii');
  h.write('00', 263, 2, 'ascii');
  return h;
})();
const TEMPLATE_SUM = TEMPLATE.reduce((a, b) => a + b, 0);

/**
 * Writes the 512-byte ustar header of a regular file `path` of `size` bytes (deterministic) into
 * `target` at `offset`, every byte of the block (the target need not be zeroed).
 */
export function writeTarHeader(target: Buffer, offset: number, path: string, size: number): void {
  if (!Number.isSafeInteger(size) || size < 0) throw new RangeError(`tar entry size ${size}`);
  if (offset < 0 || offset + BLOCK > target.length) throw new RangeError('tar header outside its buffer');
  const { name, prefix, sum: pathSum } = splitPath(path);
  TEMPLATE.copy(target, offset);
  target.write(name, offset, 'latin1');
  if (prefix !== '') target.write(prefix, offset + 345, 'latin1');
  let sum = TEMPLATE_SUM + pathSum;
  if (size <= MAX_OCTAL_SIZE) {
    const digits = size.toString(8).padStart(11, '0');
    target.write(digits, offset + 124, 'latin1');
    for (let i = 0; i < 11; i++) sum += digits.charCodeAt(i);
  } else {
    // GNU base-256 for sizes beyond 8 GiB (one .intoto.jsonl of millions of envelopes).
    target[offset + 124] = 0x80;
    let v = BigInt(size);
    for (let i = 135; i > 124; i--) {
      target[offset + i] = Number(v & 0xffn);
      v >>= 8n;
    }
    for (let i = 124; i < 136; i++) sum += target[offset + i]!;
  }
  target.write(`${sum.toString(8).padStart(6, '0')}\0 `, offset + 148, 'latin1');
}

/** The 512-byte ustar header of a regular file `path` of `size` bytes (deterministic). */
export function tarHeader(path: string, size: number): Buffer {
  const h = Buffer.allocUnsafe(BLOCK);
  writeTarHeader(h, 0, path, size);
  return h;
}

const ZEROS = Buffer.alloc(BLOCK);

/** Zero bytes that pad `size` bytes of content to a whole block (a view of one shared block: never write to it). */
export function tarPadding(size: number): Buffer {
  const rest = size % BLOCK;
  return ZEROS.subarray(0, rest === 0 ? 0 : BLOCK - rest);
}

export interface ParsedHeader {
  readonly path: string;
  readonly size: number;
  readonly type: string;
}

function readString(h: Buffer, offset: number, width: number): string {
  const end = h.indexOf(0, offset);
  return h.toString('ascii', offset, end === -1 || end > offset + width ? offset + width : end);
}

/** Parses a header block; null for a zero block (end of archive); throws on a broken header. */
export function parseTarHeader(h: Buffer): ParsedHeader | null {
  if (h.length !== BLOCK) throw new TarHeaderError('', 'short tar header');
  if (h.every((b) => b === 0)) return null;
  let sum = 0;
  for (let i = 0; i < BLOCK; i++) sum += i >= 148 && i < 156 ? 0x20 : h[i]!;
  const stored = Number.parseInt(readString(h, 148, 8).trim(), 8);
  if (stored !== sum) throw new TarHeaderError('', 'tar header checksum mismatch');
  let size: number;
  if ((h[124]! & 0x80) !== 0) {
    let v = 0n;
    for (let i = 125; i < 136; i++) v = (v << 8n) | BigInt(h[i]!);
    size = Number(v);
  } else {
    size = Number.parseInt(readString(h, 124, 12).trim() || '0', 8);
  }
  if (!Number.isSafeInteger(size) || size < 0)
    throw new TarHeaderError('', 'tar header size is not a number');
  const name = readString(h, 0, 100);
  const prefix = h.toString('ascii', 257, 262) === 'ustar' ? readString(h, 345, 155) : '';
  return { path: prefix === '' ? name : `${prefix}/${name}`, size, type: String.fromCharCode(h[156]!) };
}

/**
 * Reads a tar byte stream one entry at a time, keeping at most one entry's content in memory
 * (entries of an export are small, except the `.intoto.jsonl`, which is delivered in chunks via
 * `onChunk` when `stream(path)` says so). Bytes are reported as they are consumed (`onBytes`), so
 * a caller can hash exactly the archive prefix before any entry.
 */
export interface TarVisitor {
  /** Every byte of the archive, in order, with the kind of region it belongs to. */
  onBytes?(bytes: Buffer, region: 'header' | 'content' | 'padding' | 'end'): void;
  /** Before an entry's header bytes are reported. */
  onHeader?(header: ParsedHeader, raw: Buffer): void;
  /** True: the content is passed to onChunk piece by piece instead of collected. */
  stream?(header: ParsedHeader): boolean;
  onChunk?(header: ParsedHeader, chunk: Buffer): void;
  /** After the whole content (collected, or empty when streamed) and its padding. */
  onEntry?(header: ParsedHeader, content: Buffer, padding: Buffer): void | Promise<void>;
}

export interface TarReadResult {
  /** Two zero blocks were found, and only zeros followed. */
  readonly ended: boolean;
  /** Non-zero bytes after the end of archive, or a truncated entry, described. */
  readonly trailing?: string;
}

class ByteQueue {
  private chunks: Buffer[] = [];
  length = 0;
  push(b: Buffer): void {
    if (b.length === 0) return;
    this.chunks.push(b);
    this.length += b.length;
  }
  take(n: number): Buffer {
    if (n > this.length) throw new InvariantError('queue underflow');
    const first = this.chunks[0];
    if (first !== undefined && first.length >= n) {
      const out = first.subarray(0, n);
      if (first.length === n) this.chunks.shift();
      else this.chunks[0] = first.subarray(n);
      this.length -= n;
      return out;
    }
    const out = Buffer.allocUnsafe(n);
    let at = 0;
    while (at < n) {
      const c = this.chunks[0]!;
      const k = Math.min(c.length, n - at);
      c.copy(out, at, 0, k);
      at += k;
      if (k === c.length) this.chunks.shift();
      else this.chunks[0] = c.subarray(k);
    }
    this.length -= n;
    return out;
  }
}

export interface ReadTarOptions {
  /** Largest content collected for one entry (default MAX_BUFFERED_ENTRY); streamed entries are not limited here. */
  readonly maxEntrySize?: number;
}

/**
 * Walks a tar stream; see {@link TarVisitor}. Throws on a broken header, and (TarEntryTooLargeError)
 * on an entry to collect whose header claims more than `maxEntrySize` bytes, before reading any of
 * them: memory never follows what a header claims.
 */
export async function readTar(
  source: AsyncIterable<Uint8Array>,
  v: TarVisitor,
  options: ReadTarOptions = {},
): Promise<TarReadResult> {
  const maxEntrySize = options.maxEntrySize ?? MAX_BUFFERED_ENTRY;
  const q = new ByteQueue();
  const it = source[Symbol.asyncIterator]();
  let previous = '(start of archive)';
  let done = false;
  const fill = async (n: number): Promise<boolean> => {
    while (q.length < n && !done) {
      const r = await it.next();
      if (r.done) done = true;
      else q.push(Buffer.from(r.value.buffer, r.value.byteOffset, r.value.byteLength));
    }
    return q.length >= n;
  };
  for (;;) {
    if (!(await fill(BLOCK))) {
      return q.length === 0
        ? { ended: false, trailing: 'the archive ends without its end-of-archive blocks' }
        : { ended: false, trailing: 'the archive ends inside a header block' };
    }
    const raw = q.take(BLOCK);
    let header: ParsedHeader | null;
    try {
      header = parseTarHeader(raw);
    } catch (err) {
      const name = readString(raw, 0, 100);
      throw new TarHeaderError(
        /^[\x21-\x7e]+$/.test(name) ? name : '(archive)',
        `the header of "${name}" (after ${previous}): ${(err as Error).message}`,
      );
    }
    if (header === null) {
      v.onBytes?.(raw, 'end');
      // The rest must be zeros (the second end block, and any record padding).
      let nonZero = false;
      let total = BLOCK;
      while (await fill(1)) {
        const rest = q.take(q.length);
        total += rest.length;
        v.onBytes?.(rest, 'end');
        if (!rest.every((b) => b === 0)) nonZero = true;
      }
      if (nonZero) return { ended: true, trailing: 'non-zero bytes after the end of the archive' };
      if (total < 2 * BLOCK) return { ended: false, trailing: 'the archive ends after one zero block' };
      return { ended: true };
    }
    previous = header.path;
    v.onHeader?.(header, raw);
    v.onBytes?.(raw, 'header');
    const streamed = v.stream?.(header) === true;
    if (!streamed && header.size > maxEntrySize) {
      throw new TarEntryTooLargeError(
        header.path,
        `entry ${header.path} claims ${header.size} bytes, more than the ${maxEntrySize} an entry of an export may hold`,
      );
    }
    const parts: Buffer[] = [];
    let left = header.size;
    while (left > 0) {
      if (!(await fill(1))) {
        return { ended: false, trailing: `the archive ends inside entry ${header.path}` };
      }
      const chunk = q.take(Math.min(left, q.length));
      left -= chunk.length;
      v.onBytes?.(chunk, 'content');
      if (streamed) v.onChunk?.(header, chunk);
      else parts.push(chunk);
    }
    const padLength = (BLOCK - (header.size % BLOCK)) % BLOCK;
    if (!(await fill(padLength))) {
      return { ended: false, trailing: `the archive ends inside the padding of ${header.path}` };
    }
    const padding = q.take(padLength);
    v.onBytes?.(padding, 'padding');
    await v.onEntry?.(header, streamed ? Buffer.alloc(0) : Buffer.concat(parts), padding);
  }
}
