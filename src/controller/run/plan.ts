import { ConditionTypes, RECONCILER_CONDITIONS, Reasons, type FailureReason } from '../../crd/reasons.ts';
import { isFinished, isTerminal, type Condition, type Run, type RunStatus } from '../../crd/run.ts';
import {
  currentMetadata,
  finishedSteps,
  latestRepair,
  pendingRepair,
  stepKey,
  terminalKey,
} from '../../recorder/index.ts';
import {
  mirroredStatus,
  type ArtifactRecord,
  type AttestationSummary,
  type ManifestRepair,
  type RunRecord,
} from '../../vault/index.ts';
import { conditionsEqual, jsonEqual, setCondition } from '../../kube/index.ts';

/**
 * The Run reconciler's pure part (cert-manager's policy chain): what the vault holds for a Run
 * (`Observed`, gathered by the reconciler) → what to do next (`Plan`, checks in order) → the
 * status the controller owns, compared structurally with the current one.
 */

/** What the vault holds for one Run. */
export interface Observed {
  /** The Run's mirror (null before the first reconcile). */
  readonly mirror: RunRecord | null;
  /** Claim keys of the Run already recorded (`step:…`, `run:…`). */
  readonly claimed: ReadonlySet<string>;
  /** The AIBOM's metadata record, once recorded. */
  readonly aibom: ArtifactRecord | null;
  /** Every record of the Run, in insert order. */
  readonly attestations: readonly AttestationSummary[];
}

export interface Plan {
  /** The mirror differs from the Run: upsert it. */
  readonly mirror: boolean;
  /** Finished steps not yet recorded, in spec order: as many as one reconcile may record. */
  readonly steps: readonly string[];
  /** Finished steps are left for the next reconcile (the terminal records and AIBOM wait for them). */
  readonly more: boolean;
  /** The Run is terminal, every step is recorded, and its policies and provenance are not. */
  readonly terminal: boolean;
  /** The Run is terminal, every step is recorded, and its AIBOM is not, or its status does not show it yet. */
  readonly aibom: boolean;
  /** An open request to re-sign the AIBOM's C2PA manifest (the API opened it on a download). */
  readonly repair: ManifestRepair | null;
}

/**
 * How much one reconcile of a Run may do before it gives its worker back (docs/runs.md,
 * "Fairness"): a Run of 128 steps with 256 capabilities takes several short reconciles, and other
 * namespaces' Runs are served in between (the work queue is round-robin across namespaces).
 */
export interface ReconcileLimits {
  /**
   * Step records appended per reconcile: whole steps (capabilities, the step and its output's
   * artifact record), at least one step.
   */
  readonly records: number;
  /** Attestation resources created per reconcile. */
  readonly resources: number;
}

export const RECONCILE_LIMITS: ReconcileLimits = { records: 64, resources: 64 };

/** The claim keys a Run can have (the AIBOM's is the artifact record's business). */
export function claimKeys(run: Run): string[] {
  const id = run.metadata.uid;
  return [...finishedSteps(run).map(({ step }) => stepKey(id, step.id)), terminalKey(id)];
}

/** True when the Run's status already shows `aibom` as recorded (the last thing a recording does). */
function statusShowsAibom(run: Run, aibom: ArtifactRecord): boolean {
  const shown = run.status?.artifacts?.aibom as { digest?: unknown } | undefined;
  const ready = run.status?.conditions?.find((c) => c.type === ConditionTypes.AIBOMReady);
  return shown?.digest === aibom.digest && ready?.status === 'True';
}

/** The checks, in order; each only reads. An empty plan means the vault is up to date. */
export function plan(run: Run, observed: Observed, limits: ReconcileLimits = RECONCILE_LIMITS): Plan {
  const mirror =
    observed.mirror === null ||
    observed.mirror.namespace !== run.metadata.namespace ||
    observed.mirror.name !== run.metadata.name ||
    !jsonEqual(observed.mirror.spec, run.spec) ||
    !jsonEqual(observed.mirror.status, mirroredStatus(run));
  const id = run.metadata.uid;
  const due = finishedSteps(run).filter(({ step }) => !observed.claimed.has(stepKey(id, step.id)));
  const steps: string[] = [];
  let records = 0;
  for (const { step, status } of due) {
    // Its capabilities, the step, and the artifact record of its output when it has one.
    const n =
      (step.capabilities?.length ?? 0) +
      1 +
      (status.phase === 'Succeeded' && status.output !== undefined ? 1 : 0);
    if (steps.length > 0 && records + n > limits.records) break;
    steps.push(step.id);
    records += n;
  }
  const more = steps.length < due.length;
  const terminal = isTerminal(run.status?.phase) && !more;
  const pending = observed.aibom !== null ? pendingRepair(observed.aibom) : undefined;
  return {
    mirror,
    steps,
    more,
    terminal: terminal && !observed.claimed.has(terminalKey(id)),
    aibom: terminal && (observed.aibom === null || !statusShowsAibom(run, observed.aibom)),
    repair: terminal && pending?.state === 'queued' ? pending : null,
  };
}

export const isEmpty = (p: Plan): boolean =>
  !p.mirror && p.steps.length === 0 && !p.more && !p.terminal && !p.aibom && p.repair === null;

/** The AIBOMReady condition of a recorded AIBOM: ready, or why its manifest is not (a repair). */
function aibomCondition(aibom: ArtifactRecord): {
  status: Condition['status'];
  reason: string;
  message: string;
} {
  const manifest = currentMetadata(aibom).c2pa_manifest as { digest?: string } | undefined;
  const pending = pendingRepair(aibom);
  if (pending?.state === 'queued') {
    const what = pending.reason === 'missing' ? 'is missing' : 'does not verify';
    return {
      status: 'False',
      reason: Reasons.ManifestRepairing,
      message:
        `the C2PA manifest ${pending.replacesDigest ?? ''} of AIBOM ${aibom.digest} ${what}` +
        `${pending.detail !== '' ? ` (${pending.detail.slice(0, 300)})` : ''}; signing a new one over the same ` +
        `bytes (repair ${pending.id}, asked by ${pending.requestedBy}` +
        `${pending.attempts > 0 ? `, attempt ${pending.attempts + 1}: ${pending.lastError ?? ''}` : ''})`,
    };
  }
  if (pending?.state === 'failed') {
    return {
      status: 'False',
      reason: Reasons.ManifestRepairFailed,
      message: `the C2PA manifest of AIBOM ${aibom.digest} cannot be repaired (repair ${pending.id}): ${pending.lastError ?? ''}`,
    };
  }
  const repaired = latestRepair(aibom);
  return {
    status: 'True',
    reason: Reasons.AIBOMRecorded,
    message:
      `AIBOM ${aibom.digest} signed with a C2PA manifest` +
      (repaired !== undefined
        ? ` (${manifest?.digest ?? ''}, re-signed over the same bytes on ${repaired.completedAt?.toISOString() ?? ''} ` +
          `after the previous one was found ${repaired.reason})`
        : ''),
  };
}

/**
 * The conditions this reconciler owns (Attested, AIBOMReady, RecordsLost) out of a Run's list: it applies and
 * compares only those, so the projection's TransparencyPublished (another field manager) is never
 * co-owned, overwritten or taken for a change of ours.
 */
function ownConditions(conditions: readonly Condition[] | undefined): Condition[] {
  return (conditions ?? []).filter((c) => RECONCILER_CONDITIONS.includes(c.type));
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
    ownConditions(conditions),
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

/** The controller-owned part of the status (SSA: always the complete set of its fields). */
export function desiredStatus(run: Run, observed: Observed, now: Date): RunStatus {
  const gen = run.metadata.generation;
  const terminal = isTerminal(run.status?.phase);
  const stored = observed.attestations;
  const aibom = terminal ? observed.aibom : null;
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
  const ready = aibom
    ? aibomCondition(aibom)
    : {
        status: 'False' as const,
        reason: Reasons.RunNotTerminal,
        message: 'the AIBOM is built when the run succeeds or fails',
      };
  conditions = withCondition(
    conditions,
    ConditionTypes.AIBOMReady,
    ready.status,
    ready.reason,
    ready.message,
    gen,
    now,
  );
  const runRecord = stored.find((a) => a.kind === 'run');
  const aibomRecord = stored.find((a) => a.kind === 'aibom');
  return {
    // The manifest in force (after a repair) shows, like everywhere else (recorder/metadata.ts).
    ...(aibom ? { artifacts: { aibom: currentMetadata(aibom) } } : {}),
    attestations: {
      count: stored.length,
      ...(runRecord ? { runAttestationId: runRecord.id } : {}),
      ...(aibomRecord ? { aibomAttestationId: aibomRecord.id } : {}),
    },
    conditions,
    ...(gen !== undefined ? { observedGeneration: gen } : {}),
  };
}

/**
 * After a failure: the condition of the stage that failed says why; the rest stays as it is. For a
 * terminal Run both conditions speak of the end, never of "waiting for the run to finish":
 * `terminalRecorded` says whether the run's own records (policies and provenance) are in the vault
 * (undefined: unknown, the vault could not be read). Stored: Attested is True and AIBOMReady says
 * why the AIBOM is not. Not stored (or unknown): Attested is False with the failure too, unless a
 * status written earlier already showed them stored.
 */
export function failedStatus(
  run: Run,
  reason: FailureReason,
  message: string,
  now: Date,
  terminalRecorded?: boolean,
): RunStatus {
  const gen = run.metadata.generation;
  const phase = run.status?.phase;
  const base = {
    ...(run.status?.artifacts ? { artifacts: ownArtifacts(run.status.artifacts) } : {}),
    ...(run.status?.attestations ? { attestations: run.status.attestations } : {}),
    ...(gen !== undefined ? { observedGeneration: gen } : {}),
  };
  if (!isTerminal(phase)) {
    return {
      ...base,
      conditions: withCondition(
        run.status?.conditions,
        ConditionTypes.Attested,
        'False',
        reason,
        message,
        gen,
        now,
      ),
    };
  }
  const shown = run.status?.conditions?.find((c) => c.type === ConditionTypes.Attested);
  const stored = terminalRecorded ?? (shown?.status === 'True' && shown.reason === Reasons.RunAttested);
  let conditions = stored
    ? withCondition(
        run.status?.conditions,
        ConditionTypes.Attested,
        'True',
        Reasons.RunAttested,
        // Kept when it is already the terminal message (with its record count).
        shown?.reason === Reasons.RunAttested
          ? shown.message
          : `the run ${phase}: its records are in the vault`,
        gen,
        now,
      )
    : withCondition(
        run.status?.conditions,
        ConditionTypes.Attested,
        'False',
        reason,
        terminalRecorded === undefined
          ? `the run ${phase}; whether its records are all in the vault cannot be read now: ${message}`
          : `the run ${phase}; its records are not all in the vault yet: ${message}`,
        gen,
        now,
      );
  conditions = withCondition(
    conditions,
    ConditionTypes.AIBOMReady,
    'False',
    reason,
    stored ? message : `the AIBOM waits for the run's records: ${message}`,
    gen,
    now,
  );
  return { ...base, conditions };
}

/** A Run that cannot be recorded (recordable.ts): neither condition can become True; both say why. */
export function refusedStatus(run: Run, why: string, now: Date): RunStatus {
  const gen = run.metadata.generation;
  let conditions = withCondition(
    run.status?.conditions,
    ConditionTypes.Attested,
    'False',
    Reasons.RunNotRecordable,
    why,
    gen,
    now,
  );
  conditions = withCondition(
    conditions,
    ConditionTypes.AIBOMReady,
    'False',
    Reasons.RunNotRecordable,
    why,
    gen,
    now,
  );
  // What earlier reconciles recorded stays shown (an apply without them would remove them).
  return {
    ...(run.status?.artifacts ? { artifacts: ownArtifacts(run.status.artifacts) } : {}),
    ...(run.status?.attestations ? { attestations: run.status.attestations } : {}),
    conditions,
    ...(gen !== undefined ? { observedGeneration: gen } : {}),
  };
}

/**
 * `status` with the RecordsLost condition (True, for good): the vault lost records this Run's
 * status showed; `message` says what, and what could not be repaired (recorder/losses.ts).
 */
export function withLoss(
  status: RunStatus,
  message: string,
  generation: number | undefined,
  now: Date,
): RunStatus {
  return {
    ...status,
    conditions: withCondition(
      status.conditions,
      ConditionTypes.RecordsLost,
      'True',
      Reasons.RecordedAgain,
      message,
      generation,
      now,
    ),
  };
}

/** `status.artifacts` without the transparency entries, which the projection owns (its own field manager). */
function ownArtifacts(artifacts: Record<string, unknown>): Record<string, unknown> {
  const out: Record<string, unknown> = {};
  for (const [kind, value] of Object.entries(artifacts)) {
    if (typeof value === 'object' && value !== null && !Array.isArray(value)) {
      const { transparency: _projected, ...own } = value as Record<string, unknown>;
      out[kind] = own;
    } else {
      out[kind] = value;
    }
  }
  return out;
}

/** Whether writing `desired` would change the fields the reconciler owns. */
export function statusChanged(current: RunStatus | undefined, desired: RunStatus): boolean {
  return !(
    conditionsEqual(ownConditions(current?.conditions), ownConditions(desired.conditions)) &&
    jsonEqual(current?.attestations ?? {}, desired.attestations ?? {}) &&
    jsonEqual(ownArtifacts(current?.artifacts ?? {}), desired.artifacts ?? {}) &&
    current?.observedGeneration === desired.observedGeneration
  );
}

/**
 * What the reconciler reads of a Run besides the status fields it owns: identity, generation,
 * deletion, finalizers, labels and annotations, and the pipeline's phase and steps. Two copies
 * with the same view and the same owned status call for the same reconcile.
 */
export function runView(run: Run): string {
  const m = run.metadata;
  return JSON.stringify([
    m.uid,
    m.generation ?? null,
    m.deletionTimestamp ?? null,
    m.finalizers ?? [],
    m.labels ?? {},
    m.annotations ?? {},
    run.status?.phase ?? null,
    run.status?.steps ?? [],
  ]);
}

/** A Run as the reconciler left it after writing its status: the view it acted on and what it wrote. */
export interface Written {
  readonly view: string;
  readonly status: RunStatus;
}

/**
 * True when `run` is the Run as the reconciler left it (`written`): the watch event of its own
 * status write, which the reconcile that wrote it already acted on. A copy that differs in
 * anything the reconciler reads (a pipeline write it had not seen, a field of its own changed by
 * someone else) is not.
 */
export function isOwnEcho(run: Run, written: Written | undefined): boolean {
  return written !== undefined && written.view === runView(run) && !statusChanged(run.status, written.status);
}
