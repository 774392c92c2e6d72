import { rootFromInclusionProof, hashesEqual } from '../transparency/merkle.ts';
import { openCheckpoint, type ParsedCheckpoint } from './checkpoint.ts';
import { TlogError } from './errors.ts';
import type { NoteVerifier } from './note.ts';
import { describeQuorum, quorumMet, verifiedCosigners, type TlogPolicy } from './policy.ts';

/**
 * C2SP tlog-proof (c2sp.org/tlog-proof@v1): an offline proof that an entry is in a log, in a tree
 * the log signed and witnesses cosigned.
 *
 *   c2sp.org/tlog-proof@v1
 *   [extra <base64>]
 *   index <leaf index>
 *   <base64 hash>…            (RFC 6962 inclusion proof, leaf's sibling first)
 *
 *   <checkpoint, verbatim, with its signature and cosignature lines>
 */

export const TLOG_PROOF_HEADER = 'c2sp.org/tlog-proof@v1';
/** File extension the spec recommends. */
export const TLOG_PROOF_EXTENSION = '.tlog-proof';

export interface TlogProof {
  readonly extra?: Buffer;
  readonly index: number;
  readonly proof: readonly Buffer[];
  /** The signed checkpoint note, verbatim. */
  readonly checkpoint: string;
}

export function formatTlogProof(p: TlogProof): string {
  return [
    TLOG_PROOF_HEADER,
    ...(p.extra !== undefined ? [`extra ${p.extra.toString('base64')}`] : []),
    `index ${p.index}`,
    ...p.proof.map((h) => h.toString('base64')),
    '',
    p.checkpoint,
  ].join('\n');
}

export function parseTlogProof(text: string): TlogProof {
  const bad = (why: string): never => {
    throw new TlogError('MALFORMED_PROOF', `not a tlog proof: ${why}`);
  };
  const blank = text.indexOf('\n\n');
  if (blank < 0) bad('no blank line before the checkpoint');
  const head = text.slice(0, blank).split('\n');
  const checkpoint = text.slice(blank + 2);
  if (head.shift() !== TLOG_PROOF_HEADER) bad(`the first line is not ${TLOG_PROOF_HEADER}`);
  let extra: Buffer | undefined;
  if (head[0]?.startsWith('extra ')) {
    const b64 = head.shift()!.slice(6);
    extra = Buffer.from(b64, 'base64');
    if (extra.toString('base64') !== b64) bad('extra is not base64');
  }
  const indexLine = head.shift();
  const m = indexLine === undefined ? null : /^index (0|[1-9][0-9]{0,15})$/.exec(indexLine);
  if (m === null || !Number.isSafeInteger(Number(m[1]))) return bad('no index line');
  if (head.length > 63) bad('more than 63 proof hashes');
  const proof = head.map((line) => {
    const h = Buffer.from(line, 'base64');
    if (h.length !== 32 || h.toString('base64') !== line) bad('a proof line is not base64 of 32 bytes');
    return h;
  });
  return { ...(extra !== undefined ? { extra } : {}), index: Number(m[1]), proof, checkpoint };
}

export interface VerifiedTlogProof {
  readonly checkpoint: ParsedCheckpoint;
  readonly index: number;
  /** Policy names of the witnesses whose cosignatures verified. */
  readonly cosigners: readonly string[];
}

/**
 * Verifies a tlog proof for the entry whose RFC 6962 leaf hash is `leafHash` (computed by the
 * caller from data it holds), in the order c2sp.org/tlog-proof gives: the checkpoint is of
 * `origin` (when given) and signed by a log key, the witnesses' cosignatures that verify satisfy
 * the policy's quorum, and the inclusion proof leads from the leaf to the signed root. Throws
 * TlogError MALFORMED_PROOF, MALFORMED_CHECKPOINT, ORIGIN_MISMATCH, NOTE_SIGNATURE_INVALID,
 * QUORUM_NOT_MET or INCLUSION_INVALID.
 */
export function verifyTlogProof(
  proofText: string | TlogProof,
  options: {
    readonly leafHash: Uint8Array;
    readonly logVerifiers: readonly NoteVerifier[];
    readonly origin?: string;
    readonly policy?: TlogPolicy;
  },
): VerifiedTlogProof {
  const p = typeof proofText === 'string' ? parseTlogProof(proofText) : proofText;
  const { checkpoint, note } = openCheckpoint(p.checkpoint, options.logVerifiers, options.origin);
  const cosigners = options.policy ? verifiedCosigners(note, options.policy) : new Set<string>();
  if (options.policy && !quorumMet(options.policy.quorum, cosigners)) {
    throw new TlogError(
      'QUORUM_NOT_MET',
      `checkpoint ${checkpoint.origin} size ${checkpoint.treeSize}: cosigned by ${cosigners.size === 0 ? 'no policy witness' : [...cosigners].join(', ')}; the quorum needs ${describeQuorum(options.policy.quorum)}`,
    );
  }
  const root = rootFromInclusionProof(options.leafHash, p.index, checkpoint.treeSize, p.proof);
  if (root === undefined || !hashesEqual(root, checkpoint.rootHash)) {
    throw new TlogError(
      'INCLUSION_INVALID',
      `entry ${p.index} is not included in ${checkpoint.origin} at size ${checkpoint.treeSize} by this proof`,
    );
  }
  return { checkpoint, index: p.index, cosigners: [...cosigners] };
}
