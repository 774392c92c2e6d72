import { InvariantError } from '../errors.ts';
import { C2paError } from './errors.ts';

/**
 * JUMBF (ISO/IEC 19566-5) as C2PA uses it: ISO BMFF-style boxes (`LBox` u32 BE total length,
 * `TBox` four-character type, payload); a superbox (`jumb`) holds one description box (`jumd`:
 * 16-byte content-type UUID, toggles, NUL-terminated label) followed by content boxes.
 *
 * Only what a manifest store needs is implemented. Writing always uses 32-bit lengths; reading
 * also accepts `LBox = 1` (64-bit `XLBox`) and `LBox = 0` (box runs to the end of its parent).
 */

/** C2PA content-type UUIDs: the four-character code followed by the ISO-assigned tail. */
const UUID_TAIL = Buffer.from('00110010800000aa00389b71', 'hex');

export function c2paUuid(fourCc: string): Buffer {
  const head = Buffer.from(fourCc, 'latin1');
  if (head.length !== 4)
    throw new C2paError('INVALID_INPUT', `four-character code expected, got "${fourCc}"`);
  return Buffer.concat([head, UUID_TAIL]);
}

export const Uuids = {
  manifestStore: c2paUuid('c2pa'),
  manifest: c2paUuid('c2ma'),
  assertionStore: c2paUuid('c2as'),
  claim: c2paUuid('c2cl'),
  signature: c2paUuid('c2cs'),
  cbor: c2paUuid('cbor'),
} as const;

/** Description-box toggles: bit 0 requestable, bit 1 label present, bit 2 id, bit 3 hash, bit 4 private box. */
const TOGGLE_REQUESTABLE = 0x01;
const TOGGLE_LABEL = 0x02;
const TOGGLE_ID = 0x04;
const TOGGLE_HASH = 0x08;
const TOGGLE_PRIVATE = 0x10;

/** A plain box: four-character type and its payload. */
export interface ContentBox {
  type: string;
  payload: Buffer;
}

/** A `jumb` superbox. `raw` is the whole box as read (header included); absent on built boxes. */
export interface SuperBox {
  uuid: Buffer;
  label: string;
  children: (SuperBox | ContentBox)[];
  raw?: Buffer;
}

export function isSuperBox(box: SuperBox | ContentBox): box is SuperBox {
  return 'uuid' in box;
}

function boxHeader(type: string, payloadLength: number): Buffer {
  const header = Buffer.alloc(8);
  const total = payloadLength + 8;
  if (total > 0xffff_ffff) throw new C2paError('INVALID_INPUT', 'JUMBF box larger than 4 GiB');
  header.writeUInt32BE(total, 0);
  if (Buffer.byteLength(type, 'latin1') !== 4)
    throw new C2paError('INVALID_INPUT', `box type must be four characters: "${type}"`);
  header.write(type, 4, 'latin1');
  return header;
}

export function encodeBox(type: string, payload: Buffer): Buffer {
  return Buffer.concat([boxHeader(type, payload.length), payload]);
}

/** The `jumd` description box: C2PA always sets requestable + label and nothing else. */
export function encodeDescription(uuid: Buffer, label: string): Buffer {
  if (uuid.length !== 16) throw new C2paError('INVALID_INPUT', 'JUMBF content type must be a 16-byte UUID');
  if (label.includes('\0')) throw new C2paError('INVALID_INPUT', 'JUMBF label must not contain NUL');
  return encodeBox(
    'jumd',
    Buffer.concat([
      uuid,
      Buffer.of(TOGGLE_REQUESTABLE | TOGGLE_LABEL),
      Buffer.from(label, 'utf8'),
      Buffer.of(0),
    ]),
  );
}

/** Payload of a superbox (description box followed by the children): what C2PA hashes. */
export function superBoxPayload(uuid: Buffer, label: string, children: readonly Buffer[]): Buffer {
  return Buffer.concat([encodeDescription(uuid, label), ...children]);
}

export function encodeSuperBox(uuid: Buffer, label: string, children: readonly Buffer[]): Buffer {
  return encodeBox('jumb', superBoxPayload(uuid, label, children));
}

/** Hard bound on nesting; a manifest store is four levels deep. */
const MAX_DEPTH = 16;

function malformed(message: string): C2paError {
  return new C2paError('MALFORMED_MANIFEST', `JUMBF: ${message}`);
}

interface RawBox {
  type: string;
  payload: Buffer;
  raw: Buffer;
}

function readBoxes(data: Buffer): RawBox[] {
  const boxes: RawBox[] = [];
  let offset = 0;
  while (offset < data.length) {
    if (data.length - offset < 8) throw malformed(`truncated box header at offset ${offset}`);
    let size = data.readUInt32BE(offset);
    const type = data.toString('latin1', offset + 4, offset + 8);
    let headerLength = 8;
    if (size === 1) {
      if (data.length - offset < 16) throw malformed(`truncated XLBox at offset ${offset}`);
      const big = data.readBigUInt64BE(offset + 8);
      if (big > BigInt(data.length - offset)) throw malformed(`box "${type}" overruns its parent`);
      size = Number(big);
      headerLength = 16;
    } else if (size === 0) {
      size = data.length - offset;
    }
    if (size < headerLength || offset + size > data.length) {
      throw malformed(`box "${type}" at offset ${offset} has invalid length ${size}`);
    }
    boxes.push({
      type,
      payload: data.subarray(offset + headerLength, offset + size),
      raw: data.subarray(offset, offset + size),
    });
    offset += size;
  }
  return boxes;
}

function parseDescription(payload: Buffer): { uuid: Buffer; label: string } {
  if (payload.length < 17) throw malformed('description box too short');
  const uuid = payload.subarray(0, 16);
  const toggles = payload[16] as number;
  // C2PA boxes are always requestable and labelled; bits 5-7 are reserved.
  if (
    (toggles & (TOGGLE_REQUESTABLE | TOGGLE_LABEL)) !== (TOGGLE_REQUESTABLE | TOGGLE_LABEL) ||
    toggles >= 0x20
  ) {
    throw malformed(`description box toggles 0x${toggles.toString(16)} are not those of a C2PA box`);
  }
  const end = payload.indexOf(0, 17);
  if (end < 0) throw malformed('unterminated label in description box');
  const label = payload.toString('utf8', 17, end);
  let rest = end + 1;
  if (toggles & TOGGLE_ID) rest += 4;
  if (toggles & TOGGLE_HASH) rest += 32;
  // A private box (C2PA salt `c2sh`) follows only when its toggle says so; anything else is junk.
  const privateLength = (toggles & TOGGLE_PRIVATE) !== 0 ? payload.length - rest : 0;
  if (rest > payload.length || ((toggles & TOGGLE_PRIVATE) === 0 && rest !== payload.length)) {
    throw malformed(`description box of "${label}" has an invalid length`);
  }
  if ((toggles & TOGGLE_PRIVATE) !== 0) {
    const [privateBox, ...extra] = privateLength >= 8 ? readBoxes(payload.subarray(rest)) : [];
    if (privateBox === undefined || extra.length > 0)
      throw malformed(`description box of "${label}" lacks its private box`);
  }
  return { uuid, label };
}

function toSuperBox(box: RawBox, depth: number): SuperBox {
  if (depth > MAX_DEPTH) throw malformed('superboxes nested too deeply');
  const inner = readBoxes(box.payload);
  const description = inner[0];
  if (description === undefined || description.type !== 'jumd') {
    throw malformed('superbox does not start with a description box');
  }
  const { uuid, label } = parseDescription(description.payload);
  const children = inner
    .slice(1)
    .map((child) =>
      child.type === 'jumb' ? toSuperBox(child, depth + 1) : { type: child.type, payload: child.payload },
    );
  return { uuid, label, children, raw: box.raw };
}

/** Parses a buffer holding exactly one `jumb` superbox (a `.c2pa` manifest store). */
export function parseJumbf(data: Buffer): SuperBox {
  const boxes = readBoxes(data);
  const [top] = boxes;
  if (boxes.length !== 1 || top === undefined || top.type !== 'jumb') {
    throw malformed('expected exactly one top-level "jumb" superbox');
  }
  return toSuperBox(top, 0);
}

/** Payload of a parsed superbox without its own 8- or 16-byte header. */
export function payloadOf(box: SuperBox): Buffer {
  if (box.raw === undefined) throw new InvariantError('superbox was not parsed from bytes');
  return readBoxes(box.raw)[0]?.payload ?? Buffer.alloc(0);
}

export function childSuperBoxes(box: SuperBox): SuperBox[] {
  return box.children.filter(isSuperBox);
}

export function contentBoxes(box: SuperBox): ContentBox[] {
  return box.children.filter((c): c is ContentBox => !isSuperBox(c));
}
