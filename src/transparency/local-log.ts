import { once } from 'node:events';
import { finished } from 'node:stream/promises';
import type pg from 'pg';
import copyStreams from 'pg-copy-streams';
import {
  COPY_BINARY_HEADER,
  COPY_BINARY_TRAILER,
  encodeCopyRows,
  int8Field,
  textField,
  timestamptzField,
} from '../vault/copy-binary.ts';
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
 * The service's own append-only RFC 9162 Merkle log in PostgreSQL (migration 0005): the `local`
 * (dry-run) transparency backend, and what src/http/routes/scrapi.ts serves to other deployments.
 *
 * Storage: `scitt_log_entries` (one row per entry; leaf hashes are level 0), `scitt_log_nodes`
 * (every complete perfect subtree of level ≥ 1, written once by the append that completes it),
 * `scitt_log_head` (size and root; its row lock serializes appenders).
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

export interface LogEntry {
  /** Hex of the leaf hash: content-addressed, equal for equal statements. */
  readonly entryId: string;
  /** RFC 9162 leaf index. */
  readonly index: number;
  /** The entry: the registered statement with its unprotected header emptied. */
  readonly statement: Buffer;
  /**
   * The receipt issued at registration: inclusion in the tree its commit batch left behind (size
   * index + 1 for a batch of one, at most index + batch size).
   */
  readonly receipt: Buffer;
  readonly createdAt: Date;
}

export interface AppendResult extends LogEntry {
  /** False when the statement was already in the log (idempotent re-registration). */
  readonly created: boolean;
}

export interface TreeHead {
  readonly size: number;
  readonly root: Buffer;
}

export interface ConsistencyProof {
  readonly oldSize: number;
  readonly newSize: number;
  readonly oldRoot: Buffer;
  readonly newRoot: Buffer;
  readonly proof: Buffer[];
}

export interface LocalLogOptions {
  readonly pool: pg.Pool;
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
const SQLSTATE_UNIQUE_VIOLATION = '23505';

interface EntryRow {
  idx: string;
  entry_id: string;
  statement: Buffer;
  receipt: Buffer;
  created_at: Date;
}

interface HeadRow {
  tree_size: string;
  root_hash: Buffer;
}

type Queryable = pg.Pool | pg.PoolClient;

const ENTRY_COLUMNS = 'idx, entry_id, statement, receipt, created_at';
const ENTRY_COLUMNS_OF = (alias: string): string =>
  ENTRY_COLUMNS.split(', ')
    .map((c) => `${alias}.${c}`)
    .join(', ');

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

const COPY_ENTRIES_SQL =
  'COPY scitt_log_entries (idx, entry_id, statement, leaf_hash, receipt, created_at) FROM STDIN (FORMAT binary)';

async function storedEntries(q: Queryable, entryIds: readonly string[]): Promise<Map<string, LogEntry>> {
  const { rows } = await q.query<EntryRow>({
    name: 'scitt_log_get_entries',
    text: `SELECT ${ENTRY_COLUMNS} FROM scitt_log_entries WHERE entry_id = ANY($1::text[])`,
    values: [entryIds],
  });
  return new Map(rows.map((r) => [r.entry_id, toEntry(r)]));
}

function toEntry(r: EntryRow): LogEntry {
  return {
    entryId: r.entry_id,
    index: Number(r.idx),
    statement: r.statement,
    receipt: r.receipt,
    createdAt: r.created_at,
  };
}

/** Fetches the hashes of perfect subtrees (leaf hashes for level 0) in one query. */
async function fetchNodes(q: Queryable, nodes: readonly NodeId[]): Promise<Map<string, Buffer>> {
  const out = new Map<string, Buffer>();
  if (nodes.length === 0) return out;
  const leaves = nodes.filter((n) => n.level === 0).map((n) => n.index);
  const inner = nodes.filter((n) => n.level > 0);
  const { rows } = await q.query<{ level: number; idx: string; hash: Buffer }>({
    name: 'scitt_log_fetch_nodes',
    text:
      'SELECT 0 AS level, idx, leaf_hash AS hash FROM scitt_log_entries WHERE idx = ANY($1::bigint[]) ' +
      'UNION ALL ' +
      'SELECT n.level::int, n.idx, n.hash FROM scitt_log_nodes n ' +
      'JOIN unnest($2::smallint[], $3::bigint[]) AS w(level, idx) ON n.level = w.level AND n.idx = w.idx',
    values: [leaves, inner.map((n) => n.level), inner.map((n) => n.index)],
  });
  for (const r of rows) out.set(nodeKey({ level: r.level, index: Number(r.idx) }), r.hash);
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

async function hashesOf(q: Queryable, ranges: readonly Range[]): Promise<Buffer[]> {
  return hashRanges(ranges, lookupIn(await fetchNodes(q, nodesForRanges(ranges))));
}

export function createLocalLog(options: LocalLogOptions): LocalLog {
  const { pool, signer, issuer } = options;
  const maxBatch = options.maxBatch ?? 1000;
  if (!Number.isSafeInteger(maxBatch) || maxBatch < 1)
    throw new RangeError(`maxBatch ${maxBatch} is not ≥ 1`);
  const keys = Object.freeze([logKeyOf(signer.publicKey)]);

  const readHead = async (q: Queryable, lock: boolean): Promise<TreeHead> => {
    const { rows } = await q.query<HeadRow>(
      `SELECT tree_size, root_hash FROM scitt_log_head${lock ? ' FOR UPDATE' : ''}`,
    );
    const head = rows[0];
    if (head === undefined) throw new Error('scitt_log_head row is missing: was migration 0005 applied?');
    return { size: Number(head.tree_size), root: head.root_hash };
  };

  const checkSize = (size: number, head: TreeHead, what: string): void => {
    if (!Number.isSafeInteger(size) || size < 0 || size > head.size) {
      throw new TransparencyError(
        'INVALID_TREE_SIZE',
        `${what} ${size} is outside the log (size ${head.size})`,
        { retryable: false },
      );
    }
  };

  const rootOf = async (q: Queryable, size: number, head: TreeHead): Promise<Buffer> => {
    if (size === head.size) return head.root;
    if (size === 0) return EMPTY_ROOT;
    return (await hashesOf(q, [{ start: 0, end: size }]))[0]!;
  };

  const getEntry = async (entryId: string): Promise<LogEntry | null> => {
    if (!ENTRY_ID.test(entryId)) return null;
    const { rows } = await pool.query<EntryRow>({
      name: 'scitt_log_get_entry',
      text: `SELECT ${ENTRY_COLUMNS} FROM scitt_log_entries WHERE entry_id = $1`,
      values: [entryId],
    });
    return rows[0] === undefined ? null : toEntry(rows[0]);
  };

  /**
   * Appends one batch in one transaction under the head lock: entries already in the log (or
   * repeated within the batch) come back with `created: false`; the new ones get consecutive
   * indexes, and all of them one receipt signature over the tree head the batch commits.
   */
  const appendBatchLocked = async (
    client: pg.PoolClient,
    batch: readonly Prepared[],
  ): Promise<AppendResult[]> => {
    const head = await readHead(client, true);
    const ids = [...new Set(batch.map((p) => p.entryId))];
    // The registration time and the entries already stored, in one round trip: at least one row
    // (for the time), plus one per stored entry. A new statement after the lock, so its snapshot
    // sees every append committed before ours.
    const probe = await client.query<{ now: Date } & { [K in keyof EntryRow]: EntryRow[K] | null }>({
      name: 'scitt_log_append_probe',
      text:
        `SELECT date_trunc('milliseconds', clock_timestamp()) AS now, ${ENTRY_COLUMNS_OF('e')} ` +
        'FROM (SELECT) AS one LEFT JOIN scitt_log_entries e ON e.entry_id = ANY($1::text[])',
      values: [ids],
    });
    const now = probe.rows[0]!.now;
    const stored = new Map<string, LogEntry>();
    for (const r of probe.rows) if (r.entry_id !== null) stored.set(r.entry_id, toEntry(r as EntryRow));

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
        : await fetchNodes(client, nodesForRanges([{ start: 0, end: start }]));
    const lookup = lookupIn(known);
    const created: { node: NodeId; hash: Buffer }[] = [];
    for (const [k, p] of fresh.entries()) {
      const index = start + k;
      known.set(nodeKey({ level: 0, index }), p.leaf);
      for (const node of completedNodes(index)) {
        const h = nodeHash(
          lookup({ level: node.level - 1, index: 2 * node.index }),
          lookup({ level: node.level - 1, index: 2 * node.index + 1 }),
        );
        known.set(nodeKey(node), h);
        created.push({ node, hash: h });
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
    const nowField = timestamptzField(now);
    const copy = client.query(copyStreams.from(COPY_ENTRIES_SQL));
    const copied = finished(copy);
    // Attached at once, so an early server error never surfaces as an unhandled rejection.
    copied.catch(() => undefined);
    const write = async (chunk: Buffer): Promise<void> => {
      if (!copy.write(chunk)) await once(copy, 'drain');
    };
    await write(COPY_BINARY_HEADER);
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
      await write(
        encodeCopyRows(
          part.map((p, k) => [
            int8Field(start + from + k),
            textField(p.entryId),
            p.entry,
            p.leaf,
            block[k]!,
            nowField,
          ]),
        ),
      );
    }
    copy.end(COPY_BINARY_TRAILER);
    await copied;
    if (copy.rowCount !== fresh.length) {
      throw new Error(`SCITT log COPY stored ${copy.rowCount} entries, expected ${fresh.length}`);
    }
    // The new subtrees and the head move in one statement (the head's trigger sees the entries
    // copied above: same transaction).
    await client.query({
      name: 'scitt_log_advance',
      text:
        'WITH nodes AS (INSERT INTO scitt_log_nodes (level, idx, hash) ' +
        'SELECT * FROM unnest($4::smallint[], $5::bigint[], $6::bytea[])) ' +
        'UPDATE scitt_log_head SET tree_size = $1, root_hash = $2, updated_at = $3',
      values: [
        size,
        root,
        now,
        created.map((c) => c.node.level),
        created.map((c) => c.node.index),
        created.map((c) => c.hash),
      ],
    });
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

  /** One transaction for the batch; a unique violation (a writer outside the lock) retries once. */
  const appendBatch = async (batch: readonly Prepared[]): Promise<AppendResult[]> => {
    // Fast path without the lock for a lone statement: a re-registration (a client retrying, a
    // publisher resubmitting) returns the stored entry. A batch is mostly new statements: looking
    // them up twice would cost more than the lock.
    if (batch.length === 1) {
      const known = await storedEntries(pool, [batch[0]!.entryId]);
      const stored = known.get(batch[0]!.entryId);
      if (stored !== undefined) return [{ ...stored, created: false }];
    }
    for (let attempt = 1; ; attempt++) {
      const client = await pool.connect();
      let discard: Error | undefined;
      try {
        await client.query('BEGIN');
        try {
          const result = await appendBatchLocked(client, batch);
          await client.query('COMMIT');
          return result;
        } catch (err) {
          await client.query('ROLLBACK').catch((e: unknown) => {
            discard = e instanceof Error ? e : new Error(String(e));
          });
          // Only reachable if something appended outside the head lock: go again, the stored
          // entries then come back as re-registrations.
          if ((err as { code?: string }).code === SQLSTATE_UNIQUE_VIOLATION && attempt < 2) continue;
          throw err;
        }
      } finally {
        client.release(discard);
      }
    }
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
    const head = await readHead(pool, false);
    const size = treeSize ?? head.size;
    checkSize(size, head, 'tree size');
    if (!Number.isSafeInteger(index) || index < 0 || index >= size) {
      throw new TransparencyError('ENTRY_NOT_FOUND', `no leaf ${index} in a tree of size ${size}`, {
        retryable: false,
      });
    }
    // One query for the path and the root together.
    const hashes = await hashesOf(pool, [...inclusionRanges(index, size), { start: 0, end: size }]);
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
      const { rows } = await pool.query<EntryRow>({
        name: 'scitt_log_get_entry_by_index',
        text: `SELECT ${ENTRY_COLUMNS} FROM scitt_log_entries WHERE idx = $1`,
        values: [index],
      });
      return rows[0] === undefined ? null : toEntry(rows[0]);
    },

    treeHead: () => readHead(pool, false),

    async rootAt(size) {
      const head = await readHead(pool, false);
      checkSize(size, head, 'tree size');
      return rootOf(pool, size, head);
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
      const head = await readHead(pool, false);
      const newSize = n ?? head.size;
      checkSize(newSize, head, 'new tree size');
      checkSize(m, { size: newSize, root: head.root }, 'old tree size');
      const ranges = consistencyRanges(m, newSize);
      const edges: Range[] = [];
      if (m > 0) edges.push({ start: 0, end: m });
      if (newSize > 0) edges.push({ start: 0, end: newSize });
      const hashes = await hashesOf(pool, [...ranges, ...edges]);
      const newRoot = newSize > 0 ? hashes.pop()! : EMPTY_ROOT;
      const oldRoot = m > 0 ? hashes.pop()! : EMPTY_ROOT;
      return { oldSize: m, newSize, oldRoot, newRoot, proof: hashes };
    },
  };
}
