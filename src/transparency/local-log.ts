import type {
  LogHead,
  ScittLogAppend,
  ScittLogStorage,
  StoredLogEntry,
  SubtreeHash,
} from '../vault/index.ts';
import type { Signer } from '../signing/signer.ts';
import { logKeyOf, type LogKey } from '../cose/key.ts';
import { cwtClaims, decodeSign1 } from './statement.ts';
import { TransparencyError } from './errors.ts';
import {
  completedNodes,
  consistencyRanges,
  EMPTY_ROOT,
  hashRanges,
  inclusionRanges,
  leafHash,
  nodeHash,
  nodeKey,
  nodesForRanges,
  type NodeId,
  type Range,
} from './merkle.ts';
import {
  decodeReceipt,
  issueReceipt,
  receiptsUnder,
  sign1Entry,
  signTreeHead,
  type InclusionProof,
} from './receipt.ts';

/**
 * The service's own append-only RFC 9162 Merkle log: the `local` (dry-run) transparency backend,
 * and what src/http/routes/scrapi.ts serves to other deployments. The tree, receipts and group commit are
 * here; the rows are the vault's (src/vault/scitt-log.ts: entries, perfect-subtree hashes and the
 * head, whose row lock serializes appenders).
 *
 * Writes are group-committed: concurrent `append` calls that arrive while a batch transaction is
 * in flight form the next batch (`appendMany` is one batch). Costs, n = log size, b = batch size:
 * - a batch: one head lock, one read of the stored entries among its ids, one indexed read of
 *   ≤ log2(n) subtree hashes (the binary decomposition of [0, n)), b entry rows + about b node rows
 *   in one statement each, one head update; O(b log n) hashing and ONE signature: the receipts of
 *   a batch share a signed tree head and differ only in their (unsigned) inclusion proofs.
 *   Writers in other processes serialize on the head row; the critical section is a few
 *   milliseconds plus ~50 µs per entry.
 * - inclusion proof / receipt for any tree size, consistency proof between any two sizes, root at
 *   any size: one query fetching ≤ 2·log2(n) rows by primary key (every subtree a proof names is a
 *   right fold of perfect subtrees, and the non-perfect ones all lie on the right edge, sharing
 *   the decomposition of n), then O(log n) hashing. Never a scan of the log.
 */

/**
 * A stored entry. Its receipt is the one issued at registration: inclusion in the tree its commit
 * batch left behind (size index + 1 for a batch of one, at most index + batch size).
 */
export type LogEntry = StoredLogEntry;

export interface AppendResult extends LogEntry {
  /** False when the statement was already in the log (idempotent re-registration). */
  readonly created: boolean;
}

export type TreeHead = LogHead;

export interface ConsistencyProof {
  readonly oldSize: number;
  readonly newSize: number;
  readonly oldRoot: Buffer;
  readonly newRoot: Buffer;
  readonly proof: Buffer[];
}

export interface LocalLogOptions {
  /** Where the log's rows live (`vault.scittLog`). */
  readonly storage: ScittLogStorage;
  /** The log key: signs receipts. */
  readonly signer: Signer;
  /** The transparency service's identity, the CWT `iss` of its receipts (e.g. its base URL). */
  readonly issuer: string;
  /** Most statements one commit batch takes (group commit of concurrent appends). Default 1000. */
  readonly maxBatch?: number;
}

export interface LocalLog {
  readonly issuer: string;
  /** The log's public key(s), for /.well-known/scitt-keys and for verifying its receipts. */
  readonly keys: readonly LogKey[];
  /**
   * Registers a signed statement (needs CWT iss and sub); idempotent by statement content.
   * Concurrent calls are group-committed: those arriving while a batch is being written go
   * together in the next transaction, under one receipt signature.
   */
  append(statement: Uint8Array): Promise<AppendResult>;
  /** Registers statements in one transaction (results in input order); all or none are stored. */
  appendMany(statements: readonly Uint8Array[]): Promise<AppendResult[]>;
  getEntry(entryId: string): Promise<LogEntry | null>;
  getEntryByIndex(index: number): Promise<LogEntry | null>;
  treeHead(): Promise<TreeHead>;
  /** MTH of the first `size` leaves. */
  rootAt(size: number): Promise<Buffer>;
  /** Inclusion proof of leaf `index` in the tree of `treeSize` leaves (default: current size). */
  inclusionProof(index: number, treeSize?: number): Promise<InclusionProof & { root: Buffer }>;
  /**
   * A receipt for the entry: the one issued at registration, or, with `treeSize`, a fresh one
   * proving inclusion in that (larger) tree.
   */
  receipt(entryId: string, options?: { treeSize?: number }): Promise<Buffer>;
  /** RFC 9162 consistency proof from size m to size n (default: current size). */
  consistencyProof(m: number, n?: number): Promise<ConsistencyProof>;
}

const ENTRY_ID = /^[0-9a-f]{64}$/;

/** A statement checked and reduced to its entry before it reaches the database. */
interface Prepared {
  readonly entry: Buffer;
  readonly leaf: Buffer;
  readonly entryId: string;
}

/** Throws MALFORMED_STATEMENT for anything that is not a COSE_Sign1 with CWT iss and sub. */
function prepare(statement: Uint8Array): Prepared {
  const sign1 = decodeSign1(statement, 'MALFORMED_STATEMENT');
  if (cwtClaims(sign1.protectedHeader) === undefined) {
    throw new TransparencyError('MALFORMED_STATEMENT', 'the statement has no CWT iss and sub', {
      retryable: false,
    });
  }
  const entry = sign1Entry(statement, sign1);
  const leaf = leafHash(entry);
  return { entry, leaf, entryId: leaf.toString('hex') };
}

/** Entries per chunk written to the COPY of a batch (see appendBatchLocked). */
const COPY_CHUNK = 250;

/** Fetches the hashes of perfect subtrees (leaf hashes for level 0), keyed by nodeKey. */
async function fetchNodes(
  fetch: (nodes: readonly NodeId[]) => Promise<SubtreeHash[]>,
  nodes: readonly NodeId[],
): Promise<Map<string, Buffer>> {
  const out = new Map<string, Buffer>();
  if (nodes.length === 0) return out;
  for (const r of await fetch(nodes)) out.set(nodeKey(r), r.hash);
  return out;
}

function lookupIn(map: ReadonlyMap<string, Buffer>): (node: NodeId) => Buffer {
  return (node) => {
    const h = map.get(nodeKey(node));
    if (h === undefined) {
      // Every subtree below the head is stored by the append that completed it: a miss is corruption.
      throw new Error(`SCITT log is missing the hash of subtree ${nodeKey(node)}`);
    }
    return h;
  };
}

export function createLocalLog(options: LocalLogOptions): LocalLog {
  const { storage, signer, issuer } = options;
  const maxBatch = options.maxBatch ?? 1000;
  if (!Number.isSafeInteger(maxBatch) || maxBatch < 1)
    throw new RangeError(`maxBatch ${maxBatch} is not ≥ 1`);
  const keys = Object.freeze([logKeyOf(signer.publicKey)]);
  const subtrees = (nodes: readonly NodeId[]) => storage.subtrees(nodes);
  const hashesOf = async (ranges: readonly Range[]): Promise<Buffer[]> =>
    hashRanges(ranges, lookupIn(await fetchNodes(subtrees, nodesForRanges(ranges))));

  const checkSize = (size: number, head: TreeHead, what: string): void => {
    if (!Number.isSafeInteger(size) || size < 0 || size > head.size) {
      throw new TransparencyError(
        'INVALID_TREE_SIZE',
        `${what} ${size} is outside the log (size ${head.size})`,
        { retryable: false },
      );
    }
  };

  const rootOf = async (size: number, head: TreeHead): Promise<Buffer> => {
    if (size === head.size) return head.root;
    if (size === 0) return EMPTY_ROOT;
    return (await hashesOf([{ start: 0, end: size }]))[0]!;
  };

  const getEntry = async (entryId: string): Promise<LogEntry | null> => {
    if (!ENTRY_ID.test(entryId)) return null;
    return storage.entry(entryId);
  };

  /**
   * Appends one batch in one transaction under the head lock: entries already in the log (or
   * repeated within the batch) come back with `created: false`; the new ones get consecutive
   * indexes, and all of them one receipt signature over the tree head the batch commits.
   */
  const appendBatchLocked = async (
    tx: ScittLogAppend,
    batch: readonly Prepared[],
  ): Promise<AppendResult[]> => {
    const head = tx.head;
    const ids = [...new Set(batch.map((p) => p.entryId))];
    // The registration time and the entries already stored, in one round trip, after the lock.
    const { now, stored } = await tx.probe(ids);

    const start = head.size;
    const fresh: Prepared[] = [];
    const indexOf = new Map<string, number>();
    for (const p of batch) {
      if (stored.has(p.entryId) || indexOf.has(p.entryId)) continue;
      indexOf.set(p.entryId, start + fresh.length);
      fresh.push(p);
    }
    if (fresh.length === 0) return batch.map((p) => ({ ...stored.get(p.entryId)!, created: false }));

    const size = start + fresh.length;
    // Every subtree the batch needs outside itself is a perfect subtree of [0, start) (the
    // binary decomposition): fetch those, then derive the new nodes, root and paths in memory.
    const known =
      start === 0
        ? new Map<string, Buffer>()
        : await fetchNodes((n) => tx.subtrees(n), nodesForRanges([{ start: 0, end: start }]));
    const lookup = lookupIn(known);
    const created: SubtreeHash[] = [];
    for (const [k, p] of fresh.entries()) {
      const index = start + k;
      known.set(nodeKey({ level: 0, index }), p.leaf);
      for (const node of completedNodes(index)) {
        const h = nodeHash(
          lookup({ level: node.level - 1, index: 2 * node.index }),
          lookup({ level: node.level - 1, index: 2 * node.index + 1 }),
        );
        known.set(nodeKey(node), h);
        created.push({ level: node.level, index: node.index, hash: h });
      }
    }
    const [root] = hashRanges([{ start: 0, end: size }], lookup);
    const signedHead = signTreeHead({
      signer,
      issuer,
      root: root!,
      issuedAt: Math.floor(now.getTime() / 1000),
    });
    // The paths of a batch share their right-edge (non-perfect) ranges: fold each once.
    const folds = new Map<string, Buffer>();
    const rangeHash = (r: Range): Buffer => {
      const width = r.end - r.start;
      if (Number.isInteger(Math.log2(width))) return hashRanges([r], lookup)[0]!;
      const key = `${r.start}:${r.end}`;
      let h = folds.get(key);
      if (h === undefined) {
        h = hashRanges([r], lookup)[0]!;
        folds.set(key, h);
      }
      return h;
    };
    // One binary COPY, fed a chunk at a time: PostgreSQL stores a chunk while this process builds
    // the receipts of the next. (A chunk's receipts are consecutive views of one buffer.)
    const receipts: Buffer[] = [];
    const copy = await tx.copyEntries(now);
    for (let from = 0; from < fresh.length; from += COPY_CHUNK) {
      const part = fresh.slice(from, from + COPY_CHUNK);
      const block = receiptsUnder(
        signedHead,
        part.map((_, k) => ({
          treeSize: size,
          leafIndex: start + from + k,
          path: inclusionRanges(start + from + k, size).map(rangeHash),
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
    // The new subtrees and the head move in one statement.
    await tx.advance({ size, root: root! }, now, created);
    const firstOf = new Set<string>();
    return batch.map((p): AppendResult => {
      const old = stored.get(p.entryId);
      if (old !== undefined) return { ...old, created: false };
      const k = indexOf.get(p.entryId)! - start;
      const isFirst = !firstOf.has(p.entryId);
      firstOf.add(p.entryId);
      return {
        entryId: p.entryId,
        index: start + k,
        statement: fresh[k]!.entry,
        receipt: receipts[k]!,
        createdAt: now,
        created: isFirst,
      };
    });
  };

  /** One transaction for the batch (the storage retries it once after a unique violation). */
  const appendBatch = async (batch: readonly Prepared[]): Promise<AppendResult[]> => {
    // Fast path without the lock for a lone statement: a re-registration (a client retrying, a
    // publisher resubmitting) returns the stored entry. A batch is mostly new statements: looking
    // them up twice would cost more than the lock.
    if (batch.length === 1) {
      const known = await storage.entries([batch[0]!.entryId]);
      const stored = known.get(batch[0]!.entryId);
      if (stored !== undefined) return [{ ...stored, created: false }];
    }
    return storage.inAppendTransaction((tx) => appendBatchLocked(tx, batch));
  };

  // Group commit: appends arriving while a batch transaction is in flight wait for it and then go
  // together in the next one (at most maxBatch each). A lone append is a batch of one, at once.
  const pending: { prepared: Prepared; resolve: (r: AppendResult) => void; reject: (e: unknown) => void }[] =
    [];
  let flushing = false;
  const flush = async (): Promise<void> => {
    flushing = true;
    try {
      while (pending.length > 0) {
        const batch = pending.splice(0, maxBatch);
        try {
          const results = await appendBatch(batch.map((b) => b.prepared));
          for (const [i, b] of batch.entries()) b.resolve(results[i]!);
        } catch (err) {
          for (const b of batch) b.reject(err);
        }
      }
    } finally {
      flushing = false;
    }
  };
  const enqueue = (prepared: Prepared): Promise<AppendResult> =>
    new Promise((resolve, reject) => {
      pending.push({ prepared, resolve, reject });
      // A microtask, not at once: appends issued in the same tick (Promise.all over a claim) share
      // the first transaction.
      if (!flushing) {
        flushing = true;
        queueMicrotask(() => void flush());
      }
    });

  const inclusionProof = async (
    index: number,
    treeSize?: number,
  ): Promise<InclusionProof & { root: Buffer }> => {
    const head = await storage.head();
    const size = treeSize ?? head.size;
    checkSize(size, head, 'tree size');
    if (!Number.isSafeInteger(index) || index < 0 || index >= size) {
      throw new TransparencyError('ENTRY_NOT_FOUND', `no leaf ${index} in a tree of size ${size}`, {
        retryable: false,
      });
    }
    // One query for the path and the root together.
    const hashes = await hashesOf([...inclusionRanges(index, size), { start: 0, end: size }]);
    const root = hashes.pop()!;
    return { treeSize: size, leafIndex: index, path: hashes, root };
  };

  return {
    issuer,
    keys,

    // async: a malformed statement rejects, it does not throw synchronously.
    append: async (statement) => enqueue(prepare(statement)),

    appendMany: async (statements) => appendBatch(statements.map(prepare)),

    getEntry,

    async getEntryByIndex(index) {
      if (!Number.isSafeInteger(index) || index < 0) return null;
      return storage.entryAt(index);
    },

    treeHead: () => storage.head(),

    async rootAt(size) {
      const head = await storage.head();
      checkSize(size, head, 'tree size');
      return rootOf(size, head);
    },

    inclusionProof,

    async receipt(entryId, opts = {}) {
      const entry = await getEntry(entryId);
      if (entry === null) {
        throw new TransparencyError('ENTRY_NOT_FOUND', `no entry ${entryId}`, { retryable: false });
      }
      const issuedSize = decodeReceipt(entry.receipt).proofs[0]!.treeSize;
      if (opts.treeSize === undefined || opts.treeSize === issuedSize) return entry.receipt;
      if (opts.treeSize <= entry.index) {
        throw new TransparencyError(
          'INVALID_TREE_SIZE',
          `entry ${entryId} (index ${entry.index}) is not in a tree of size ${opts.treeSize}`,
          { retryable: false },
        );
      }
      const proof = await inclusionProof(entry.index, opts.treeSize);
      return issueReceipt({
        signer,
        issuer,
        proof,
        root: proof.root,
        issuedAt: Math.floor(entry.createdAt.getTime() / 1000),
      });
    },

    async consistencyProof(m, n) {
      const head = await storage.head();
      const newSize = n ?? head.size;
      checkSize(newSize, head, 'new tree size');
      checkSize(m, { size: newSize, root: head.root }, 'old tree size');
      const ranges = consistencyRanges(m, newSize);
      const edges: Range[] = [];
      if (m > 0) edges.push({ start: 0, end: m });
      if (newSize > 0) edges.push({ start: 0, end: newSize });
      const hashes = await hashesOf([...ranges, ...edges]);
      const newRoot = newSize > 0 ? hashes.pop()! : EMPTY_ROOT;
      const oldRoot = m > 0 ? hashes.pop()! : EMPTY_ROOT;
      return { oldSize: m, newSize, oldRoot, newRoot, proof: hashes };
    },
  };
}
