import { TlogError } from './errors.ts';
import {
  formatNote,
  openNote,
  parseNote,
  parseSignatureLine,
  type Note,
  type NoteSigner,
  type NoteVerifier,
} from './note.ts';

/**
 * C2SP tlog-checkpoint (c2sp.org/tlog-checkpoint@v1): a signed note whose text is
 *
 *   <origin>\n<tree size, decimal>\n<base64 RFC 6962 root hash>\n[extension lines]
 *
 * This service writes no extension lines (the spec advises against them). The log's key name is
 * its origin. Root hashes are RFC 9162 MTH, which is RFC 6962's.
 */

export interface CheckpointBody {
  readonly origin: string;
  readonly treeSize: number;
  readonly rootHash: Buffer;
}

export interface ParsedCheckpoint extends CheckpointBody {
  /** Extension lines, each ending in a newline ('' when none). */
  readonly extension: string;
}

export function checkpointText(c: CheckpointBody): string {
  if (c.origin === '' || /[\n]/.test(c.origin)) {
    throw new TlogError('MALFORMED_CHECKPOINT', 'the origin must be one non-empty line');
  }
  if (!Number.isSafeInteger(c.treeSize) || c.treeSize < 0) {
    throw new TlogError('MALFORMED_CHECKPOINT', 'the tree size must be a non-negative integer');
  }
  if (c.rootHash.length !== 32) throw new TlogError('MALFORMED_CHECKPOINT', 'the root hash has 32 bytes');
  return `${c.origin}\n${c.treeSize}\n${c.rootHash.toString('base64')}\n`;
}

const SIZE = /^(0|[1-9][0-9]{0,15})$/;

/** Parses a checkpoint's note text (not the signatures). */
export function parseCheckpointText(text: string): ParsedCheckpoint {
  const bad = (why: string): never => {
    throw new TlogError('MALFORMED_CHECKPOINT', `not a tlog checkpoint: ${why}`);
  };
  if (!text.endsWith('\n')) bad('the text does not end with a newline');
  const lines = text.slice(0, -1).split('\n');
  if (lines.length < 3) bad('fewer than three lines');
  const [origin, size, root, ...ext] = lines as [string, string, string, ...string[]];
  if (origin === '') bad('empty origin');
  if (!SIZE.test(size) || !Number.isSafeInteger(Number(size))) bad(`tree size "${size}"`);
  const rootHash = Buffer.from(root, 'base64');
  if (rootHash.length !== 32 || rootHash.toString('base64') !== root)
    bad('the root hash is not base64 of 32 bytes');
  if (ext.some((l) => l === '')) bad('an empty extension line');
  return {
    origin,
    treeSize: Number(size),
    rootHash,
    extension: ext.map((l) => `${l}\n`).join(''),
  };
}

/** Signs a checkpoint with the log's note signer: the whole note, one signature line. */
export function signCheckpoint(c: CheckpointBody, signer: NoteSigner): string {
  if (signer.name !== c.origin) {
    throw new TlogError(
      'ORIGIN_MISMATCH',
      `the log key ${signer.name} is not named after the origin ${c.origin}`,
    );
  }
  const text = checkpointText(c);
  return `${text}\n${signer.sign(text)}`;
}

/**
 * Opens a signed checkpoint: the log's signature must verify (and be present), the origin must be
 * `origin` when given. Returns the parsed body, the note and the signatures that verified.
 */
export function openCheckpoint(
  input: string | Uint8Array,
  logVerifiers: readonly NoteVerifier[],
  origin?: string,
): { checkpoint: ParsedCheckpoint; note: Note } {
  const note = parseNote(input);
  const checkpoint = parseCheckpointText(note.text);
  if (origin !== undefined && checkpoint.origin !== origin) {
    throw new TlogError('ORIGIN_MISMATCH', `the checkpoint is of ${checkpoint.origin}, not ${origin}`);
  }
  openNote(note, logVerifiers);
  return { checkpoint, note };
}

/** The note with signature lines added (those already present, by line, are not repeated). */
export function withSignatures(note: Note, lines: readonly string[]): string {
  const have = new Set(note.signatures.map((s) => s.line));
  const extra = lines.filter((l) => !have.has(l)).map((l) => parseSignatureLine(l.replace(/\n$/, '')));
  return formatNote({ text: note.text, signatures: [...note.signatures, ...extra] });
}
