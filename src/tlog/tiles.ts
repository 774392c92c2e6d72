import { TlogError } from './errors.ts';

/**
 * C2SP tlog-tiles (c2sp.org/tlog-tiles) addressing, pure arithmetic.
 *
 * A tile at level L, index N, width W holds the W Merkle tree hashes
 *   MTH(D[(N·256 + i)·256^L : (N·256 + i + 1)·256^L]),  i = 0 … W-1,
 * i.e. the perfect subtrees of 2^(8L) leaves at tree level 8L, indexes N·256 … N·256+W-1. Both of
 * this service's logs store every perfect subtree (src/transparency/merkle.ts), so a tile is one
 * range read of stored hashes. Full tiles have 256 hashes; the rightmost are partial (`.p/W`).
 * An entry bundle is tile level "entries": the entries of leaves N·256 … N·256+W-1, each a
 * big-endian uint16 length and the entry bytes.
 */

export const TILE_WIDTH = 256;
export const TILE_HEIGHT = 8;
/** An entry bundle's entries are prefixed by a uint16 length. */
export const MAX_ENTRY_BYTES = 0xffff;

export interface TileRef {
  /** Tree-hash level 0…63, or 'entries' for an entry bundle. */
  readonly level: number | 'entries';
  readonly index: number;
  /** 1…256; below 256 only with `partial`. */
  readonly width: number;
  readonly partial: boolean;
}

const bad = (path: string, why: string): never => {
  throw new TlogError('MALFORMED_TILE_PATH', `tile path ${JSON.stringify(path)}: ${why}`);
};

/** Index N as zero-padded 3-digit elements, all but the last prefixed with x: 1234067 → x001/x234/067. */
export function formatTileIndex(n: number): string {
  if (!Number.isSafeInteger(n) || n < 0) throw new RangeError(`tile index ${n}`);
  const groups: string[] = [];
  let rest = n;
  do {
    groups.unshift(String(rest % 1000).padStart(3, '0'));
    rest = Math.floor(rest / 1000);
  } while (rest > 0);
  return groups.map((g, i) => (i < groups.length - 1 ? `x${g}` : g)).join('/');
}

export function formatTilePath(t: TileRef): string {
  const base = `tile/${t.level === 'entries' ? 'entries' : String(t.level)}/${formatTileIndex(t.index)}`;
  return t.partial ? `${base}.p/${t.width}` : base;
}

/**
 * Parses the part of a URL after `<prefix>/tile/` (e.g. `0/x001/067.p/12`, `entries/000`). Only the
 * canonical encoding is accepted (no leading x000 element, no leading zeros in L or W), so every
 * tile has exactly one URL and caches hold one copy.
 */
export function parseTilePath(rest: string): TileRef {
  const path = `tile/${rest}`;
  const parts = rest.split('/');
  if (parts.length < 2) bad(path, 'expected <L>/<N>');
  const levelPart = parts.shift()!;
  let level: number | 'entries';
  if (levelPart === 'entries') level = 'entries';
  else if (/^(0|[1-9][0-9]?)$/.test(levelPart) && Number(levelPart) <= 63) level = Number(levelPart);
  else return bad(path, 'the level is not entries or 0…63');
  let partial = false;
  let width = TILE_WIDTH;
  const penultimate = parts.at(-2);
  if (penultimate?.endsWith('.p')) {
    const w = parts.pop()!;
    if (!/^[1-9][0-9]{0,2}$/.test(w) || Number(w) > 255) bad(path, 'a partial width is 1…255');
    width = Number(w);
    partial = true;
    parts[parts.length - 1] = penultimate.slice(0, -2);
  }
  if (parts.length === 0) bad(path, 'no index');
  let index = 0;
  parts.forEach((p, i) => {
    const last = i === parts.length - 1;
    const m = (last ? /^([0-9]{3})$/ : /^x([0-9]{3})$/).exec(p);
    if (m === null) bad(path, `index element "${p}"`);
    index = index * 1000 + Number(m![1]);
  });
  if (!Number.isSafeInteger(index)) bad(path, 'index too large');
  const ref: TileRef = { level, index, width, partial };
  if (formatTilePath(ref) !== path) bad(path, 'not the canonical encoding');
  return ref;
}

/** How many hashes the tile at (level, index) has in a tree of `treeSize` leaves (0…256). */
export function tileWidthAt(level: number | 'entries', index: number, treeSize: number): number {
  const l = level === 'entries' ? 0 : level;
  // Nodes at tree level 8l: floor(size / 256^l). Division by a power of two is exact in floats.
  const nodes = l * TILE_HEIGHT >= 53 ? 0 : Math.floor(treeSize / 2 ** (l * TILE_HEIGHT));
  return Math.max(0, Math.min(TILE_WIDTH, nodes - index * TILE_WIDTH));
}

/**
 * Whether `t` may be served for a tree of `treeSize` leaves: its hashes (or entries) all exist.
 * A partial tile of a width the tree has passed is still the same bytes (a prefix of the full
 * tile): served, and as immutable as a full one.
 */
export function tileAvailable(t: TileRef, treeSize: number): boolean {
  return t.width <= tileWidthAt(t.level, t.index, treeSize);
}

/** The perfect subtrees a hash tile holds: tree level 8L, first index, count. */
export function tileNodes(t: TileRef): { level: number; first: number; count: number } {
  if (t.level === 'entries') throw new RangeError('an entry bundle holds entries, not hashes');
  return { level: t.level * TILE_HEIGHT, first: t.index * TILE_WIDTH, count: t.width };
}

/** Leaf indexes [start, end) an entry bundle holds. */
export function bundleLeaves(t: TileRef): { start: number; end: number } {
  return { start: t.index * TILE_WIDTH, end: t.index * TILE_WIDTH + t.width };
}

/** An entry bundle: each entry as uint16 big-endian length ‖ bytes. */
export function encodeEntryBundle(entries: readonly Uint8Array[]): Buffer {
  const parts: Buffer[] = [];
  for (const e of entries) {
    if (e.length > MAX_ENTRY_BYTES) {
      throw new TlogError('ENTRY_TOO_LARGE', `an entry of ${e.length} bytes does not fit an entry bundle`);
    }
    const len = Buffer.alloc(2);
    len.writeUInt16BE(e.length);
    parts.push(len, Buffer.from(e));
  }
  return Buffer.concat(parts);
}

export function decodeEntryBundle(bundle: Uint8Array): Buffer[] {
  const out: Buffer[] = [];
  const b = Buffer.from(bundle);
  let at = 0;
  while (at < b.length) {
    if (at + 2 > b.length) throw new TlogError('MALFORMED_BUNDLE', 'truncated entry bundle');
    const len = b.readUInt16BE(at);
    if (at + 2 + len > b.length) throw new TlogError('MALFORMED_BUNDLE', 'truncated entry bundle');
    out.push(b.subarray(at + 2, at + 2 + len));
    at += 2 + len;
  }
  return out;
}
