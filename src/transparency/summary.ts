import type { RunStatus, TransparencyMode } from '../crd/run.ts';
import type { RunJob, TransparencyJob } from '../vault/index.ts';

/**
 * A run's transparency summary from its SCITT jobs: what the Run's `status.transparency` (the
 * projection controller, src/controller/transparency) and the runs list of the API
 * (src/http/routes/v1/run-list.ts, from counts made in SQL) both show. Pure.
 */

/** The Run's summary, as the TRANSPARENCY printer column shows it. */
export type TransparencySummary = NonNullable<RunStatus['transparency']> & {
  state: 'queued' | 'published' | 'failed';
  queued: number;
  published: number;
  failed: number;
};

/** `dry_run` for this deployment's own log, `published` for a remote SCITT service (the API's words). */
export const modeOf = (job: TransparencyJob): 'dry_run' | 'published' | undefined =>
  job.state !== 'published' || job.backend === null
    ? undefined
    : job.backend === 'local'
      ? 'dry_run'
      : 'published';

/** The summary of a run of `records` records, `jobs` the SCITT jobs some of them have. */
export function summarize(jobs: readonly RunJob[], records: number): TransparencySummary {
  const counts = { records, queued: 0, published: 0, failed: 0, publishedLocal: 0, publishedRemote: 0 };
  for (const { job } of jobs) {
    counts[job.state]++;
    const m = modeOf(job);
    if (m === 'dry_run') counts.publishedLocal++;
    else if (m === 'published') counts.publishedRemote++;
  }
  return summaryOfCounts(counts);
}

/**
 * The summary of a run's jobs from their counts (the runs list counts them in SQL), against the
 * run's record count: `published` only when every record of the run is (docs/transparency.md, "The
 * Run's summary"). A record without a job (stored while the writer was off) is never published and
 * nothing will publish it on its own, so it makes the run `failed` like a refused job: the CRD
 * allows only queued, published and failed, and `queued` would promise a publication that no worker
 * will make. Then failed if any failed, else queued while any waits; the counts stay the jobs', so
 * `records − (queued + published + failed)` is the number without a job. The mode says where the
 * published ones went.
 */
export function summaryOfCounts(counts: {
  /** Records of the run (every kind), with or without a job. */
  records: number;
  queued: number;
  published: number;
  failed: number;
  /** Published to this deployment's own log (a dry run). */
  publishedLocal: number;
  /** Published to a remote SCITT service. */
  publishedRemote: number;
}): TransparencySummary {
  const { queued, published, failed } = counts;
  const withoutJob = counts.records - (queued + published + failed);
  const state = failed > 0 || withoutJob > 0 ? 'failed' : queued > 0 ? 'queued' : 'published';
  const mode: TransparencyMode | undefined =
    counts.publishedLocal > 0 && counts.publishedRemote > 0
      ? 'mixed'
      : counts.publishedLocal > 0
        ? 'dry_run'
        : counts.publishedRemote > 0
          ? 'published'
          : undefined;
  return { state, ...(mode !== undefined ? { mode } : {}), queued, published, failed };
}
