import type pg from 'pg';
import type { AttestationKind } from './types.ts';
import { VaultError } from './errors.ts';

/**
 * Storage of the vault's Merkle tree and its signed checkpoints (migration 0009): the subtree
 * hashes (`vault_tree_nodes`, level 0 = leaf hashes, leaf index = seq - 1), the checkpoints
 * (`vault_checkpoints`) and their transparency receipts. Rows only: the tree, the leaf encoding and
 * the signatures are src/checkpoint. The runtime role writes the tree and the checkpoints only
 * through `vault_tree_add_nodes` and `vault_checkpoint_add`, which check subtrees against their
 * children and the root against the subtrees.
 */

/** NOTIFY channel: a checkpoint was stored (payload: its tree size). */
export const CHECKPOINT_CHANNEL = 'aibom_vault_checkpoint';
/** NOTIFY channel: someone asked for a checkpoint now (the controller's checkpointer listens). */
export const CHECKPOINT_REQUEST_CHANNEL = 'aibom_vault_checkpoint_wanted';

/** What a leaf of the tree commits to: a record's identity, position, digest and labels. */
export interface LeafRecord {
  readonly seq: number;
  readonly id: string;
  readonly digest: string;
  readonly namespace: string;
  readonly runId: string | null;
  readonly stepId: string | null;
  readonly kind: AttestationKind;
  readonly subjects: readonly string[];
  readonly createdAt: Date;
}

export interface StoredCheckpoint {
  readonly treeSize: number;
  readonly rootHash: Buffer;
  /** Id of the record at seq = treeSize. */
  readonly lastId: string;
  /** The signed statement (COSE_Sign1). */
  readonly statement: Buffer;
  readonly createdAt: Date;
  /** Its registration in the transparency log, when published. */
  readonly receipt: CheckpointReceipt | null;
}

export interface CheckpointReceipt {
  readonly backend: 'local' | 'scrapi';
  readonly entryId: string;
  readonly logIndex: number | null;
  readonly receipt: Buffer;
}

export interface TreeNode {
  readonly level: number;
  readonly index: number;
  readonly hash: Buffer;
}

export interface CheckpointRepository {
  /** Seq and id of the newest record (the vault head). */
  head(): Promise<{ seq: number; id: string | null }>;
  /** Records with seq in (afterSeq, untilSeq], in seq order, at most `limit`. */
  leaves(afterSeq: number, untilSeq: number, limit: number): Promise<LeafRecord[]>;
  /** Stored subtree hashes among `nodes` (absent ones are missing from the result). */
  nodes(nodes: readonly { level: number; index: number }[]): Promise<TreeNode[]>;
  /** Stores subtrees (idempotent; a conflicting hash is refused with SQLSTATE 23001). */
  addNodes(nodes: readonly TreeNode[]): Promise<void>;
  /** Stores a checkpoint (refused with 23001 unless larger than the last and matching the subtrees). */
  add(checkpoint: { treeSize: number; rootHash: Buffer; lastId: string; statement: Buffer }): Promise<void>;
  /** The newest checkpoint, or the one of `treeSize`. */
  get(treeSize?: number): Promise<StoredCheckpoint | null>;
  /** Checkpoints without a transparency receipt, oldest first. */
  unpublished(limit: number): Promise<StoredCheckpoint[]>;
  addReceipt(treeSize: number, receipt: CheckpointReceipt): Promise<void>;
  /** Asks the checkpointer (any process listening on CHECKPOINT_REQUEST_CHANNEL) for one now. */
  request(): Promise<void>;
}

interface LeafRow {
  seq: string;
  id: string;
  digest: string;
  namespace: string;
  run_id: string | null;
  step_id: string | null;
  kind: AttestationKind;
  subjects: string[];
  created_at: Date;
}

interface CheckpointRow {
  tree_size: string;
  root_hash: Buffer;
  last_id: string;
  statement: Buffer;
  created_at: Date;
  backend: 'local' | 'scrapi' | null;
  entry_id: string | null;
  log_index: string | null;
  receipt: Buffer | null;
}

const CHECKPOINT_SELECT =
  'SELECT c.tree_size, c.root_hash, c.last_id, c.statement, c.created_at, r.backend, r.entry_id, ' +
  'r.log_index, r.receipt FROM vault_checkpoints c LEFT JOIN vault_checkpoint_receipts r ON r.tree_size = c.tree_size';

function toCheckpoint(r: CheckpointRow): StoredCheckpoint {
  return {
    treeSize: Number(r.tree_size),
    rootHash: r.root_hash,
    lastId: r.last_id,
    statement: r.statement,
    createdAt: r.created_at,
    receipt:
      r.backend === null || r.entry_id === null || r.receipt === null
        ? null
        : {
            backend: r.backend,
            entryId: r.entry_id,
            logIndex: r.log_index === null ? null : Number(r.log_index),
            receipt: r.receipt,
          },
  };
}

/** Nodes per statement when storing subtrees (the first checkpoint of a large vault has millions). */
const NODE_CHUNK = 10_000;

export function checkpointRepository(pool: pg.Pool): CheckpointRepository {
  return {
    async head() {
      const { rows } = await pool.query<{ last_seq: string; last_id: string | null }>({
        name: 'vault_checkpoint_head',
        text: 'SELECT last_seq, last_id FROM vault_head',
      });
      const h = rows[0];
      // Invariant, not a caller's error: the migrations create this row (a plain Error, issue 23).
      if (h === undefined)
        throw new VaultError('MIGRATION_PENDING', 'vault_head row is missing: was migration 0001 applied?');
      return { seq: Number(h.last_seq), id: h.last_id };
    },

    async leaves(afterSeq, untilSeq, limit) {
      const { rows } = await pool.query<LeafRow>({
        name: 'vault_tree_leaves',
        text:
          'SELECT seq, id, digest, namespace, run_id, step_id, kind, subjects, created_at FROM attestations ' +
          'WHERE seq > $1 AND seq <= $2 ORDER BY seq LIMIT $3',
        values: [afterSeq, untilSeq, limit],
      });
      return rows.map((r) => ({
        seq: Number(r.seq),
        id: r.id,
        digest: r.digest,
        namespace: r.namespace,
        runId: r.run_id,
        stepId: r.step_id,
        kind: r.kind,
        subjects: r.subjects,
        createdAt: r.created_at,
      }));
    },

    async nodes(nodes) {
      if (nodes.length === 0) return [];
      const { rows } = await pool.query<{ level: number; idx: string; hash: Buffer }>({
        name: 'vault_tree_nodes',
        text:
          'SELECT n.level::int AS level, n.idx, n.hash FROM vault_tree_nodes n ' +
          'JOIN unnest($1::smallint[], $2::bigint[]) AS w(level, idx) ON n.level = w.level AND n.idx = w.idx',
        values: [nodes.map((n) => n.level), nodes.map((n) => n.index)],
      });
      return rows.map((r) => ({ level: r.level, index: Number(r.idx), hash: r.hash }));
    },

    async addNodes(nodes) {
      for (let i = 0; i < nodes.length; i += NODE_CHUNK) {
        const chunk = nodes.slice(i, i + NODE_CHUNK);
        await pool.query({
          name: 'vault_tree_add_nodes',
          text: 'SELECT vault_tree_add_nodes($1::smallint[], $2::bigint[], $3::bytea[])',
          values: [chunk.map((n) => n.level), chunk.map((n) => n.index), chunk.map((n) => n.hash)],
        });
      }
    },

    async add(c) {
      await pool.query({
        name: 'vault_checkpoint_add',
        text: 'SELECT vault_checkpoint_add($1, $2, $3::uuid, $4)',
        values: [c.treeSize, c.rootHash, c.lastId, c.statement],
      });
    },

    async get(treeSize) {
      const { rows } = await pool.query<CheckpointRow>(
        treeSize === undefined
          ? {
              name: 'vault_checkpoint_latest',
              text: `${CHECKPOINT_SELECT} ORDER BY c.tree_size DESC LIMIT 1`,
            }
          : {
              name: 'vault_checkpoint_get',
              text: `${CHECKPOINT_SELECT} WHERE c.tree_size = $1`,
              values: [treeSize],
            },
      );
      return rows[0] === undefined ? null : toCheckpoint(rows[0]);
    },

    async unpublished(limit) {
      const { rows } = await pool.query<CheckpointRow>({
        name: 'vault_checkpoint_unpublished',
        text: `${CHECKPOINT_SELECT} WHERE r.tree_size IS NULL ORDER BY c.tree_size LIMIT $1`,
        values: [limit],
      });
      return rows.map(toCheckpoint);
    },

    async addReceipt(treeSize, r) {
      await pool.query({
        name: 'vault_checkpoint_add_receipt',
        text:
          'INSERT INTO vault_checkpoint_receipts (tree_size, backend, entry_id, log_index, receipt) ' +
          'VALUES ($1, $2, $3, $4, $5) ON CONFLICT (tree_size) DO NOTHING',
        values: [treeSize, r.backend, r.entryId, r.logIndex, r.receipt],
      });
    },

    async request() {
      await pool.query(`SELECT pg_notify('${CHECKPOINT_REQUEST_CHANNEL}', '')`);
    },
  };
}
