import type pg from 'pg';

/**
 * Rows of the witnessed logs (migration 0015): the C2SP signed-note checkpoints of the vault tree
 * and of the local SCITT log, the witnesses' cosignatures and their refusals. Rows only: the note
 * format and the witness protocol are src/tlog and src/witness.
 */

export type TlogName = 'vault' | 'scitt';

export interface Cosignature {
  /** The witness's key name (what the signature line says). */
  readonly witness: string;
  /** Hex of the witness key id. */
  readonly keyId: string;
  /** The signature line, newline included. */
  readonly line: string;
  readonly cosignedAt: Date;
}

export interface StoredNote {
  readonly log: TlogName;
  readonly treeSize: number;
  readonly rootHash: Buffer;
  readonly origin: string;
  /** The note: text, blank line, the log's signature line. */
  readonly note: string;
  readonly vkey: string;
  readonly createdAt: Date;
  readonly cosignatures: readonly Cosignature[];
}

export type RefusalOutcome = 'inconsistent' | 'ahead' | 'rejected';

export interface WitnessRefusal {
  readonly log: TlogName;
  readonly treeSize: number;
  readonly witness: string;
  readonly keyId: string;
  readonly outcome: RefusalOutcome;
  readonly httpStatus: number;
  readonly oldSize: number;
  readonly witnessSize: number | null;
  readonly detail: string;
}

/** What the vault knows of one witness of one log. */
export interface WitnessRecord {
  readonly witness: string;
  readonly keyId: string;
  /** Its newest cosignature (largest tree size), if any. */
  readonly cosigned: {
    readonly treeSize: number;
    readonly cosignedAt: Date;
    readonly storedAt: Date;
    /** The first cosignature stored after its newest refusal (or its first ever). */
    readonly since: Date | null;
  } | null;
  /** Its newest refusal, if any. */
  readonly refused: (WitnessRefusal & { readonly createdAt: Date }) | null;
}

export interface TlogRepository {
  /** Stores a note (`tlog_checkpoint_add` checks its root against the stored tree); idempotent. */
  addCheckpoint(n: {
    log: TlogName;
    treeSize: number;
    rootHash: Buffer;
    origin: string;
    note: string;
    vkey: string;
  }): Promise<void>;
  /** The newest note of `log`, or the one of `treeSize`, with its cosignatures. */
  checkpoint(log: TlogName, treeSize?: number): Promise<StoredNote | null>;
  /**
   * The newest note of `log` of at least `minSize` that has at least one cosignature; null when
   * none.
   */
  newestWitnessed(log: TlogName, minSize?: number): Promise<StoredNote | null>;
  addCosignature(log: TlogName, treeSize: number, c: Cosignature): Promise<void>;
  addRefusal(r: WitnessRefusal): Promise<void>;
  /** Per witness (name and key id) of `log`: newest cosignature and newest refusal. */
  witnesses(log: TlogName): Promise<WitnessRecord[]>;
  /**
   * The verifier keys that signed notes of `log`, newest first (the current one and any past one).
   */
  vkeys(log: TlogName): Promise<string[]>;
  /**
   * Stored hashes at tree level `level` (a tile's: perfect subtrees of 2^level leaves), indexes
   * first … first + count - 1, in index order; fewer when some are not stored.
   */
  tileHashes(log: TlogName, level: number, first: number, count: number): Promise<Buffer[]>;
  /** The local SCITT log's entries at indexes first … first + count - 1, in order. */
  scittEntries(first: number, count: number): Promise<Buffer[]>;
  /** The namespace of each of these record ids that is a record of this vault. */
  namespacesOf(ids: readonly string[]): Promise<Map<string, string>>;
}

interface NoteRow {
  log: TlogName;
  tree_size: string;
  root_hash: Buffer;
  origin: string;
  note: string;
  vkey: string;
  created_at: Date;
  cosignatures: { witness: string; key_id: string; line: string; cosigned_at: string }[] | null;
}

const NOTE_SELECT =
  'SELECT c.log, c.tree_size, c.root_hash, c.origin, c.note, c.vkey, c.created_at, ' +
  "(SELECT json_agg(json_build_object('witness', s.witness, 'key_id', s.witness_key_id, 'line', s.line, " +
  "'cosigned_at', s.cosigned_at) ORDER BY s.witness, s.witness_key_id) " +
  'FROM tlog_cosignatures s WHERE s.log = c.log AND s.tree_size = c.tree_size) AS cosignatures ' +
  'FROM tlog_checkpoints c';

function toNote(r: NoteRow): StoredNote {
  return {
    log: r.log,
    treeSize: Number(r.tree_size),
    rootHash: r.root_hash,
    origin: r.origin,
    note: r.note,
    vkey: r.vkey,
    createdAt: r.created_at,
    cosignatures: (r.cosignatures ?? []).map((c) => ({
      witness: c.witness,
      keyId: c.key_id,
      line: c.line,
      cosignedAt: new Date(c.cosigned_at),
    })),
  };
}

/** A witness of a log with its newest cosignature (`c_`) and newest refusal (`r_`), as WITNESSES_SQL reads it. */
export interface WitnessRow {
  witness: string;
  key_id: string;
  c_size: string | null;
  c_at: Date | null;
  c_stored: Date | null;
  c_since: Date | null;
  r_size: string | null;
  r_outcome: WitnessRefusal['outcome'] | null;
  r_status: number | null;
  r_old: string | null;
  r_witness_size: string | null;
  r_detail: string | null;
  r_at: Date | null;
}

/**
 * Every witness (name, key id) that cosigned or refused a note of log $1, with its newest
 * cosignature (largest tree size), its newest refusal, and the first cosignature stored after that
 * refusal (`c_since`: since when it has cosigned again).
 */
const WITNESSES_SQL = `
  WITH w AS (
    SELECT DISTINCT witness, witness_key_id FROM tlog_cosignatures WHERE log = $1
    UNION SELECT DISTINCT witness, witness_key_id FROM tlog_witness_refusals WHERE log = $1
  )
  SELECT w.witness, w.witness_key_id AS key_id,
         c.tree_size AS c_size, c.cosigned_at AS c_at, c.created_at AS c_stored,
         r.tree_size AS r_size, r.outcome AS r_outcome, r.http_status AS r_status,
         r.old_size AS r_old, r.witness_size AS r_witness_size, r.detail AS r_detail,
         r.created_at AS r_at,
         (SELECT min(s.created_at) FROM tlog_cosignatures s
           WHERE s.log = $1 AND s.witness = w.witness AND s.witness_key_id = w.witness_key_id
             AND s.created_at > coalesce(r.created_at, '-infinity')) AS c_since
  FROM w
  LEFT JOIN LATERAL (SELECT * FROM tlog_cosignatures s
                     WHERE s.log = $1 AND s.witness = w.witness AND s.witness_key_id = w.witness_key_id
                     ORDER BY s.tree_size DESC LIMIT 1) c ON true
  LEFT JOIN LATERAL (SELECT * FROM tlog_witness_refusals x
                     WHERE x.log = $1 AND x.witness = w.witness AND x.witness_key_id = w.witness_key_id
                     ORDER BY x.created_at DESC LIMIT 1) r ON true
  ORDER BY w.witness, w.witness_key_id`;

/** A WitnessRow as the record it reads: a side whose row is absent (no cosignature, no refusal) is null. */
export function toWitnessRecord(log: TlogName, r: WitnessRow): WitnessRecord {
  return {
    witness: r.witness,
    keyId: r.key_id,
    cosigned:
      r.c_size === null || r.c_at === null || r.c_stored === null
        ? null
        : { treeSize: Number(r.c_size), cosignedAt: r.c_at, storedAt: r.c_stored, since: r.c_since },
    refused:
      r.r_size === null || r.r_outcome === null || r.r_at === null
        ? null
        : {
            log,
            treeSize: Number(r.r_size),
            witness: r.witness,
            keyId: r.key_id,
            outcome: r.r_outcome,
            httpStatus: r.r_status ?? 0,
            oldSize: Number(r.r_old ?? 0),
            witnessSize: r.r_witness_size === null ? null : Number(r.r_witness_size),
            detail: r.r_detail ?? '',
            createdAt: r.r_at,
          },
  };
}

/**
 * The query of a tile's hashes: the vault tree's nodes (leaves included, level 0), or the SCITT
 * log's, whose leaf hashes live on its entries and whose higher levels live in its node table.
 */
export function tileQuery(
  log: TlogName,
  level: number,
  first: number,
  count: number,
): { name: string; text: string; values: number[] } {
  if (log === 'vault') {
    return {
      name: 'tlog_tile_vault',
      text: 'SELECT hash FROM vault_tree_nodes WHERE level = $1 AND idx >= $2 AND idx < $2 + $3 ORDER BY idx',
      values: [level, first, count],
    };
  }
  if (level === 0) {
    return {
      name: 'tlog_tile_scitt_leaves',
      text: 'SELECT leaf_hash AS hash FROM scitt_log_entries WHERE idx >= $1 AND idx < $1 + $2 ORDER BY idx',
      values: [first, count],
    };
  }
  return {
    name: 'tlog_tile_scitt',
    text: 'SELECT hash FROM scitt_log_nodes WHERE level = $1 AND idx >= $2 AND idx < $2 + $3 ORDER BY idx',
    values: [level, first, count],
  };
}

export function tlogRepository(pool: pg.Pool): TlogRepository {
  return {
    async addCheckpoint(n) {
      await pool.query({
        name: 'tlog_checkpoint_add',
        text: 'SELECT tlog_checkpoint_add($1, $2, $3, $4, $5, $6)',
        values: [n.log, n.treeSize, n.rootHash, n.origin, n.note, n.vkey],
      });
    },

    async checkpoint(log, treeSize) {
      const { rows } = await pool.query<NoteRow>(
        treeSize === undefined
          ? {
              name: 'tlog_checkpoint_latest',
              text: `${NOTE_SELECT} WHERE c.log = $1 ORDER BY c.tree_size DESC LIMIT 1`,
              values: [log],
            }
          : {
              name: 'tlog_checkpoint_get',
              text: `${NOTE_SELECT} WHERE c.log = $1 AND c.tree_size = $2`,
              values: [log, treeSize],
            },
      );
      return rows[0] === undefined ? null : toNote(rows[0]);
    },

    async newestWitnessed(log, minSize = 0) {
      const { rows } = await pool.query<NoteRow>({
        name: 'tlog_checkpoint_newest_witnessed',
        text:
          `${NOTE_SELECT} WHERE c.log = $1 AND c.tree_size >= $2 AND EXISTS ` +
          '(SELECT FROM tlog_cosignatures s WHERE s.log = c.log AND s.tree_size = c.tree_size) ' +
          'ORDER BY c.tree_size DESC LIMIT 1',
        values: [log, minSize],
      });
      return rows[0] === undefined ? null : toNote(rows[0]);
    },

    async addCosignature(log, treeSize, c) {
      await pool.query({
        name: 'tlog_cosignature_add',
        text:
          'INSERT INTO tlog_cosignatures (log, tree_size, witness, witness_key_id, line, cosigned_at) ' +
          'VALUES ($1, $2, $3, $4, $5, $6) ON CONFLICT DO NOTHING',
        values: [log, treeSize, c.witness, c.keyId, c.line, c.cosignedAt],
      });
    },

    async addRefusal(r) {
      await pool.query({
        name: 'tlog_witness_refusal_add',
        text:
          'INSERT INTO tlog_witness_refusals (log, tree_size, witness, witness_key_id, outcome, http_status, ' +
          'old_size, witness_size, detail) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9)',
        values: [
          r.log,
          r.treeSize,
          r.witness,
          r.keyId,
          r.outcome,
          r.httpStatus,
          r.oldSize,
          r.witnessSize,
          r.detail,
        ],
      });
    },

    async witnesses(log) {
      const { rows } = await pool.query<WitnessRow>({
        name: 'tlog_witnesses',
        text: WITNESSES_SQL,
        values: [log],
      });
      return rows.map((r) => toWitnessRecord(log, r));
    },

    async tileHashes(log, level, first, count) {
      const { rows } = await pool.query<{ hash: Buffer }>(tileQuery(log, level, first, count));
      return rows.map((r) => r.hash);
    },

    async scittEntries(first, count) {
      const { rows } = await pool.query<{ statement: Buffer }>({
        name: 'tlog_scitt_entries',
        text: 'SELECT statement FROM scitt_log_entries WHERE idx >= $1 AND idx < $1 + $2 ORDER BY idx',
        values: [first, count],
      });
      return rows.map((r) => r.statement);
    },

    async namespacesOf(ids) {
      if (ids.length === 0) return new Map();
      const { rows } = await pool.query<{ id: string; namespace: string }>({
        name: 'tlog_namespaces_of',
        text: 'SELECT id::text AS id, namespace FROM attestations WHERE id = ANY($1::uuid[])',
        values: [ids],
      });
      return new Map(rows.map((r) => [r.id, r.namespace]));
    },

    async vkeys(log) {
      const { rows } = await pool.query<{ vkey: string }>({
        name: 'tlog_vkeys',
        text: 'SELECT vkey FROM tlog_checkpoints WHERE log = $1 GROUP BY vkey ORDER BY max(tree_size) DESC',
        values: [log],
      });
      return rows.map((r) => r.vkey);
    },
  };
}
