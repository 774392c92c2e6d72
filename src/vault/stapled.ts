import type { StoredAttestation } from './types.ts';

/*
 * Which records the C2PA manifest of their run's AIBOM staples. The manifest lists the ids of every
 * record of the run stored before the AIBOM (`aibomInputs`: kind other than aibom, seq below the
 * AIBOM record's), and it binds the AIBOM bytes, which the AIBOM record and the AIBOM's artifact
 * record attest. So a record is stapled when its run has an AIBOM and either it was stored no later
 * than the AIBOM record, or it is the artifact record of the AIBOM bytes (`artifact:<run>:aibom`,
 * stored in the AIBOM's batch after its two standard views, which are not stapled: the manifest
 * predates them). A repair re-signs the manifest over the same bytes and the same ids: the answer
 * never changes once the AIBOM exists.
 *
 * "Stored no later" is compared on ids: the vault's append gives id order = seq order = commit
 * order (append.ts), so `id <= the AIBOM record's id` is `seq <= its seq`, and the AIBOM record's
 * id is in the artifacts row itself (`metadata.aibom_attestation_id`): one primary-key probe of
 * `artifacts` per run, no lookup of the AIBOM record in the partitioned attestations table.
 */

/**
 * The AIBOM record's id of each row's run (or null), joined onto rows `q` of attestations (query.ts
 * `PageJoin`), so that no read (a page, a GET batch, a stream's batch) needs a second round trip.
 * At most one row per attestation: `artifacts` has one `aibom` row per run (its primary key is
 * (run_id, kind)).
 * LATERAL with LIMIT 1, not a plain LEFT JOIN: the subquery is then not pulled up, so it stays one
 * primary-key probe per row; the plain join was planned as a hash join over a sequential scan of
 * every artifacts row (EXPLAIN ANALYZE with 2,000 runs: p50 4.9 ms against 2.35 ms this way and
 * 2.32 ms for the page without it; docs/bench.md). Constant SQL.
 */
export const STAPLED_JOIN = {
  name: 'st',
  clause:
    "LEFT JOIN LATERAL (SELECT (ar.metadata->>'aibom_attestation_id')::uuid::text AS aibom_id " +
    "FROM artifacts ar WHERE ar.run_id = q.run_id AND ar.kind = 'aibom' LIMIT 1) st ON true",
  columns: 'st.aibom_id AS st_aibom_id',
} as const;

/** A record read with STAPLED_JOIN, its `stapled` set from the joined id (`st_aibom_id`). */
export function stapledOfJoinedRow(
  record: StoredAttestation,
  row: Readonly<Record<string, unknown>>,
): StoredAttestation {
  const aibomId = row.st_aibom_id;
  return { ...record, stapled: isStapled(record, typeof aibomId === 'string' ? aibomId : undefined) };
}

/**
 * The rule above, for a record whose run's AIBOM record has id `aibomId` (undefined: no AIBOM yet).
 * Both ids are canonical lower-case UUID text, whose string order is the ids' byte order.
 */
function isStapled(r: StoredAttestation, aibomId: string | undefined): boolean {
  return (
    aibomId !== undefined &&
    r.runId !== null &&
    (r.id <= aibomId || (r.kind === 'artifact' && r.subjects.includes(`artifact:${r.runId}:aibom`)))
  );
}
