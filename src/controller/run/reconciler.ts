import type { Condition, Run, RunStatus } from '../../api/run.ts';
import { aibomRunOf } from '../../aibom/index.ts';
import type { BlobStore } from '../../blob/store.ts';
import type { Logger } from '../../log/index.ts';
import { PipelineError, recordAibom } from '../../pipeline/aibom.ts';
import type { KeySigner, Signer } from '../../signing/index.ts';
import { getArtifact, type ArtifactRecord } from '../../vault/artifacts.ts';
import { appendOnce } from '../../vault/claims.ts';
import type { PoolClient } from 'pg';
import type { StoredAttestation, Vault } from '../../vault/index.ts';
import { getJobsByAttestation, transparencyView, type TransparencyJob } from '../../transparency/jobs.ts';
import { upsertRun } from '../../vault/runs.ts';
import { conditionsEqual, setCondition } from '../runtime/index.ts';
import { ConditionTypes, FINALIZER, Reasons } from './reasons.ts';
import { isFinished, stepBatch, terminalBatch, type RecordBatch } from './records.ts';

/** What the reconciler needs from the Kubernetes API (src/controller/run/kube-api.ts implements it). */
export interface RunApi {
  /** Live read (not the informer cache): side effects are decided on current state. */
  get(namespace: string, name: string): Promise<Run | null>;
  addFinalizer(run: Run): Promise<Run>;
  removeFinalizer(run: Run): Promise<void>;
  /** Server-side apply of the controller-owned status fields. */
  applyStatus(run: Run, status: RunStatus): Promise<void>;
  /** Creates the Attestation resource of a vault record (owned by the run); existing = success. */
  ensureAttestation(run: Run, record: AttestationSummary): Promise<void>;
  event(run: Run, type: 'Normal' | 'Warning', reason: string, note: string): Promise<void>;
  /** `status.transparency` of the run's Attestation resources, by attestation id. */
  attestationTransparency(run: Run): Promise<Map<string, unknown>>;
  applyAttestationStatus(run: Run, id: string, status: Record<string, unknown>): Promise<void>;
}

export interface AttestationSummary {
  readonly id: string;
  readonly kind: string;
  readonly predicateType: string;
  readonly subjects: readonly string[];
  readonly digest: string;
}

export interface RunReconcilerDeps {
  readonly api: RunApi;
  readonly vault: Vault;
  readonly blobs: BlobStore;
  /** Signs the AIBOM (runtime trust signer). */
  readonly runtimeSigner: KeySigner;
  /** Signs envelopes: a namespace's customer-supplied key, else the service signer. */
  readonly envelopeSigner: (namespace: string) => Promise<Signer>;
  readonly logger: Logger;
  readonly now?: () => Date;
  /** Observes the terminal-phase → AIBOM-recorded pipeline latency (seconds). */
  readonly observePipeline?: (seconds: number) => void;
  /**
   * SERVICE_TRANSPARENCY_WRITER=1: enqueue a SCITT job with every appended attestation (same
   * transaction), and reconcile the jobs' state onto the Attestation and Run status.
   */
  readonly transparency?: {
    readonly onAppend: (client: PoolClient, inserted: readonly StoredAttestation[]) => Promise<void>;
    /** After an append with jobs committed. */
    readonly committed?: () => void;
  };
}

/** A failure with the condition reason that explains it on the Run. */
class StageError extends Error {
  readonly reason: string;
  constructor(reason: string, cause: unknown) {
    super((cause as Error)?.message ?? String(cause), { cause });
    this.name = 'StageError';
    this.reason = reason;
  }
}

async function stage<T>(reason: string, fn: () => Promise<T>): Promise<T> {
  try {
    return await fn();
  } catch (err) {
    if (err instanceof StageError) throw err;
    // The pipeline knows which dependency failed; its reason is more precise than the stage's.
    throw new StageError(err instanceof PipelineError ? err.reason : reason, err);
  }
}

const TERMINAL = new Set(['Succeeded', 'Failed']);

/**
 * Reconciles one Run (tektoncd/chains and cert-manager shape): re-read → finalizer → mirror →
 * attest finished steps → at a terminal phase attest policies + run, then the AIBOM pipeline once →
 * Attestation resources → status, written only when it changed. Every write is idempotent, so a
 * crash at any point is repaired by the next reconcile. Errors set a condition with the reason, emit
 * a Warning event and are rethrown for a rate-limited retry.
 */
export async function reconcileRun(
  deps: RunReconcilerDeps,
  namespace: string,
  name: string,
): Promise<{ requeueAfterMs?: number } | void> {
  const now = deps.now ?? (() => new Date());
  let run = await deps.api.get(namespace, name);
  if (!run) return;
  const log = deps.logger.child({ run: `${namespace}/${name}`, runId: run.metadata.uid });
  const deleting = run.metadata.deletionTimestamp !== undefined;
  const terminal = TERMINAL.has(run.status?.phase ?? '');
  if (!deleting) run = await deps.api.addFinalizer(run);
  if (deleting && !(run.metadata.finalizers ?? []).includes(FINALIZER)) return;

  let aibom: ArtifactRecord | null = null;
  let stored: StoredAttestation[];
  try {
    await stage(Reasons.VaultUnavailable, () => upsertRun(deps.vault.pool, run));
    const signer = await stage(Reasons.SignerUnavailable, () => deps.envelopeSigner(namespace));
    const batches: RecordBatch[] = [];
    const statuses = new Map((run.status?.steps ?? []).map((s) => [s.id, s]));
    for (const step of run.spec.steps) {
      const st = statuses.get(step.id);
      if (isFinished(st)) batches.push(stepBatch(run, step, st, signer));
    }
    if (terminal) batches.push(terminalBatch(run, signer, now()));
    for (const batch of batches) {
      const res = await stage(Reasons.VaultUnavailable, () =>
        appendOnce(
          deps.vault,
          batch.key,
          batch.records,
          deps.transparency ? { onAppend: deps.transparency.onAppend } : {},
        ),
      );
      if (res.created) {
        deps.transparency?.committed?.();
        const what = batch.key.startsWith('step:') ? `step ${batch.key.split(':')[2]}` : 'run and policies';
        await deps.api.event(
          run,
          'Normal',
          'Attested',
          `recorded ${res.ids.length} attestation(s) for ${what}`,
        );
      }
    }
    if (terminal) {
      const t0 = performance.now();
      const before = await stage(Reasons.VaultUnavailable, async () =>
        getArtifact(deps.vault.pool, run.metadata.uid, 'aibom'),
      );
      aibom = await stage(Reasons.PipelineFailed, () =>
        recordAibom(
          {
            vault: deps.vault,
            blobs: deps.blobs,
            signer: deps.runtimeSigner,
            logger: log,
            ...(deps.transparency ? { onAppend: deps.transparency.onAppend } : {}),
          },
          aibomRunOf(run),
        ),
      );
      if (!before) {
        deps.transparency?.committed?.();
        deps.observePipeline?.((performance.now() - t0) / 1000);
        await deps.api.event(
          run,
          'Normal',
          Reasons.AIBOMRecorded,
          `AIBOM ${aibom.digest} stored at ${aibom.objectKey}`,
        );
      }
    }
    stored = await stage(Reasons.VaultUnavailable, () =>
      runAttestations(deps.vault, namespace, run.metadata.uid),
    );
    const known = run.status?.attestations?.count ?? 0;
    if (stored.length > known) {
      // One LIST, then creates for the missing ones only (not a 409 per existing resource).
      const existing = await deps.api.attestationTransparency(run);
      for (const a of stored) {
        if (existing.has(a.id)) continue;
        await deps.api.ensureAttestation(run, {
          id: a.id,
          kind: a.kind,
          predicateType: a.predicateType,
          subjects: a.subjects,
          digest: a.digest,
        });
      }
    }
  } catch (err) {
    const reason = err instanceof StageError ? err.reason : Reasons.PipelineFailed;
    const message = humanCause(reason, err);
    log.warn({ err, reason }, 'reconcile failed; will retry');
    await deps.api.applyStatus(run, failedStatus(run, reason, message, terminal, now()));
    await deps.api.event(run, 'Warning', reason, message);
    throw err;
  }

  let transparency: TransparencyState | undefined;
  if (deps.transparency) {
    transparency = await stage(Reasons.VaultUnavailable, () => reconcileTransparency(deps, run, stored));
    // Records made before the writer was switched on have no job: nothing to report yet.
    if (transparency.summary.queued + transparency.summary.published + transparency.summary.failed === 0) {
      transparency = undefined;
    }
  }
  const status = desiredStatus(run, stored, aibom, terminal, now(), transparency);
  if (!statusEqual(run.status, status)) {
    await deps.api.applyStatus(run, status);
    if (transparency?.summary.state === 'published' && run.status?.transparency?.state !== 'published') {
      await deps.api.event(
        run,
        'Normal',
        'TransparencyPublished',
        `${transparency.summary.published} attestation(s) anchored in the transparency log`,
      );
    }
  }
  if (deleting && (!terminal || aibom)) {
    await deps.api.removeFinalizer(run);
    log.info('finalizer removed: attestations and AIBOM are recorded');
  }
  // Jobs still queued: look again soon (a worker in another replica cannot enqueue this run).
  if (transparency && transparency.summary.queued > 0) return { requeueAfterMs: 2000 };
}

interface TransparencyState {
  summary: { state: 'queued' | 'published' | 'failed'; queued: number; published: number; failed: number };
  /** The AIBOM attestation's job, as the AIBOM metadata's `transparency` entry. */
  aibom?: Record<string, unknown>;
}

/** Attestation CR status for a job (camelCase like the rest of the CR). */
function crTransparency(job: TransparencyJob): Record<string, unknown> {
  return {
    state: job.state,
    jobId: job.id,
    attempts: job.attempts,
    ...(job.entryId !== null ? { entryId: job.entryId } : {}),
    ...(job.logIndex !== null ? { logIndex: job.logIndex } : {}),
    ...(job.backend !== null ? { backend: job.backend } : {}),
    ...(job.lastError !== null && job.state !== 'published'
      ? { lastError: job.lastError.slice(0, 4000) }
      : {}),
  };
}

/** Jobs → Attestation statuses (written only when changed) → the run's summary. */
async function reconcileTransparency(
  deps: RunReconcilerDeps,
  run: Run,
  stored: readonly StoredAttestation[],
): Promise<TransparencyState> {
  const jobs = await getJobsByAttestation(
    deps.vault.pool,
    stored.map((a) => a.id),
  );
  const current = await deps.api.attestationTransparency(run);
  const counts = { queued: 0, published: 0, failed: 0 };
  let aibom: Record<string, unknown> | undefined;
  for (const a of stored) {
    const job = jobs.get(a.id);
    if (!job) continue;
    counts[job.state]++;
    const desired = crTransparency(job);
    if (JSON.stringify(current.get(a.id) ?? null) !== JSON.stringify(desired)) {
      await deps.api.applyAttestationStatus(run, a.id, { transparency: desired });
    }
    if (a.kind === 'aibom') aibom = transparencyView(job) as unknown as Record<string, unknown>;
  }
  const state = counts.failed > 0 ? 'failed' : counts.queued > 0 ? 'queued' : 'published';
  return { summary: { state, ...counts }, ...(aibom ? { aibom } : {}) };
}

async function runAttestations(vault: Vault, namespace: string, runId: string): Promise<StoredAttestation[]> {
  const out: StoredAttestation[] = [];
  for await (const a of vault.stream({ namespaces: [namespace], runId })) out.push(a);
  return out;
}

function humanCause(reason: string, err: unknown): string {
  const msg = ((err as Error)?.message ?? String(err)).split('\n')[0]!.slice(0, 500);
  switch (reason) {
    case Reasons.VaultUnavailable:
      return `the vault (PostgreSQL) is unavailable: ${msg}`;
    case Reasons.ObjectStoreUnavailable:
      return `the object store is unavailable: ${msg}`;
    case Reasons.SignerUnavailable:
      return `no signer could be loaded: ${msg}`;
    default:
      return msg;
  }
}

function withCondition(
  conditions: Condition[] | undefined,
  type: string,
  status: Condition['status'],
  reason: string,
  message: string,
  generation: number | undefined,
  now: Date,
): Condition[] {
  return setCondition(
    conditions ?? [],
    {
      type,
      status,
      reason,
      message,
      ...(generation !== undefined ? { observedGeneration: generation } : {}),
    },
    now,
  );
}

/** The controller-owned part of the status (SSA: always the complete set of our fields). */
function desiredStatus(
  run: Run,
  stored: readonly StoredAttestation[],
  aibom: ArtifactRecord | null,
  terminal: boolean,
  now: Date,
  transparency?: TransparencyState,
): RunStatus {
  const gen = run.metadata.generation;
  const finished = (run.status?.steps ?? []).filter(isFinished).length;
  let conditions = withCondition(
    run.status?.conditions,
    ConditionTypes.Attested,
    terminal || finished > 0 ? 'True' : 'False',
    terminal ? Reasons.RunAttested : finished > 0 ? Reasons.StepsAttested : Reasons.WaitingForSteps,
    terminal
      ? `${stored.length} attestation(s) recorded for the run`
      : `${finished} finished step(s) attested; waiting for the run to finish`,
    gen,
    now,
  );
  conditions = withCondition(
    conditions,
    ConditionTypes.AIBOMReady,
    aibom ? 'True' : 'False',
    aibom ? Reasons.AIBOMRecorded : Reasons.RunNotTerminal,
    aibom
      ? `AIBOM ${aibom.digest} signed with a C2PA manifest`
      : 'the AIBOM is built when the run succeeds or fails',
    gen,
    now,
  );
  const runRecord = stored.find((a) => a.kind === 'run');
  const aibomRecord = stored.find((a) => a.kind === 'aibom');
  return {
    ...(aibom
      ? {
          artifacts: {
            aibom: {
              ...aibom.metadata,
              ...(transparency?.aibom ? { transparency: transparency.aibom } : {}),
            },
          },
        }
      : {}),
    ...(transparency && stored.length > 0 ? { transparency: transparency.summary } : {}),
    attestations: {
      count: stored.length,
      ...(runRecord ? { runAttestationId: runRecord.id } : {}),
      ...(aibomRecord ? { aibomAttestationId: aibomRecord.id } : {}),
    },
    conditions,
    ...(gen !== undefined ? { observedGeneration: gen } : {}),
  };
}

function failedStatus(run: Run, reason: string, message: string, terminal: boolean, now: Date): RunStatus {
  const gen = run.metadata.generation;
  const type = terminal ? ConditionTypes.AIBOMReady : ConditionTypes.Attested;
  return {
    ...(run.status?.artifacts ? { artifacts: run.status.artifacts } : {}),
    ...(run.status?.attestations ? { attestations: run.status.attestations } : {}),
    conditions: withCondition(run.status?.conditions, type, 'False', reason, message, gen, now),
    ...(gen !== undefined ? { observedGeneration: gen } : {}),
  };
}

function statusEqual(current: RunStatus | undefined, desired: RunStatus): boolean {
  return (
    conditionsEqual(current?.conditions, desired.conditions) &&
    JSON.stringify(current?.attestations ?? {}) === JSON.stringify(desired.attestations ?? {}) &&
    JSON.stringify(current?.artifacts ?? {}) === JSON.stringify(desired.artifacts ?? {}) &&
    JSON.stringify(current?.transparency ?? {}) === JSON.stringify(desired.transparency ?? {}) &&
    current?.observedGeneration === desired.observedGeneration
  );
}
