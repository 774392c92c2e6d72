import type pg from 'pg';
import type { Signer } from '../signing/signer.ts';
import { cwtClaims, decodeSign1, encodeSign1, logKeyOf, type LogKey } from './cose.ts';
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
import { issueReceipt, type InclusionProof } from './receipt.ts';

/**
 * The service's own append-only RFC 9162 Merkle log in PostgreSQL (migration 0005): the `local`
 * (dry-run) transparency backend, and what scrapi-routes.ts serves to other deployments.
 *
 * Storage: `scitt_log_entries` (one row per entry; leaf hashes are level 0), `scitt_log_nodes`
 * (every complete perfect subtree of level ≥ 1, written once by the append that completes it),
 * `scitt_log_head` (size and root; its row lock serializes appenders).
 *
 * Costs, n = log size:
 * - append: one head lock, one indexed read of ≤ log2(n) subtree hashes (the binary decomposition
 *   of [0, n)), one entry row + amortised one node row (at most log2(n)), one head update;
 *   O(log n) hashing and one signature. Writers serialize on the head row; the critical section is
 *   a few milliseconds.
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
  /** The receipt issued at registration (tree size index + 1). */
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
}

export interface LocalLog {
  readonly issuer: string;
  /** The log's public key(s), for /.well-known/scitt-keys and for verifying its receipts. */
  readonly keys: readonly LogKey[];
  /** Registers a signed statement (needs CWT iss and sub); idempotent by statement content. */
  append(statement: Uint8Array): Promise<AppendResult>;
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

  const appendLocked = async (
    client: pg.PoolClient,
    entry: Buffer,
    leaf: Buffer,
    entryId: string,
    subject: string,
  ): Promise<AppendResult> => {
    const head = await readHead(client, true);
    // A new statement after the lock: its snapshot sees every append committed before ours.
    const probe = await client.query<{ now: Date; existing: boolean }>({
      name: 'scitt_log_append_probe',
      text:
        `SELECT date_trunc('milliseconds', clock_timestamp()) AS now, ` +
        'EXISTS (SELECT FROM scitt_log_entries WHERE entry_id = $1) AS existing',
      values: [entryId],
    });
    const { now, existing } = probe.rows[0]!;
    if (existing) {
      const found = await client.query<EntryRow>(
        `SELECT ${ENTRY_COLUMNS} FROM scitt_log_entries WHERE entry_id = $1`,
        [entryId],
      );
      return { ...toEntry(found.rows[0]!), created: false };
    }

    const index = head.size;
    const size = index + 1;
    // The new leaf's siblings and the inputs of every subtree it completes are exactly the perfect
    // subtrees of [0, index): fetch them, then derive path, new nodes and root in memory.
    const known =
      index === 0
        ? new Map<string, Buffer>()
        : await fetchNodes(client, nodesForRanges([{ start: 0, end: index }]));
    known.set(nodeKey({ level: 0, index }), leaf);
    const created: { node: NodeId; hash: Buffer }[] = [];
    for (const node of completedNodes(index)) {
      const lookup = lookupIn(known);
      const h = nodeHash(
        lookup({ level: node.level - 1, index: 2 * node.index }),
        lookup({ level: node.level - 1, index: 2 * node.index + 1 }),
      );
      known.set(nodeKey(node), h);
      created.push({ node, hash: h });
    }
    const lookup = lookupIn(known);
    const path = hashRanges(inclusionRanges(index, size), lookup);
    const [root] = hashRanges([{ start: 0, end: size }], lookup);
    const receipt = issueReceipt({
      signer,
      issuer,
      subject,
      proof: { treeSize: size, leafIndex: index, path },
      root: root!,
      issuedAt: Math.floor(now.getTime() / 1000),
    });

    await client.query({
      name: 'scitt_log_insert_entry',
      text:
        'INSERT INTO scitt_log_entries (idx, entry_id, statement, leaf_hash, receipt, created_at) ' +
        'VALUES ($1, $2, $3, $4, $5, $6)',
      values: [index, entryId, entry, leaf, receipt, now],
    });
    if (created.length > 0) {
      await client.query({
        name: 'scitt_log_insert_nodes',
        text:
          'INSERT INTO scitt_log_nodes (level, idx, hash) ' +
          'SELECT * FROM unnest($1::smallint[], $2::bigint[], $3::bytea[])',
        values: [
          created.map((c) => c.node.level),
          created.map((c) => c.node.index),
          created.map((c) => c.hash),
        ],
      });
    }
    await client.query({
      name: 'scitt_log_advance_head',
      text: 'UPDATE scitt_log_head SET tree_size = $1, root_hash = $2, updated_at = $3',
      values: [size, root, now],
    });
    return { entryId, index, statement: entry, receipt, createdAt: now, created: true };
  };

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

    async append(statement) {
      const sign1 = decodeSign1(statement, 'MALFORMED_STATEMENT');
      const claims = cwtClaims(sign1.protectedHeader);
      if (claims === undefined) {
        throw new TransparencyError('MALFORMED_STATEMENT', 'the statement has no CWT iss and sub', {
          retryable: false,
        });
      }
      const entry = encodeSign1(sign1, new Map());
      const leaf = leafHash(entry);
      const entryId = leaf.toString('hex');
      // Fast path without the lock: a re-registration returns the stored entry.
      const stored = await getEntry(entryId);
      if (stored !== null) return { ...stored, created: false };

      const client = await pool.connect();
      let discard: Error | undefined;
      try {
        await client.query('BEGIN');
        try {
          const result = await appendLocked(client, entry, leaf, entryId, claims.subject);
          await client.query('COMMIT');
          return result;
        } catch (err) {
          await client.query('ROLLBACK').catch((e: unknown) => {
            discard = e instanceof Error ? e : new Error(String(e));
          });
          // Only reachable if something appended outside the head lock: the stored entry wins.
          if ((err as { code?: string }).code === SQLSTATE_UNIQUE_VIOLATION) {
            const again = await getEntry(entryId);
            if (again !== null) return { ...again, created: false };
          }
          throw err;
        }
      } finally {
        client.release(discard);
      }
    },

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
      if (opts.treeSize === undefined || opts.treeSize === entry.index + 1) return entry.receipt;
      if (opts.treeSize <= entry.index) {
        throw new TransparencyError(
          'INVALID_TREE_SIZE',
          `entry ${entryId} (index ${entry.index}) is not in a tree of size ${opts.treeSize}`,
          { retryable: false },
        );
      }
      const proof = await inclusionProof(entry.index, opts.treeSize);
      const subject = cwtClaims(decodeSign1(entry.statement, 'MALFORMED_STATEMENT').protectedHeader)!.subject;
      return issueReceipt({
        signer,
        issuer,
        subject,
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
