import type pg from 'pg';
import { GENESIS_DIGEST, type DsseEnvelope } from './types.ts';
import { VaultError } from './errors.ts';

export type ChainBreak =
  /** The stored envelope no longer hashes to the stored digest (the envelope or digest changed). */
  | 'DIGEST_MISMATCH'
  /** `prev_digest` differs from the previous row's digest (a row was removed, replaced or reordered). */
  | 'PREV_MISMATCH'
  /** `seq` does not follow the previous row's seq (rows were removed). */
  | 'SEQ_GAP'
  /** The id is not greater than the previous row's id (ids were rewritten). */
  | 'ID_ORDER'
  /** The chain head names a row the walk did not end on (rows at the end were removed). */
  | 'HEAD_MISMATCH';

export interface ChainReport {
  readonly ok: boolean;
  /** Rows examined, up to and including the first broken one. */
  readonly checked: number;
  /** Seq of the chain head when the walk started; later appends are not examined. */
  readonly headSeq: number;
  readonly firstBroken?: { readonly seq: number; readonly id: string | null; readonly reason: ChainBreak };
}

export interface VerifyChainOptions {
  /** Recomputes an envelope's digest: sha256 over its RFC 8785 canonical JSON (see src/attest). */
  readonly digestOf: (envelope: DsseEnvelope) => string;
  /** Rows per keyset batch (default 1000). */
  readonly batchSize?: number;
}

interface LinkRow {
  seq: string;
  id: string;
  envelope: DsseEnvelope;
  digest: string;
  prev_digest: string;
}

/**
 * Walks the chain (from the first record still attached) in seq order with keyset batches (flat memory, one short query per batch, no long
 * transaction) up to the head read at the start, and reports the first broken link. Each row is
 * checked for seq continuity, the prev link, its own digest and id order, in that order; at the
 * end the last row must be the one the head names, which catches removal of the newest rows.
 */
export async function verifyChain(pool: pg.Pool, options: VerifyChainOptions): Promise<ChainReport> {
  const batchSize = options.batchSize ?? 1000;
  if (!Number.isInteger(batchSize) || batchSize < 1) throw new RangeError('batchSize must be ≥ 1');
  const headResult = await pool.query<{ last_seq: string; last_id: string | null; last_digest: string }>(
    'SELECT last_seq, last_id, last_digest FROM vault_head',
  );
  const head = headResult.rows[0];
  // Invariant, not a caller's error: the migrations create this row (a plain Error, issue 23).
  if (head === undefined)
    throw new VaultError('MIGRATION_PENDING', 'vault_head row is missing: was migration 0001 applied?');
  const headSeq = Number(head.last_seq);

  // Records of archived partitions left the table (retention, migration 0019), always the oldest:
  // the walk resumes at the last archived record's link (the archive bundles and the signed
  // checkpoints prove what came before).
  const archived = await pool.query<{ last_seq: string; last_digest: string }>(
    "SELECT last_seq, last_digest FROM vault_partitions WHERE parent = 'attestations' " +
      "AND state IN ('detached', 'dropped') AND last_seq IS NOT NULL ORDER BY last_seq DESC LIMIT 1",
  );
  const resume = archived.rows[0];
  let checked = 0;
  let prevSeq = resume !== undefined ? Number(resume.last_seq) : 0;
  let prevDigest = resume?.last_digest ?? GENESIS_DIGEST;
  let prevId: string | null = null;
  const broken = (seq: number, id: string | null, reason: ChainBreak): ChainReport => ({
    ok: false,
    checked,
    headSeq,
    firstBroken: { seq, id, reason },
  });
  for (;;) {
    const { rows } = await pool.query<LinkRow>({
      name: 'vault_chain_batch',
      text:
        'SELECT seq, id, envelope, digest, prev_digest FROM attestations ' +
        'WHERE seq > $1 AND seq <= $2 ORDER BY seq LIMIT $3',
      values: [prevSeq, headSeq, batchSize],
    });
    for (const r of rows) {
      checked += 1;
      const seq = Number(r.seq);
      if (seq !== prevSeq + 1) return broken(seq, r.id, 'SEQ_GAP');
      if (r.prev_digest !== prevDigest) return broken(seq, r.id, 'PREV_MISMATCH');
      if (options.digestOf(r.envelope) !== r.digest) return broken(seq, r.id, 'DIGEST_MISMATCH');
      // uuid text is fixed-width lowercase hex, so string order is byte order.
      if (prevId !== null && r.id <= prevId) return broken(seq, r.id, 'ID_ORDER');
      prevSeq = seq;
      prevDigest = r.digest;
      prevId = r.id;
    }
    if (rows.length < batchSize) break;
  }
  if (prevSeq !== headSeq || prevDigest !== head.last_digest || prevId !== head.last_id) {
    return broken(headSeq, head.last_id, 'HEAD_MISMATCH');
  }
  return { ok: true, checked, headSeq };
}
