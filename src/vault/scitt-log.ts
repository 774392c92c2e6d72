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
} from './copy-binary.ts';
import { inTransaction } from './transaction.ts';
import { VaultError } from './errors.ts';
import { InvariantError } from '../errors.ts';

/**
 * Storage of the service's own RFC 9162 Merkle log (migrations 0005, 0006): `scitt_log_entries` (one
 * row per entry; leaf hashes are level 0), `scitt_log_nodes` (every complete perfect subtree of
 * level ≥ 1, written once by the append that completes it), `scitt_log_head` (size and root; its row
 * lock serializes appenders). The tree, the receipts and the group commit are src/transparency/
 * local-log.ts; this module only reads and writes rows, each kind in one statement.
 */

export interface StoredLogEntry {
  /** Hex of the leaf hash: content-addressed, equal for equal statements. */
  readonly entryId: string;
  /** RFC 9162 leaf index. */
  readonly index: number;
  /** The entry: the registered statement with its unprotected header emptied. */
  readonly statement: Buffer;
  /** The receipt issued at registration. */
  readonly receipt: Buffer;
  readonly createdAt: Date;
}

export interface LogHead {
  readonly size: number;
  readonly root: Buffer;
}

/** A perfect subtree: 2^level leaves from index · 2^level (level 0 = a leaf hash). */
export interface SubtreeRef {
  readonly level: number;
  readonly index: number;
}

export interface SubtreeHash extends SubtreeRef {
  readonly hash: Buffer;
}

/** A new entry as the batch writes it. */
export interface NewLogEntry {
  readonly index: number;
  readonly entryId: string;
  readonly entry: Buffer;
  readonly leaf: Buffer;
  readonly receipt: Buffer;
}

/** The streaming write of a batch's entries: one binary COPY, fed a chunk at a time. */
export interface EntryCopy {
  write(entries: readonly NewLogEntry[]): Promise<void>;
  /** Ends the COPY; throws unless exactly `expected` rows were stored. */
  end(expected: number): Promise<void>;
}

/** One append transaction, holding the head lock. */
export interface ScittLogAppend {
  /** The head as locked (FOR UPDATE) at the start of the transaction. */
  readonly head: LogHead;
  /**
   * The registration time (DB clock, ms) and the entries already stored among `entryIds`, in one
   * round trip; a new statement after the lock, so its snapshot sees every append committed before.
   */
  probe(entryIds: readonly string[]): Promise<{ now: Date; stored: Map<string, StoredLogEntry> }>;
  subtrees(nodes: readonly SubtreeRef[]): Promise<SubtreeHash[]>;
  /** Opens the COPY of the new entries, all registered at `createdAt`. */
  copyEntries(createdAt: Date): Promise<EntryCopy>;
  /**
   * Stores the new subtrees and moves the head, in one statement (`scitt_log_advance`, which checks
   * the subtrees and the root against the stored entries).
   */
  advance(head: LogHead, at: Date, created: readonly SubtreeHash[]): Promise<void>;
}

export interface ScittLogStorage {
  head(): Promise<LogHead>;
  entry(entryId: string): Promise<StoredLogEntry | null>;
  entryAt(index: number): Promise<StoredLogEntry | null>;
  /** Stored entries among `entryIds`, by entry id. */
  entries(entryIds: readonly string[]): Promise<Map<string, StoredLogEntry>>;
  /** Hashes of perfect subtrees, in one query by primary key; absent ones are missing from the result. */
  subtrees(nodes: readonly SubtreeRef[]): Promise<SubtreeHash[]>;
  /**
   * Runs `fn` in one transaction under the head lock and commits. A unique violation (only
   * reachable if something appended outside the head lock) runs `fn` once more in a new one.
   */
  inAppendTransaction<T>(fn: (tx: ScittLogAppend) => Promise<T>): Promise<T>;
}

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

const COPY_ENTRIES_SQL =
  'COPY scitt_log_entries (idx, entry_id, statement, leaf_hash, receipt, created_at) FROM STDIN (FORMAT binary)';

function toEntry(r: EntryRow): StoredLogEntry {
  return {
    entryId: r.entry_id,
    index: Number(r.idx),
    statement: r.statement,
    receipt: r.receipt,
    createdAt: r.created_at,
  };
}

async function readHead(q: Queryable, lock: boolean): Promise<LogHead> {
  // Locking goes through a function: FOR UPDATE needs the UPDATE privilege the runtime role lacks.
  const { rows } = await q.query<HeadRow>(
    lock
      ? 'SELECT tree_size, root_hash FROM scitt_log_lock_head()'
      : 'SELECT tree_size, root_hash FROM scitt_log_head',
  );
  const head = rows[0];
  // Invariant, not a caller's error: the migrations create this row (a plain Error, issue 23).
  if (head === undefined)
    throw new VaultError('MIGRATION_PENDING', 'scitt_log_head row is missing: was migration 0005 applied?');
  return { size: Number(head.tree_size), root: head.root_hash };
}

async function storedEntries(
  q: Queryable,
  entryIds: readonly string[],
): Promise<Map<string, StoredLogEntry>> {
  const { rows } = await q.query<EntryRow>({
    name: 'scitt_log_get_entries',
    text: `SELECT ${ENTRY_COLUMNS} FROM scitt_log_entries WHERE entry_id = ANY($1::text[])`,
    values: [entryIds],
  });
  return new Map(rows.map((r) => [r.entry_id, toEntry(r)]));
}

/** Level 0 from the entries' leaf hashes, the rest from the nodes table, in one query. */
async function fetchSubtrees(q: Queryable, nodes: readonly SubtreeRef[]): Promise<SubtreeHash[]> {
  if (nodes.length === 0) return [];
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
  return rows.map((r) => ({ level: r.level, index: Number(r.idx), hash: r.hash }));
}

function appendTransaction(client: pg.PoolClient, head: LogHead): ScittLogAppend {
  return {
    head,

    async probe(entryIds) {
      const probe = await client.query<{ now: Date } & { [K in keyof EntryRow]: EntryRow[K] | null }>({
        name: 'scitt_log_append_probe',
        text:
          `SELECT date_trunc('milliseconds', clock_timestamp()) AS now, ${ENTRY_COLUMNS_OF('e')} ` +
          'FROM (SELECT) AS one LEFT JOIN scitt_log_entries e ON e.entry_id = ANY($1::text[])',
        values: [entryIds],
      });
      const stored = new Map<string, StoredLogEntry>();
      for (const r of probe.rows) if (r.entry_id !== null) stored.set(r.entry_id, toEntry(r as EntryRow));
      return { now: probe.rows[0]!.now, stored };
    },

    subtrees: (nodes) => fetchSubtrees(client, nodes),

    async copyEntries(createdAt) {
      const nowField = timestamptzField(createdAt);
      const copy = client.query(copyStreams.from(COPY_ENTRIES_SQL));
      const copied = finished(copy);
      // Attached at once, so an early server error never surfaces as an unhandled rejection.
      copied.catch(() => undefined);
      const write = async (chunk: Buffer): Promise<void> => {
        if (!copy.write(chunk)) await once(copy, 'drain');
      };
      await write(COPY_BINARY_HEADER);
      return {
        write: (entries) =>
          write(
            encodeCopyRows(
              entries.map((e) => [
                int8Field(e.index),
                textField(e.entryId),
                e.entry,
                e.leaf,
                e.receipt,
                nowField,
              ]),
            ),
          ),
        async end(expected) {
          copy.end(COPY_BINARY_TRAILER);
          await copied;
          // Invariant, not a caller's error: COPY stores every row or fails (a plain Error, issue 23).
          if (copy.rowCount !== expected) {
            throw new InvariantError(`SCITT log COPY stored ${copy.rowCount} entries, expected ${expected}`);
          }
        },
      };
    },

    async advance(next, at, created) {
      // The runtime role cannot write the head or the subtree table: the function (migration 0008)
      // checks each new subtree against its children and the root against the subtrees, then moves
      // the head forward.
      await client.query({
        name: 'scitt_log_advance',
        text: 'SELECT scitt_log_advance($1, $2, $3, $4::smallint[], $5::bigint[], $6::bytea[])',
        values: [
          next.size,
          next.root,
          at,
          created.map((c) => c.level),
          created.map((c) => c.index),
          created.map((c) => c.hash),
        ],
      });
    },
  };
}

export function scittLogStorage(pool: pg.Pool): ScittLogStorage {
  return {
    head: () => readHead(pool, false),

    async entry(entryId) {
      const { rows } = await pool.query<EntryRow>({
        name: 'scitt_log_get_entry',
        text: `SELECT ${ENTRY_COLUMNS} FROM scitt_log_entries WHERE entry_id = $1`,
        values: [entryId],
      });
      return rows[0] === undefined ? null : toEntry(rows[0]);
    },

    async entryAt(index) {
      const { rows } = await pool.query<EntryRow>({
        name: 'scitt_log_get_entry_by_index',
        text: `SELECT ${ENTRY_COLUMNS} FROM scitt_log_entries WHERE idx = $1`,
        values: [index],
      });
      return rows[0] === undefined ? null : toEntry(rows[0]);
    },

    entries: (entryIds) => storedEntries(pool, entryIds),

    subtrees: (nodes) => fetchSubtrees(pool, nodes),

    async inAppendTransaction(fn) {
      for (let attempt = 1; ; attempt++) {
        try {
          return await inTransaction(pool, async (client) =>
            fn(appendTransaction(client, await readHead(client, true))),
          );
        } catch (err) {
          // A unique violation (only reachable if something appended outside the head lock): once more.
          if ((err as { code?: string }).code === SQLSTATE_UNIQUE_VIOLATION && attempt < 2) continue;
          throw err;
        }
      }
    },
  };
}
