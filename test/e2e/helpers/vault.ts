import pg from 'pg';
import { S3Client } from '../../../src/blob/s3.ts';

/**
 * What the vault holds for a set of runs, read straight from PostgreSQL and the object store (not
 * through the service under test). Per run:
 * - `aiboms`: AIBOM attestations; `artifacts`: AIBOM metadata rows; `sidecars`: C2PA sidecar
 *   objects (content-addressed: a second one would be a second, different manifest);
 * - the record set: the claims (one per finished step, `run:`, `aibom:`) and whether every record
 *   of the run belongs to exactly one claim (a record outside every claim, or in two, would be a
 *   duplicate the claims were meant to prevent).
 */
export interface RunEvidence {
  readonly runId: string;
  readonly records: number;
  readonly aiboms: number;
  readonly artifacts: number;
  readonly stepClaims: number;
  readonly terminalClaims: number;
  readonly unclaimed: number;
  readonly claimedTwice: number;
  readonly aibomAt: Date | null;
  sidecars?: number;
}

export async function evidenceOf(
  superuserUrl: string,
  runIds: readonly string[],
): Promise<Map<string, RunEvidence>> {
  const c = new pg.Client({ connectionString: superuserUrl });
  await c.connect();
  try {
    const { rows } = await c.query<{
      run_id: string;
      records: string;
      aiboms: string;
      artifacts: string;
      step_claims: string;
      terminal_claims: string;
      unclaimed: string;
      claimed_twice: string;
      aibom_at: Date | null;
    }>(
      `with r as (select unnest($1::uuid[]) as run_id),
            claims as (
              select r.run_id, c.key, c.attestation_ids
                from r join attestation_claims c
                  on c.key like 'step:' || r.run_id || ':%'
                  or c.key = 'run:' || r.run_id
                  or c.key = 'aibom:' || r.run_id)
       select r.run_id,
              (select count(*) from attestations a where a.run_id = r.run_id) as records,
              (select count(*) from attestations a where a.run_id = r.run_id and a.kind = 'aibom') as aiboms,
              (select count(*) from artifacts f where f.run_id = r.run_id and f.kind = 'aibom') as artifacts,
              (select count(*) from claims k where k.run_id = r.run_id and k.key like 'step:%') as step_claims,
              (select count(*) from claims k where k.run_id = r.run_id and k.key not like 'step:%') as terminal_claims,
              (select count(*) from attestations a where a.run_id = r.run_id
                  and not exists (select 1 from claims k where k.run_id = r.run_id and a.id = any(k.attestation_ids))) as unclaimed,
              (select count(*) from attestations a where a.run_id = r.run_id
                  and (select count(*) from claims k where k.run_id = r.run_id and a.id = any(k.attestation_ids)) > 1) as claimed_twice,
              (select created_at from artifacts f where f.run_id = r.run_id and f.kind = 'aibom') as aibom_at
         from r`,
      [runIds],
    );
    return new Map(
      rows.map((r) => [
        r.run_id,
        {
          runId: r.run_id,
          records: Number(r.records),
          aiboms: Number(r.aiboms),
          artifacts: Number(r.artifacts),
          stepClaims: Number(r.step_claims),
          terminalClaims: Number(r.terminal_claims),
          unclaimed: Number(r.unclaimed),
          claimedTwice: Number(r.claimed_twice),
          aibomAt: r.aibom_at,
        },
      ]),
    );
  } finally {
    await c.end();
  }
}

/** Number of AIBOMs (artifact rows) among `runIds`. */
export async function aibomCount(superuserUrl: string, runIds: readonly string[]): Promise<number> {
  const c = new pg.Client({ connectionString: superuserUrl });
  await c.connect();
  try {
    const { rows } = await c.query<{ n: string }>(
      `select count(*) as n from artifacts where kind = 'aibom' and run_id = any($1::uuid[])`,
      [runIds],
    );
    return Number(rows[0]!.n);
  } finally {
    await c.end();
  }
}

/** The C2PA sidecar objects (`aibom.<digest>.c2pa`) under each run's prefix, counted per run. */
export async function sidecarCounts(
  s3: { endpoint: string; accessKey: string; secretKey: string; bucket: string },
  namespace: string,
): Promise<Map<string, number>> {
  const client = new S3Client({ endpoint: s3.endpoint, accessKey: s3.accessKey, secretKey: s3.secretKey });
  const counts = new Map<string, number>();
  for (const key of await client.listObjects(s3.bucket, `runs/${namespace}/`)) {
    const m = /^runs\/[^/]+\/([0-9a-f-]{36})\/aibom\.[0-9a-f]+\.c2pa$/.exec(key);
    if (m) counts.set(m[1]!, (counts.get(m[1]!) ?? 0) + 1);
  }
  return counts;
}

/**
 * The work that follows a record (ADR 0015, docs/transparency.md): its SCITT job (writer on) and
 * its RFC 3161 time-stamp job (TSA configured), over the records of `runIds`. `pending` jobs are
 * still queued or leased; `failed` ones gave up.
 */
export interface FollowUps {
  readonly records: number;
  readonly scitt: {
    readonly published: number;
    readonly pending: number;
    readonly failed: number;
    readonly missing: number;
  };
  readonly stamps: {
    readonly stamped: number;
    readonly pending: number;
    readonly failed: number;
    readonly missing: number;
  };
}

export async function followUpsOf(superuserUrl: string, runIds: readonly string[]): Promise<FollowUps> {
  const c = new pg.Client({ connectionString: superuserUrl });
  await c.connect();
  try {
    const { rows } = await c.query<Record<string, string>>(
      `with a as (select id from attestations where run_id = any($1::uuid[]))
       select (select count(*) from a) as records,
              (select count(*) from a join transparency_jobs j on j.attestation_id = a.id where j.state = 'published') as published,
              (select count(*) from a join transparency_jobs j on j.attestation_id = a.id where j.state = 'queued') as scitt_pending,
              (select count(*) from a join transparency_jobs j on j.attestation_id = a.id where j.state = 'failed') as scitt_failed,
              (select count(*) from a where not exists (select 1 from transparency_jobs j where j.attestation_id = a.id)) as scitt_missing,
              (select count(*) from a join attestation_timestamps t on t.attestation_id = a.id) as stamped,
              (select count(*) from a join timestamp_jobs j on j.attestation_id = a.id where j.state = 'queued') as stamp_pending,
              (select count(*) from a join timestamp_jobs j on j.attestation_id = a.id where j.state = 'failed') as stamp_failed,
              (select count(*) from a where not exists (select 1 from timestamp_jobs j where j.attestation_id = a.id)) as stamp_missing`,
      [runIds],
    );
    const r = rows[0]!;
    const n = (k: string): number => Number(r[k]);
    return {
      records: n('records'),
      scitt: {
        published: n('published'),
        pending: n('scitt_pending'),
        failed: n('scitt_failed'),
        missing: n('scitt_missing'),
      },
      stamps: {
        stamped: n('stamped'),
        pending: n('stamp_pending'),
        failed: n('stamp_failed'),
        missing: n('stamp_missing'),
      },
    };
  } finally {
    await c.end();
  }
}

/**
 * The local transparency log against what it logs: one entry per published local job and per
 * locally registered vault checkpoint, and no entry that is neither (a record registered twice
 * under two statements, or an orphaned registration, would show here).
 */
export async function logAgainstQueue(
  superuserUrl: string,
): Promise<{ entries: number; expected: number; entriesOfNothing: number }> {
  const c = new pg.Client({ connectionString: superuserUrl });
  await c.connect();
  try {
    const { rows } = await c.query<Record<string, string>>(
      `select (select count(*) from scitt_log_entries) as entries,
              (select count(*) from transparency_jobs where state = 'published' and backend = 'local')
                + (select count(*) from vault_checkpoint_receipts where backend = 'local') as expected,
              (select count(*) from scitt_log_entries e
                 where not exists (select 1 from transparency_jobs j where j.entry_id = e.entry_id)
                   and not exists (select 1 from vault_checkpoint_receipts r where r.entry_id = e.entry_id)) as entries_of_nothing`,
    );
    const r = rows[0]!;
    return {
      entries: Number(r.entries),
      expected: Number(r.expected),
      entriesOfNothing: Number(r.entries_of_nothing),
    };
  } finally {
    await c.end();
  }
}
