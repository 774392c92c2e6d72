import type { ScittLogAppend, StoredLogEntry, SubtreeHash } from '../vault/index.ts';
import type { Signer } from '../signing/signer.ts';
import { hashRanges, inclusionRanges, nodesForRanges } from './merkle.ts';
import { receiptsUnder, signTreeHead, type SignedTreeHead } from './receipt.ts';
import { growTree, missingSubtree, rangeHasher } from './local-log-tree.ts';
import { fetchSubtrees, lookupIn } from './stored-tree.ts';

/**
 * One commit batch of the local log (local-log.ts), written in one transaction under the head lock:
 * entries already in the log (or repeated within the batch) come back with `created: false`; the
 * new ones get consecutive indexes, and all of them one receipt signature over the tree head the
 * batch commits.
 */

/** A statement checked and reduced to its entry before it reaches the database. */
export interface Prepared {
  readonly entry: Buffer;
  readonly leaf: Buffer;
  readonly entryId: string;
}

export interface AppendResult extends StoredLogEntry {
  /** False when the statement was already in the log (idempotent re-registration). */
  readonly created: boolean;
}

/** Who signs the batch's tree head: the log key, under the service's identity (CWT `iss`). */
export interface BatchSigning {
  readonly signer: Signer;
  readonly issuer: string;
}

/** Entries per chunk written to the COPY of a batch (see writeEntries). */
const COPY_CHUNK = 250;

/** The batch's new statements (first occurrence of each, not stored yet) and the index each gets. */
export interface BatchPlan {
  readonly fresh: readonly Prepared[];
  readonly indexOf: ReadonlyMap<string, number>;
}

/** Numbers the statements that are neither stored nor earlier in the batch from `start` on. */
export function planBatch(
  batch: readonly Prepared[],
  stored: ReadonlyMap<string, unknown>,
  start: number,
): BatchPlan {
  const fresh: Prepared[] = [];
  const indexOf = new Map<string, number>();
  for (const p of batch) {
    if (stored.has(p.entryId) || indexOf.has(p.entryId)) continue;
    indexOf.set(p.entryId, start + fresh.length);
    fresh.push(p);
  }
  return { fresh, indexOf };
}

/**
 * The results in input order: a stored entry as it was; a new one with its receipt, `created`
 * only for its first occurrence in the batch (a repeat is the same entry, not created again).
 */
export function batchResults(
  batch: readonly Prepared[],
  stored: ReadonlyMap<string, StoredLogEntry>,
  plan: BatchPlan & { readonly start: number; readonly receipts: readonly Buffer[]; readonly now: Date },
): AppendResult[] {
  const firstOf = new Set<string>();
  return batch.map((p): AppendResult => {
    const old = stored.get(p.entryId);
    if (old !== undefined) return { ...old, created: false };
    const k = plan.indexOf.get(p.entryId)! - plan.start;
    const isFirst = !firstOf.has(p.entryId);
    firstOf.add(p.entryId);
    return {
      entryId: p.entryId,
      index: plan.start + k,
      statement: plan.fresh[k]!.entry,
      receipt: plan.receipts[k]!,
      createdAt: plan.now,
      created: isFirst,
    };
  });
}

/**
 * One binary COPY of the new entries, fed a chunk at a time: PostgreSQL stores a chunk while this
 * process builds the receipts of the next. (A chunk's receipts are consecutive views of one buffer.)
 * Returns the receipts in order.
 */
async function writeEntries(
  tx: ScittLogAppend,
  fresh: readonly Prepared[],
  at: { start: number; size: number; now: Date },
  receiptOf: { signedHead: SignedTreeHead; path: (index: number) => Buffer[] },
): Promise<Buffer[]> {
  const { start, size, now } = at;
  const receipts: Buffer[] = [];
  const copy = await tx.copyEntries(now);
  for (let from = 0; from < fresh.length; from += COPY_CHUNK) {
    const part = fresh.slice(from, from + COPY_CHUNK);
    const block = receiptsUnder(
      receiptOf.signedHead,
      part.map((_, k) => ({
        treeSize: size,
        leafIndex: start + from + k,
        path: receiptOf.path(start + from + k),
      })),
    );
    receipts.push(...block);
    await copy.write(
      part.map((p, k) => ({
        index: start + from + k,
        entryId: p.entryId,
        entry: p.entry,
        leaf: p.leaf,
        receipt: block[k]!,
      })),
    );
  }
  await copy.end(fresh.length);
  return receipts;
}

/** Appends one batch inside `tx` (the storage's append transaction, head locked). */
export async function appendBatchLocked(
  tx: ScittLogAppend,
  batch: readonly Prepared[],
  signing: BatchSigning,
): Promise<AppendResult[]> {
  const start = tx.head.size;
  // The registration time and the entries already stored, in one round trip, after the lock.
  const { now, stored } = await tx.probe([...new Set(batch.map((p) => p.entryId))]);
  const plan = planBatch(batch, stored, start);
  const { fresh } = plan;
  if (fresh.length === 0) return batch.map((p) => ({ ...stored.get(p.entryId)!, created: false }));

  const size = start + fresh.length;
  // Every subtree the batch needs outside itself is a perfect subtree of [0, start) (the
  // binary decomposition): fetch those, then derive the new nodes, root and paths in memory.
  const known =
    start === 0
      ? new Map<string, Buffer>()
      : await fetchSubtrees((n) => tx.subtrees(n), nodesForRanges([{ start: 0, end: start }]));
  const created: SubtreeHash[] = growTree(
    known,
    start,
    fresh.map((p) => p.leaf),
  );
  const lookup = lookupIn(known, missingSubtree);
  const root = hashRanges([{ start: 0, end: size }], lookup)[0]!;
  const signedHead = signTreeHead({
    signer: signing.signer,
    issuer: signing.issuer,
    root,
    issuedAt: Math.floor(now.getTime() / 1000),
  });
  const rangeHash = rangeHasher(lookup);
  const path = (index: number): Buffer[] => inclusionRanges(index, size).map(rangeHash);
  const receipts = await writeEntries(tx, fresh, { start, size, now }, { signedHead, path });
  // The new subtrees and the head move in one statement.
  await tx.advance({ size, root }, now, created);
  return batchResults(batch, stored, { ...plan, start, receipts, now });
}
