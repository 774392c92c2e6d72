import { ConditionTypes, EventReasons } from '../../crd/reasons.ts';
import type { Run, RunStatus } from '../../crd/run.ts';
import type { Logger } from '../../log/index.ts';
import { transparencyView, type TransparencyView } from '../../transparency/jobs.ts';
import {
  modeOf,
  summarize,
  transparencyCondition,
  type TransparencySummary,
} from '../../transparency/summary.ts';
import type { RunJob, TransparencyJob, TransparencyJobRepository } from '../../vault/index.ts';
import { findCondition, jsonEqual, setCondition } from '../../kube/index.ts';

/**
 * The transparency projection: SCITT job state (the vault's) → `status.transparency` of each
 * Attestation resource, and the Run's summary (`status.transparency`, and the AIBOM metadata's
 * `transparency` entry in `status.artifacts.aibom`), under its own SSA field manager. A controller
 * of its own, driven by job changes (the vault's notifications, any replica) and by the Run
 * reconciler's writes that add resources to project onto; it never polls.
 */

/** What the projection needs from the Kubernetes API (kube-api.ts implements it). */
export interface ProjectionApi {
  /** The Run from the informer cache (null when gone). */
  cached(namespace: string, name: string): Run | null;
  /** `status.transparency` of the Run's Attestation resources, by attestation id (existing ones only). */
  attestationTransparency(run: Run): Promise<Map<string, unknown>>;
  applyAttestationTransparency(run: Run, id: string, transparency: Record<string, unknown>): Promise<void>;
  /** Server-side apply of the projection's Run fields (the complete set, every time). */
  applyRunTransparency(run: Run, status: RunStatus): Promise<void>;
  event(run: Run, type: 'Normal' | 'Warning', reason: string, note: string): Promise<void>;
}

export interface ProjectionDeps {
  readonly api: ProjectionApi;
  readonly jobs: Pick<TransparencyJobRepository, 'forRun'>;
  readonly logger: Logger;
  /**
   * Brings `aibom.meta.json` beside the blob up to date with the AIBOM's transparency entry
   * (recorder.refreshAibomMetadata); called before the Run shows the new entry, so a failure is
   * retried with the projection.
   */
  readonly refreshAibomMetadata?: (runId: string, transparency: TransparencyView) => Promise<void>;
}

/** Attestation resource status of a job (camelCase like the rest of the resource). */
export function attestationTransparency(job: TransparencyJob): Record<string, unknown> {
  return {
    state: job.state,
    jobId: job.id,
    attempts: job.attempts,
    ...(job.entryId !== null ? { entryId: job.entryId } : {}),
    // No logIndex: whoever may read the resource (the tenant) would learn the shared log's
    // positions (src/transparency/jobs.ts transparencyView).
    ...(job.backend !== null ? { backend: job.backend } : {}),
    // Beside `published`: whether that means this deployment's own log (a dry run) or a remote one.
    ...(modeOf(job) !== undefined ? { mode: modeOf(job) } : {}),
    // A queued job says why it waits and when it is tried next (there is no `failed` state).
    ...(job.lastError !== null && job.state === 'queued' ? { lastError: job.lastError.slice(0, 4000) } : {}),
    ...(job.state === 'queued' ? { nextAttemptAt: job.nextAttemptAt.toISOString() } : {}),
  };
}

/** The Event's words for where `n` records went: never "anchored" for this deployment's own log. */
export function publishedNote(summary: TransparencySummary, jobs: readonly RunJob[]): string {
  if (summary.mode === 'dry_run') {
    return `${summary.published} attestation(s) appended to this deployment's own transparency log (dry run: not sent to a remote SCITT service)`;
  }
  if (summary.mode === 'published') {
    return `${summary.published} attestation(s) anchored in the remote SCITT transparency service`;
  }
  const local = jobs.filter(({ job }) => modeOf(job) === 'dry_run').length;
  return `${summary.published} attestation(s) in a transparency log: ${summary.published - local} anchored in the remote SCITT service, ${local} only in this deployment's own log (dry run)`;
}

/** The AIBOM metadata record the Run's status shows, if any (the Run reconciler writes it). */
function shownAibom(run: Run): Record<string, unknown> | undefined {
  const aibom = run.status?.artifacts?.aibom;
  return typeof aibom === 'object' && aibom !== null && 'digest' in aibom ? aibom : undefined;
}

/**
 * The projection's fields of the Run's status: the summary, the AIBOM's entry and the
 * TransparencyPublished condition (its lastTransitionTime moves only when its status flips).
 */
export function desiredRunTransparency(
  run: Run,
  jobs: readonly RunJob[],
  records: number,
  now: Date = new Date(),
): RunStatus {
  const aibomJob = jobs.find((j) => j.kind === 'aibom');
  const summary = summarize(jobs, records);
  const condition = transparencyCondition(summary, jobs);
  const current = findCondition(run.status?.conditions, ConditionTypes.TransparencyPublished);
  const conditions = setCondition(
    current !== undefined ? [current] : [],
    {
      type: ConditionTypes.TransparencyPublished,
      ...condition,
      ...(run.metadata.generation !== undefined ? { observedGeneration: run.metadata.generation } : {}),
    },
    now,
  );
  return {
    transparency: summary,
    conditions,
    // Only onto a recorded AIBOM: an `artifacts.aibom` holding nothing but this entry would read
    // as an AIBOM that is not there.
    ...(aibomJob !== undefined && shownAibom(run) !== undefined
      ? { artifacts: { aibom: { transparency: transparencyView(aibomJob.job) } } }
      : {}),
  };
}

function runTransparencyChanged(run: Run, desired: RunStatus): boolean {
  const current = run.status;
  const aibom = desired.artifacts?.aibom as { transparency?: unknown } | undefined;
  const shown = findCondition(current?.conditions, ConditionTypes.TransparencyPublished);
  const wanted = desired.conditions?.[0];
  return !(
    jsonEqual(current?.transparency, desired.transparency) &&
    (aibom === undefined || jsonEqual(shownAibom(run)?.transparency, aibom.transparency)) &&
    wanted !== undefined &&
    shown !== undefined &&
    shown.status === wanted.status &&
    shown.reason === wanted.reason &&
    shown.message === wanted.message &&
    shown.observedGeneration === wanted.observedGeneration
  );
}

/**
 * Whether a Run may show less than its jobs say: it has records and its summary is missing, does
 * not count all of them, is not final, or its AIBOM lacks the final entry. Used to choose the Runs
 * to project after a (re)connect or a new leadership term; a Run whose records predate the writer
 * (no jobs) is projected then too, and nothing is written for it.
 */
export function mayNeedProjection(run: Run): boolean {
  const count = run.status?.attestations?.count ?? 0;
  if (count === 0) return false;
  const t = run.status?.transparency;
  if (t === undefined || t.state !== 'published' || t.mode === undefined) return true;
  if ((t.published ?? 0) + (t.queued ?? 0) + (t.notQueued ?? 0) !== count) return true;
  if (findCondition(run.status?.conditions, ConditionTypes.TransparencyPublished)?.status !== 'True')
    return true;
  const aibom = shownAibom(run);
  return (
    aibom !== undefined && (aibom.transparency as { status?: string } | undefined)?.status !== 'published'
  );
}

/** Whether a Run update added something to project onto (Attestation resources, the AIBOM record). */
export function projectionTargetsChanged(old: Run, next: Run): boolean {
  return (
    (old.status?.attestations?.count ?? 0) !== (next.status?.attestations?.count ?? 0) ||
    old.status?.attestations?.resources !== next.status?.attestations?.resources ||
    shownAibom(old)?.digest !== shownAibom(next)?.digest
  );
}

/**
 * Projects the jobs of one Run (by id): Attestation statuses that differ, then the Run's fields
 * when they differ. Writes nothing when everything already shows the jobs' state.
 */
export async function projectRun(deps: ProjectionDeps, runId: string): Promise<void> {
  const { run: ref, jobs, records } = await deps.jobs.forRun(runId);
  if (ref === null || jobs.length === 0) return;
  const run = deps.api.cached(ref.namespace, ref.name);
  if (run === null || run.metadata.uid !== runId) return;
  const current = await deps.api.attestationTransparency(run);
  // attestationResources=perRun: the Run's one resource shows the Run's state, not its record's.
  const summaryId =
    run.status?.attestations?.resources === 'perRun' ? run.status.attestations.runAttestationId : undefined;
  for (const { attestationId, job } of jobs) {
    // A resource not created yet is projected when the Run reconciler has created it (its count moves).
    if (!current.has(attestationId) || attestationId === summaryId) continue;
    const desired = attestationTransparency(job);
    if (!jsonEqual(current.get(attestationId), desired)) {
      await deps.api.applyAttestationTransparency(run, attestationId, desired);
    }
  }
  const desired = desiredRunTransparency(run, jobs, records);
  if (summaryId !== undefined && current.has(summaryId)) {
    const { state, mode } = desired.transparency as TransparencySummary;
    const shown = { state, ...(mode !== undefined ? { mode } : {}) };
    if (!jsonEqual(current.get(summaryId), shown))
      await deps.api.applyAttestationTransparency(run, summaryId, shown);
  }
  if (!runTransparencyChanged(run, desired)) return;
  const entry = (desired.artifacts?.aibom as { transparency?: TransparencyView } | undefined)?.transparency;
  const shown = (shownAibom(run)?.transparency ?? undefined) as unknown;
  if (entry !== undefined && !jsonEqual(shown, entry)) {
    // The bucket's copy of the metadata first: the Run showing the entry means the copy has it.
    await deps.refreshAibomMetadata?.(runId, entry);
  }
  await deps.api.applyRunTransparency(run, desired);
  const summary = desired.transparency as TransparencySummary;
  if (summary.state === 'published' && run.status?.transparency?.state !== 'published') {
    await deps.api.event(run, 'Normal', EventReasons.TransparencyPublished, publishedNote(summary, jobs));
  }
  deps.logger.debug({ runId, state: summary.state }, 'transparency projected');
}
