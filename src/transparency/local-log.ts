import type { LogHead, ScittLogStorage, StoredLogEntry } from '../vault/index.ts';
import type { Signer } from '../signing/signer.ts';
import { logKeyOf, type LogKey } from '../cose/key.ts';
import { cwtClaims, decodeSign1 } from './statement.ts';
import { TransparencyError } from './errors.ts';
import { consistencyRanges, EMPTY_ROOT, inclusionRanges, leafHash, type Range } from './merkle.ts';
import { decodeReceipt, issueReceipt, sign1Entry, type InclusionProof } from './receipt.ts';
import { groupCommit } from './group-commit.ts';
import { appendBatchLocked, type AppendResult, type BatchSigning, type Prepared } from './local-log-batch.ts';
import { missingSubtree } from './local-log-tree.ts';
import { hashStoredRanges } from './stored-tree.ts';

/**
 * The service's own append-only RFC 9162 Merkle log: the `local` (dry-run) transparency backend,
 * and what src/http/routes/scrapi.ts serves to other deployments. The tree, receipts and group commit are
 * here (the batch write in local-log-batch.ts, its tree arithmetic in local-log-tree.ts, the
 * group commit in group-commit.ts); the rows are the vault's (src/vault/scitt-log.ts: entries, perfect-subtree hashes and the
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

export type { AppendResult };

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

/** INVALID_TREE_SIZE unless 0 ≤ size ≤ the head's size. */
function checkSize(size: number, head: TreeHead, what: string): void {
  if (!Number.isSafeInteger(size) || size < 0 || size > head.size) {
    throw new TransparencyError(
      'INVALID_TREE_SIZE',
      `${what} ${size} is outside the log (size ${head.size})`,
      {
        retryable: false,
      },
    );
  }
}

/**
 * The read side over the stored rows: every proof and root is the hashes of a few ranges, fetched
 * in one query (the perfect subtrees they decompose into) and folded in memory.
 */
class TreeReader {
  readonly storage: ScittLogStorage;

  constructor(storage: ScittLogStorage) {
    this.storage = storage;
  }

  hashesOf(ranges: readonly Range[]): Promise<Buffer[]> {
    return hashStoredRanges((n) => this.storage.subtrees(n), ranges, missingSubtree);
  }

  async rootAt(size: number): Promise<Buffer> {
    const head = await this.storage.head();
    checkSize(size, head, 'tree size');
    if (size === head.size) return head.root;
    if (size === 0) return EMPTY_ROOT;
    return (await this.hashesOf([{ start: 0, end: size }]))[0]!;
  }

  async inclusionProof(index: number, treeSize?: number): Promise<InclusionProof & { root: Buffer }> {
    const head = await this.storage.head();
    const size = treeSize ?? head.size;
    checkSize(size, head, 'tree size');
    if (!Number.isSafeInteger(index) || index < 0 || index >= size) {
      throw new TransparencyError('ENTRY_NOT_FOUND', `no leaf ${index} in a tree of size ${size}`, {
        retryable: false,
      });
    }
    // One query for the path and the root together.
    const hashes = await this.hashesOf([...inclusionRanges(index, size), { start: 0, end: size }]);
    const root = hashes.pop()!;
    return { treeSize: size, leafIndex: index, path: hashes, root };
  }

  async consistencyProof(m: number, n?: number): Promise<ConsistencyProof> {
    const head = await this.storage.head();
    const newSize = n ?? head.size;
    checkSize(newSize, head, 'new tree size');
    checkSize(m, { size: newSize, root: head.root }, 'old tree size');
    const edges: Range[] = [];
    if (m > 0) edges.push({ start: 0, end: m });
    if (newSize > 0) edges.push({ start: 0, end: newSize });
    // The proof and both roots in one query; the roots come last.
    const hashes = await this.hashesOf([...consistencyRanges(m, newSize), ...edges]);
    const newRoot = newSize > 0 ? hashes.pop()! : EMPTY_ROOT;
    const oldRoot = m > 0 ? hashes.pop()! : EMPTY_ROOT;
    return { oldSize: m, newSize, oldRoot, newRoot, proof: hashes };
  }

  async getEntry(entryId: string): Promise<LogEntry | null> {
    if (!ENTRY_ID.test(entryId)) return null;
    return this.storage.entry(entryId);
  }

  /**
   * The receipt issued at registration, or a fresh one (signed now, dated at registration) proving
   * inclusion in a larger tree.
   */
  async receipt(signing: BatchSigning, entryId: string, treeSize: number | undefined): Promise<Buffer> {
    const entry = await this.getEntry(entryId);
    if (entry === null) {
      throw new TransparencyError('ENTRY_NOT_FOUND', `no entry ${entryId}`, { retryable: false });
    }
    const issuedSize = decodeReceipt(entry.receipt).proofs[0]!.treeSize;
    if (treeSize === undefined || treeSize === issuedSize) return entry.receipt;
    if (treeSize <= entry.index) {
      throw new TransparencyError(
        'INVALID_TREE_SIZE',
        `entry ${entryId} (index ${entry.index}) is not in a tree of size ${treeSize}`,
        { retryable: false },
      );
    }
    const proof = await this.inclusionProof(entry.index, treeSize);
    return issueReceipt({
      signer: signing.signer,
      issuer: signing.issuer,
      proof,
      root: proof.root,
      issuedAt: Math.floor(entry.createdAt.getTime() / 1000),
    });
  }
}

/**
 * One transaction for the batch (the storage retries it once after a unique violation). Fast path
 * without the lock for a lone statement: a re-registration (a client retrying, a publisher
 * resubmitting) returns the stored entry. A batch is mostly new statements: looking them up twice
 * would cost more than the lock.
 */
async function appendBatch(
  storage: ScittLogStorage,
  signing: BatchSigning,
  batch: readonly Prepared[],
): Promise<AppendResult[]> {
  if (batch.length === 1) {
    const known = await storage.entries([batch[0]!.entryId]);
    const stored = known.get(batch[0]!.entryId);
    if (stored !== undefined) return [{ ...stored, created: false }];
  }
  return storage.inAppendTransaction((tx) => appendBatchLocked(tx, batch, signing));
}

export function createLocalLog(options: LocalLogOptions): LocalLog {
  const { storage, signer, issuer } = options;
  const maxBatch = options.maxBatch ?? 1000;
  if (!Number.isSafeInteger(maxBatch) || maxBatch < 1)
    throw new RangeError(`maxBatch ${maxBatch} is not ≥ 1`);
  const signing: BatchSigning = { signer, issuer };
  const reader = new TreeReader(storage);
  // Appends arriving while a batch transaction is in flight go together in the next one.
  const enqueue = groupCommit(maxBatch, (batch: Prepared[]) => appendBatch(storage, signing, batch));

  return {
    issuer,
    keys: Object.freeze([logKeyOf(signer.publicKey)]),
    // async: a malformed statement rejects, it does not throw synchronously.
    append: async (statement) => enqueue(prepare(statement)),
    appendMany: async (statements) => appendBatch(storage, signing, statements.map(prepare)),
    getEntry: (entryId) => reader.getEntry(entryId),
    async getEntryByIndex(index) {
      if (!Number.isSafeInteger(index) || index < 0) return null;
      return storage.entryAt(index);
    },
    treeHead: () => storage.head(),
    rootAt: (size) => reader.rootAt(size),
    inclusionProof: (index, treeSize) => reader.inclusionProof(index, treeSize),
    receipt: (entryId, opts = {}) => reader.receipt(signing, entryId, opts.treeSize),
    consistencyProof: (m, n) => reader.consistencyProof(m, n),
  };
}
