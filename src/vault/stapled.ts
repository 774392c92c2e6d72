import type pg from 'pg';
import type { StoredAttestation } from './types.ts';

/**
 * Which records the C2PA manifest of their run's AIBOM staples, for a batch of records just read
 * (one query per batch, never per record). The manifest lists the ids of every record of the run
 * stored before the AIBOM (`aibomInputs`: kind other than aibom, seq below the AIBOM record's),
 * and it binds the AIBOM bytes, which the AIBOM record and the AIBOM's artifact record attest. So
 * a record is stapled when its run has an AIBOM and either its seq is at most the AIBOM record's,
 * or it is the artifact record of the AIBOM bytes (`artifact:<run>:aibom`, stored in the AIBOM's batch
 * after its two standard views, which are not stapled: the manifest predates them).
 * A repair re-signs the manifest over the same bytes and the same ids: the answer never changes
 * once the AIBOM exists.
 */
/**
 * The same answer joined onto rows `q` of attestations (query.ts `PageJoin`), so that a page or a
 * GET batch needs no second round trip: the AIBOM record's seq of each row's run, or null. At most
 * one row per attestation (`artifacts` has one `aibom` row per run: its primary key is
 * (run_id, kind)). Constant SQL.
 */
export const STAPLED_JOIN = {
  name: 'st',
  clause:
    'LEFT JOIN LATERAL (SELECT a.seq AS aibom_seq FROM artifacts ar ' +
    "JOIN attestations a ON a.id = (ar.metadata->>'aibom_attestation_id')::uuid " +
    "WHERE ar.run_id = q.run_id AND ar.kind = 'aibom') st ON true",
  columns: 'st.aibom_seq AS st_aibom_seq',
} as const;

/** A record read with STAPLED_JOIN, its `stapled` set from the joined seq (`st_aibom_seq`). */
export function stapledOfJoinedRow(
  record: StoredAttestation,
  row: Readonly<Record<string, unknown>>,
): StoredAttestation {
  const seq = row.st_aibom_seq;
  return { ...record, stapled: isStapled(record, seq == null ? undefined : Number(seq)) };
}

/** The rule above, for a record whose run's AIBOM record has seq `aibomSeq` (undefined: none yet). */
function isStapled(r: StoredAttestation, aibomSeq: number | undefined): boolean {
  return (
    aibomSeq !== undefined &&
    r.runId !== null &&
    (r.seq <= aibomSeq || (r.kind === 'artifact' && r.subjects.includes(`artifact:${r.runId}:aibom`)))
  );
}

export async function withStapled(
  pool: pg.Pool,
  records: readonly StoredAttestation[],
): Promise<StoredAttestation[]> {
  const runs = [...new Set(records.flatMap((r) => (r.runId !== null ? [r.runId] : [])))];
  if (runs.length === 0) return records.map((r) => ({ ...r, stapled: false }));
  // The AIBOM record's seq, through the artifacts row (one primary-key probe per run).
  const { rows } = await pool.query<{ run_id: string; aibom_seq: string }>({
    name: 'vault_aibom_seq_of_runs',
    text:
      'SELECT ar.run_id::text AS run_id, a.seq AS aibom_seq FROM artifacts ar ' +
      "JOIN attestations a ON a.id = (ar.metadata->>'aibom_attestation_id')::uuid " +
      "WHERE ar.run_id = ANY($1::uuid[]) AND ar.kind = 'aibom'",
    values: [runs],
  });
  const aibomSeq = new Map(rows.map((r) => [r.run_id, Number(r.aibom_seq)]));
  return records.map((r) => ({
    ...r,
    stapled: isStapled(r, r.runId !== null ? aibomSeq.get(r.runId) : undefined),
  }));
}
