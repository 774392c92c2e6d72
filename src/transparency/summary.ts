import { TransparencyReasons } from '../crd/reasons.ts';
import type { RunStatus, TransparencyMode } from '../crd/run.ts';
import type { RunJob, TransparencyJob } from '../vault/index.ts';

/**
 * A run's transparency summary from its SCITT jobs: what the Run's `status.transparency` (the
 * projection controller, src/controller/transparency) and the runs list of the API
 * (src/http/routes/v1/run-list.ts, from counts made in SQL) both show. Pure.
 */

/** The Run's summary, as the TRANSPARENCY printer column shows it. */
export type TransparencySummary = NonNullable<RunStatus['transparency']> & {
  state: 'queued' | 'published';
  queued: number;
  published: number;
  retrying: number;
  notQueued: number;
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
  const counts = { records, queued: 0, published: 0, retrying: 0, publishedLocal: 0, publishedRemote: 0 };
  for (const { job } of jobs) {
    counts[job.state]++;
    if (job.state === 'queued' && job.lastError !== null) counts.retrying++;
    const m = modeOf(job);
    if (m === 'dry_run') counts.publishedLocal++;
    else if (m === 'published') counts.publishedRemote++;
  }
  return summaryOfCounts(counts);
}

/**
 * The summary of a run's jobs from their counts (the runs list counts them in SQL), against the
 * run's record count: `published` only when every record of the run is, else `queued` (the spec's
 * two states; docs/transparency.md, "The Run's summary"). Why a run is not published is in the
 * counts and in the Run's TransparencyPublished condition: `retrying` queued jobs whose last
 * attempt failed, and `notQueued` records without a job (stored while the writer was off: nothing
 * publishes them unless someone pushes them, POST /v1/attestations/scitt). The mode says where the
 * published ones went.
 */
export function summaryOfCounts(counts: {
  /** Records of the run (every kind), with or without a job. */
  records: number;
  queued: number;
  published: number;
  /** Queued jobs whose last attempt failed. */
  retrying: number;
  /** Published to this deployment's own log (a dry run). */
  publishedLocal: number;
  /** Published to a remote SCITT service. */
  publishedRemote: number;
}): TransparencySummary {
  const { queued, published, retrying } = counts;
  const notQueued = Math.max(0, counts.records - (queued + published));
  const state = queued > 0 || notQueued > 0 ? 'queued' : 'published';
  const mode: TransparencyMode | undefined =
    counts.publishedLocal > 0 && counts.publishedRemote > 0
      ? 'mixed'
      : counts.publishedLocal > 0
        ? 'dry_run'
        : counts.publishedRemote > 0
          ? 'published'
          : undefined;
  return { state, ...(mode !== undefined ? { mode } : {}), queued, published, retrying, notQueued };
}

/** The Run's TransparencyPublished condition: True once every record is published, else why not. */
export interface TransparencyConditionInput {
  readonly status: 'True' | 'False';
  readonly reason: (typeof TransparencyReasons)[keyof typeof TransparencyReasons];
  readonly message: string;
}

/**
 * Why a run's records are (not yet) all in a transparency log, from its summary and jobs (pure):
 * records without a job come first (nothing will publish them on its own), then failing attempts
 * (the latest error and the next attempt), then jobs that simply wait their turn.
 */
export function transparencyCondition(
  summary: TransparencySummary,
  jobs: readonly RunJob[],
): TransparencyConditionInput {
  const records = summary.queued + summary.published + summary.notQueued;
  if (summary.state === 'published') {
    return {
      status: 'True',
      reason: TransparencyReasons.Published,
      message: `${summary.published} of ${records} record(s) in a transparency log`,
    };
  }
  const failing = jobs
    .filter(({ job }) => job.state === 'queued' && job.lastError !== null)
    .sort((x, y) => y.job.updatedAt.getTime() - x.job.updatedAt.getTime());
  // The soonest retry of a failing job (else of any queued one): when the reason may change.
  const next = (failing.length > 0 ? failing : jobs.filter(({ job }) => job.state === 'queued'))
    .map(({ job }) => job.nextAttemptAt.getTime())
    .sort((x, y) => x - y)[0];
  const parts: string[] = [];
  if (summary.notQueued > 0) {
    parts.push(
      `${summary.notQueued} record(s) have no SCITT job (stored while SERVICE_TRANSPARENCY_WRITER was off): ` +
        'nothing publishes them unless pushed (POST /v1/attestations/scitt)',
    );
  }
  const latest = failing[0];
  if (latest !== undefined) {
    parts.push(
      `${failing.length} of ${summary.queued} queued record(s) failed their last attempt (attempt ` +
        `${latest.job.attempts}: ${(latest.job.lastError ?? '').slice(0, 500)})`,
    );
  } else if (summary.queued > 0) {
    parts.push(`${summary.queued} record(s) queued for the transparency log`);
  }
  if (next !== undefined) parts.push(`next attempt at ${new Date(next).toISOString()}`);
  return {
    status: 'False',
    reason:
      summary.notQueued > 0
        ? TransparencyReasons.RecordsNotQueued
        : latest !== undefined
          ? TransparencyReasons.PublicationRetrying
          : TransparencyReasons.PublicationQueued,
    message: `${summary.published} of ${records} record(s) published; ${parts.join('; ')}`,
  };
}
