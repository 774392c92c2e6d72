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
  return records.map((r) => {
    const seq = r.runId !== null ? aibomSeq.get(r.runId) : undefined;
    const stapled =
      seq !== undefined &&
      (r.seq <= seq || (r.kind === 'artifact' && r.subjects.includes(`artifact:${r.runId}:aibom`)));
    return { ...r, stapled };
  });
}
