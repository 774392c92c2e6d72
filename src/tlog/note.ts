import { createPublicKey, hash, sign, verify, type KeyObject } from 'node:crypto';
import { TlogError } from './errors.ts';

/**
 * C2SP signed notes (c2sp.org/signed-note@v1): a UTF-8 text ending in a newline, a blank line,
 * then signature lines `— <key name> base64(uint32 key id ‖ signature)`.
 *
 * Verification follows the spec (and golang.org/x/mod/sumdb/note, which litewitness uses):
 * signatures from unknown keys (name and id not both matching a known key) are ignored; a
 * signature by a known key that fails rejects the whole note; a note no known key signed is
 * rejected. The key id is SHA-256(name ‖ 0x0A ‖ signature type ‖ public key)[:4].
 *
 * Pure: keys are KeyObjects, notes are strings.
 */

/** Signature type bytes of c2sp.org/signed-note used here. */
export const SIG_TYPE_ED25519 = 0x01;
/** Timestamped Ed25519 checkpoint cosignatures (c2sp.org/tlog-cosignature, cosignature/v1). */
export const SIG_TYPE_COSIGNATURE_V1 = 0x04;

/** Most signature lines a note may carry (the spec asks verifiers to accept at least 16). */
export const MAX_SIGNATURES = 100;
/** Largest note accepted (a checkpoint with 100 cosignatures is about 10 KiB). */
export const MAX_NOTE_BYTES = 64 * 1024;

const EM_DASH = '\u2014';

export interface NoteSignature {
  readonly name: string;
  /** uint32 key id, big-endian first four bytes of the decoded signature. */
  readonly keyId: number;
  /** The signature bytes after the key id. */
  readonly signature: Buffer;
  /** The whole line, newline included, as it appeared (or was made). */
  readonly line: string;
}

export interface Note {
  /** The signed text: ends with a newline, excludes the blank separator line. */
  readonly text: string;
  readonly signatures: readonly NoteSignature[];
}

/** Checks one signature type over a note's text. */
export interface NoteVerifier {
  readonly name: string;
  readonly keyId: number;
  verify(text: string, signature: Buffer): boolean;
}

export interface NoteSigner {
  readonly name: string;
  readonly keyId: number;
  /** The verifier key `<name>+<hex id>+<base64(type ‖ key)>` clients configure. */
  readonly vkey: string;
  /** The signature line (`— name base64…\n`) over `text`. */
  sign(text: string): string;
}

/** A vkey, split. */
export interface VerifierKey {
  readonly name: string;
  readonly keyId: number;
  readonly type: number;
  /** The public key material after the type byte (32 bytes for Ed25519). */
  readonly key: Buffer;
}

const malformed = (why: string): never => {
  throw new TlogError('MALFORMED_NOTE', `not a signed note: ${why}`);
};

/** Key names: non-empty, no Unicode space, no plus. */
export function isValidKeyName(name: string): boolean {
  return name.length > 0 && !/[\s+]/u.test(name);
}

/** SHA-256(name ‖ 0x0A ‖ type ‖ key)[:4] as a uint32. */
export function keyIdOf(name: string, type: number, key: Uint8Array): number {
  const digest = hash(
    'sha256',
    Buffer.concat([Buffer.from(name, 'utf8'), Buffer.from([0x0a, type]), key]),
    'buffer',
  );
  return digest.readUInt32BE(0);
}

export function hexKeyId(id: number): string {
  return id.toString(16).padStart(8, '0');
}

export function formatVkey(name: string, type: number, key: Uint8Array): string {
  return `${name}+${hexKeyId(keyIdOf(name, type, key))}+${Buffer.concat([Buffer.from([type]), key]).toString('base64')}`;
}

const BASE64 = /^[A-Za-z0-9+/]*={0,2}$/;

function base64Strict(s: string): Buffer | undefined {
  if (!BASE64.test(s) || s.length % 4 !== 0) return undefined;
  const b = Buffer.from(s, 'base64');
  return b.toString('base64') === s ? b : undefined;
}

/** Parses `<name>+<hex id>+<base64(type ‖ key)>`; the id must be the one the key and name give. */
export function parseVkey(vkey: string): VerifierKey {
  const bad = (why: string): never => {
    throw new TlogError('MALFORMED_VKEY', `not a verifier key: ${why}`);
  };
  // Cut at the first two pluses only: base64 has pluses of its own.
  const s = vkey.trim();
  const first = s.indexOf('+');
  const second = first < 0 ? -1 : s.indexOf('+', first + 1);
  if (second < 0) bad('expected <name>+<hex key id>+<base64 key>');
  const [name, idHex, b64] = [s.slice(0, first), s.slice(first + 1, second), s.slice(second + 1)];
  if (!isValidKeyName(name)) bad('the key name is empty or holds a space');
  if (!/^[0-9a-f]{8}$/.test(idHex)) bad('the key id is not 8 lowercase hex digits');
  const raw = base64Strict(b64);
  if (raw === undefined || raw.length < 2) bad('the key is not base64');
  const type = raw![0]!;
  const key = raw!.subarray(1);
  if ((type === SIG_TYPE_ED25519 || type === SIG_TYPE_COSIGNATURE_V1) && key.length !== 32) {
    bad('an Ed25519 key has 32 bytes');
  }
  const keyId = Number.parseInt(idHex, 16);
  if (keyIdOf(name, type, key) !== keyId) bad(`the key id ${idHex} is not the id of this name and key`);
  return { name, keyId, type, key: Buffer.from(key) };
}

/** An Ed25519 public KeyObject from its 32 raw bytes. */
export function ed25519PublicKey(raw: Uint8Array): KeyObject {
  return createPublicKey({
    key: { kty: 'OKP', crv: 'Ed25519', x: Buffer.from(raw).toString('base64url') },
    format: 'jwk',
  });
}

/** The 32 raw bytes of an Ed25519 public (or private) KeyObject. */
export function ed25519Raw(key: KeyObject): Buffer {
  const pub = key.type === 'private' ? createPublicKey(key) : key;
  if (pub.asymmetricKeyType !== 'ed25519') {
    throw new TlogError('MALFORMED_VKEY', `a note key must be Ed25519, not ${String(pub.asymmetricKeyType)}`);
  }
  const { x } = pub.export({ format: 'jwk' });
  return Buffer.from(x!, 'base64url');
}

/** A verifier of Ed25519 note signatures (type 0x01), from a vkey. */
export function ed25519NoteVerifier(vkey: string): NoteVerifier {
  const k = parseVkey(vkey);
  if (k.type !== SIG_TYPE_ED25519) {
    throw new TlogError('MALFORMED_VKEY', `${k.name}: not an Ed25519 note key (type ${k.type})`);
  }
  const pub = ed25519PublicKey(k.key);
  return {
    name: k.name,
    keyId: k.keyId,
    verify: (text, signature) =>
      signature.length === 64 && verify(null, Buffer.from(text, 'utf8'), pub, signature),
  };
}

/** Signs notes under `name` with an Ed25519 private key (type 0x01). Ed25519 is deterministic. */
export function ed25519NoteSigner(name: string, privateKey: KeyObject): NoteSigner {
  if (!isValidKeyName(name)) throw new TlogError('MALFORMED_VKEY', `invalid key name "${name}"`);
  const raw = ed25519Raw(privateKey);
  const keyId = keyIdOf(name, SIG_TYPE_ED25519, raw);
  return {
    name,
    keyId,
    vkey: formatVkey(name, SIG_TYPE_ED25519, raw),
    sign: (text) => signatureLine(name, keyId, sign(null, Buffer.from(text, 'utf8'), privateKey)),
  };
}

export function signatureLine(name: string, keyId: number, signature: Uint8Array): string {
  const id = Buffer.alloc(4);
  id.writeUInt32BE(keyId);
  return `${EM_DASH} ${name} ${Buffer.concat([id, signature]).toString('base64')}\n`;
}

/** Checks the text rules: UTF-8 (a string), no control characters but newline, ends in a newline. */
function checkText(text: string): void {
  // eslint-disable-next-line no-control-regex
  if (/[\u0000-\u0009\u000b-\u001f]/.test(text)) malformed('it holds a control character');
  if (!text.endsWith('\n')) malformed('the text does not end with a newline');
}

/** Parses one signature line (without its newline). */
export function parseSignatureLine(line: string): NoteSignature {
  if (!line.startsWith(`${EM_DASH} `)) malformed('a signature line does not start with "— "');
  const rest = line.slice(2);
  const space = rest.indexOf(' ');
  if (space <= 0) malformed('a signature line has no key name');
  const name = rest.slice(0, space);
  if (!isValidKeyName(name)) malformed(`invalid key name "${name}"`);
  const raw = base64Strict(rest.slice(space + 1));
  if (raw === undefined || raw.length < 5) malformed(`the signature of ${name} is not base64 of ≥ 5 bytes`);
  return { name, keyId: raw!.readUInt32BE(0), signature: Buffer.from(raw!.subarray(4)), line: `${line}\n` };
}

/** Splits a signed note into its text and signatures (nothing verified yet). */
export function parseNote(input: string | Uint8Array): Note {
  let s: string;
  if (typeof input === 'string') s = input;
  else {
    try {
      s = new TextDecoder('utf-8', { fatal: true }).decode(input);
    } catch {
      return malformed('it is not UTF-8');
    }
  }
  if (Buffer.byteLength(s, 'utf8') > MAX_NOTE_BYTES) malformed(`it is larger than ${MAX_NOTE_BYTES} bytes`);
  checkText(s);
  const split = s.lastIndexOf('\n\n');
  if (split < 0) malformed('no blank line before the signatures');
  const text = s.slice(0, split + 1);
  const lines = s.slice(split + 2, -1).split('\n');
  if (lines.length === 1 && lines[0] === '') malformed('no signature');
  if (lines.length > MAX_SIGNATURES) malformed(`more than ${MAX_SIGNATURES} signatures`);
  return { text, signatures: lines.map(parseSignatureLine) };
}

export function formatNote(note: Note): string {
  return `${note.text}\n${note.signatures.map((s) => s.line).join('')}`;
}

/**
 * Verifies a note against known keys: returns the note and its signatures by known keys (all
 * verified). Throws NOTE_SIGNATURE_INVALID when a known key's signature fails or none is present.
 */
export function openNote(
  input: string | Uint8Array | Note,
  verifiers: readonly NoteVerifier[],
): { note: Note; verified: NoteSignature[] } {
  const note = typeof input === 'object' && 'text' in input ? input : parseNote(input);
  const verified: NoteSignature[] = [];
  for (const sig of note.signatures) {
    const v = verifiers.find((k) => k.name === sig.name && k.keyId === sig.keyId);
    if (v === undefined) continue;
    if (!v.verify(note.text, sig.signature)) {
      throw new TlogError('NOTE_SIGNATURE_INVALID', `the signature of ${sig.name} does not verify`);
    }
    verified.push(sig);
  }
  if (verified.length === 0) {
    throw new TlogError(
      'NOTE_SIGNATURE_INVALID',
      `no signature by a known key (${verifiers.map((v) => v.name).join(', ') || 'none given'})`,
    );
  }
  return { note, verified };
}
