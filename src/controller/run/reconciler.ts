import { ConditionTypes, EventReasons, FINALIZER, Reasons } from '../../crd/reasons.ts';
import { isTerminal, type AttestationResources, type Run, type RunStatus } from '../../crd/run.ts';
import type { Logger } from '../../log/index.ts';
import {
  lossMessage,
  lostRecords,
  supersededLoss,
  supersededMessage,
  terminalKey,
  type RecordLoss,
  type Recorder,
} from '../../recorder/index.ts';
import { because } from '../../recorder/errors.ts';
import type {
  ArtifactRecord,
  ArtifactRepository,
  AttestationRepository,
  AttestationSummary,
  ClaimRepository,
  ManifestRepair,
  RunRepository,
} from '../../vault/index.ts';
import { hasFinalizer, isTooLarge } from '../../kube/index.ts';
import type { ReconcileResult } from '../../queue/index.ts';
import { writeAttestationResources } from './attestation-resources.ts';
import { requeueAtPrune, withResources, type RecordCounts, type ResourcePolicy } from './resources.ts';
import { failureReason, humanCause } from './failure.ts';
import {
  claimKeys,
  desiredStatus,
  failedStatus,
  refusedStatus,
  isEmpty,
  isOwnEcho,
  plan,
  RECONCILE_LIMITS,
  runView,
  statusChanged,
  withLoss,
  type Observed,
  type Plan,
  type ReconcileLimits,
} from './plan.ts';
import type { OwnWrites } from './own-writes.ts';
import { unrecordable } from './recordable.ts';
import { telling, type Telling } from './telling.ts';

/** What the reconciler needs from the Kubernetes API (kube-api.ts implements it). */
export interface RunApi {
  /**
   * The Run as the informer cache holds it (null when gone). Also what the terminal records are
   * made from: once the phase is terminal, admission keeps everything they read final (ADR 0017).
   */
  cached(namespace: string, name: string): Run | null;
  /**
   * A live GET of the Run (null when gone): only when its cached status claims records the vault
   * lacks, so that a loss is judged (and written down) on the newest status, not a stale copy.
   */
  live(namespace: string, name: string): Promise<Run | null>;
  addFinalizer(run: Run): Promise<Run>;
  removeFinalizer(run: Run): Promise<void>;
  /** Server-side apply of the controller-owned status fields. */
  applyStatus(run: Run, status: RunStatus): Promise<void>;
  /** Ids (= names) of the Run's Attestation resources (one LIST; only for a Run a batch behind). */
  attestationIds(run: Run): Promise<Set<string>>;
  /** Creates the Attestation resource of a vault record (owned by the Run); existing = success. */
  createAttestation(run: Run, record: AttestationSummary): Promise<void>;
  /** Deletes the Attestation resource `id` (of a record the vault lost, or pruned); absent = success. */
  deleteAttestation(run: Run, id: string): Promise<void>;
  /** Applies `status.records` (the counts of the Run's records) to the `perRun` resource `id`. */
  applyAttestationRecords(run: Run, id: string, records: RecordCounts): Promise<void>;
  event(run: Run, type: 'Normal' | 'Warning', reason: string, note: string): Promise<void>;
}

/** The vault reads the reconciler gathers (the recorder does the writes). */
export interface RunStore {
  readonly runs: RunRepository;
  readonly claims: Pick<ClaimRepository, 'getMany'>;
  readonly artifacts: Pick<ArtifactRepository, 'get'>;
  readonly attestations: Pick<AttestationRepository, 'ofRun'>;
}

export interface RunReconcilerDeps {
  readonly api: RunApi;
  readonly vault: RunStore;
  readonly recorder: Recorder;
  readonly logger: Logger;
  readonly now?: () => Date;
  /** Observes the time from starting a terminal Run's AIBOM to it being recorded (seconds). */
  readonly observeAibom?: (seconds: number) => void;
  /** Work per reconcile (plan.ts RECONCILE_LIMITS). */
  readonly limits?: ReconcileLimits;
  /**
   * The Runs this reconciler wrote the status of, as it left them (by `namespace/name`, kept for one
   * leadership term): the watch event of its own write is recognised and not reconciled again
   * (ADR 0017). Without it every such event is reconciled (four vault reads, no write). Whoever
   * enqueues a Run for another reason (a manifest repair request) forces the next one (own-writes.ts).
   */
  readonly written?: OwnWrites;
  /** Which Attestation resources Runs get, and for how long (resources.ts); default perRecord, kept. */
  readonly resources?: ResourcePolicy;
}

async function gather(vault: RunStore, run: Run): Promise<Observed> {
  const id = run.metadata.uid;
  return because(Reasons.VaultUnavailable, async () => {
    const [mirror, claims, aibom, attestations] = await Promise.all([
      vault.runs.get(id),
      vault.claims.getMany(claimKeys(run)),
      vault.artifacts.get(id, 'aibom'),
      vault.attestations.ofRun(run.metadata.namespace, id),
    ]);
    return { mirror, claimed: new Set(claims.keys()), aibom, attestations };
  });
}

/**
 * Reconciles one Run, reading like Chains' reconciler: gone → return; refused → say why, return;
 * the echo of its own write → return; deleting without our finalizer → return. Then observe (vault
 * reads, a loss judged on the live Run), write a loss down, and converge: the ordered pure checks
 * (plan.ts) → the recording acts → the Attestation resources → the status, written only when it
 * changed (compared structurally). A converged Run costs four reads and no write; a Run reaching
 * its terminal phase costs one request per new Attestation resource, one Event and one status
 * write (ADR 0017). Every act is idempotent, so a crash at any point is repaired by the next
 * reconcile. A failing act sets a condition with its reason (failure.ts), emits a Warning Event and
 * is rethrown for a rate-limited retry (`attempt`).
 *
 * Transparency state is not this reconciler's: the projection controller writes it
 * (src/controller/transparency/), driven by job changes.
 */
export async function reconcileRun(
  deps: RunReconcilerDeps,
  namespace: string,
  name: string,
): Promise<ReconcileResult | undefined> {
  const now = deps.now ?? (() => new Date());
  const key = `${namespace}/${name}`;
  const cached = deps.api.cached(namespace, name);
  const written = deps.written?.take(key);
  if (!cached) return undefined;
  const deleting = cached.metadata.deletionTimestamp !== undefined;
  // Before anything walks the Run's JSON (the echo check included): see recordable.ts.
  const why = unrecordable(cached);
  if (why !== null) return refuseRun(deps, cached, why, deleting, now());
  // The event of our own status write: the reconcile that wrote it acted on all it saw.
  if (isOwnEcho(cached, written)) return undefined;
  if (deleting && !hasFinalizer(cached, FINALIZER)) return undefined;
  const run = deleting ? cached : await deps.api.addFinalizer(cached);
  const r: Reconciling = {
    deps,
    key,
    deleting,
    now,
    limits: deps.limits ?? RECONCILE_LIMITS,
    told: telling(deps.api),
    log: deps.logger.child({ run: key, runId: run.metadata.uid }),
  };
  const seen = await attempt(r, { run }, () => observe(deps, run));
  // Deleted or replaced while a loss was judged on the live Run: its own events bring the new one.
  if (seen === null) return undefined;
  const lost = seen.loss === null ? undefined : await writeLoss(r, seen.run, seen.loss);
  return converge(r, seen.run, seen.observed, lost);
}

/** One reconcile's context: what every step below reads and nothing changes once it is made. */
interface Reconciling {
  readonly deps: RunReconcilerDeps;
  /** `namespace/name`, the key of `deps.written`. */
  readonly key: string;
  readonly deleting: boolean;
  readonly now: () => Date;
  readonly limits: ReconcileLimits;
  /** The one Event of what this reconcile recorded. */
  readonly told: Telling;
  readonly log: Logger;
}

/** What a failure at a given point is written with (failRun): all that was known when the act began. */
interface Known {
  /** The Run as last read (the live copy once a loss was judged on it). */
  readonly run: Run;
  /** The loss said on the Run (RecordsLost), once written down. */
  readonly lost?: string | undefined;
  /** Whether the terminal records are in the vault; undefined before the vault could be read. */
  readonly terminalRecorded?: boolean | undefined;
}

/**
 * Runs one act of the reconcile; when it fails, the Run says why (failRun) and the error goes on to
 * the queue for a rate-limited retry. Acts are never nested in one another, so a failure is
 * written once.
 */
async function attempt<T>(r: Reconciling, known: Known, step: () => Promise<T>): Promise<T> {
  try {
    return await step();
  } catch (err) {
    return failRun(r, known, err);
  }
}

/** The vault's view of a Run, and what it lost of what the Run's status shows. */
export interface Seen {
  /** The Run the rest of the reconcile acts on: the cached one, or the live one when a loss was judged. */
  readonly run: Run;
  readonly observed: Observed;
  readonly loss: RecordLoss | null;
}

/**
 * Gathers the vault's view of the Run and compares it with the Run's status (costs nothing: both
 * sides were just read). A loss is judged again on the live Run (the cache may hold an older status
 * claiming less), so that it is written down on the newest status; null when the Run is gone or
 * was replaced by another of the same name meanwhile.
 */
export async function observe(
  deps: Pick<RunReconcilerDeps, 'api' | 'vault'>,
  run: Run,
): Promise<Seen | null> {
  const observed = await gather(deps.vault, run);
  if (lostRecords(run, observed) === null) return { run, observed, loss: null };
  const live = await deps.api.live(run.metadata.namespace, run.metadata.name);
  if (live === null || live.metadata.uid !== run.metadata.uid) return null;
  return { run: live, observed, loss: lostRecords(live, observed) };
}

/**
 * Writes a loss down (recorder/losses.ts) before anything is recorded again, and tells it with a
 * Warning Event the first time: the loss row is written once, so a retry stays silent. Returns
 * what the RecordsLost condition says from now on.
 */
async function writeLoss(r: Reconciling, run: Run, loss: RecordLoss): Promise<string> {
  const { loss: row, created } = await attempt(r, { run }, () => r.deps.recorder.recordLoss(run, loss));
  const lost = lossMessage(loss, row.id);
  r.deps.written?.sayLoss(run.metadata.uid, lost);
  if (created)
    await attempt(r, { run, lost }, () => r.deps.api.event(run, 'Warning', EventReasons.RecordsLost, lost));
  return lost;
}

/**
 * The acts a gathered Run calls for, in order: plan → record → Attestation resources → status and
 * finalizer. A bounded batch was done and more is due: back in the queue, behind other namespaces'
 * Runs. The status is written once the batches are done: a status write of a large Run is among
 * the most expensive requests the API server serves (server-side apply and the CEL rules over every
 * step), and the count it holds must only ever cover records whose resources exist.
 */
async function converge(
  r: Reconciling,
  run: Run,
  observed: Observed,
  lost: string | undefined,
): Promise<ReconcileResult | undefined> {
  const known: Known = { run, lost, terminalRecorded: observed.claimed.has(terminalKey(run.metadata.uid)) };
  // A terminal Run is final by admission (its spec and phase cannot change: the CRD's rules), so
  // the cached copy is the Run the terminal records and the AIBOM are made from; no live GET.
  const todo = plan(run, observed, r.limits);
  const after = isEmpty(todo) ? observed : await act(r, known, todo, observed);
  const said = lost ?? unsaidLoss(r, run, after.aibom);
  const recorded: Known = {
    ...known,
    lost: said,
    terminalRecorded: known.terminalRecorded === true || todo.terminal,
  };
  const { left, state } = await attempt(r, recorded, () =>
    writeAttestationResources(r.deps.api, run, after.attestations, {
      limits: r.limits,
      deleting: r.deleting,
      lost: said !== undefined,
      policy: r.deps.resources,
      aibom: after.aibom,
      now: r.now(),
      notes: r.told.notes,
      tell: (current) => r.told.tell(current),
    }),
  );
  if (todo.more || left) return { more: true };
  return finish(r, run, after, said, state);
}

/**
 * A loss known but missing from the Run's RecordsLost condition (undefined when the Run says one):
 * the one this term said on it, which a cached copy older than that status lacks; else the one its
 * AIBOM record names (it supersedes an AIBOM whose record the vault lost, found in the bucket), which
 * only the bucket showed when the status naming the lost AIBOM was never written (the database went
 * away first). Read from the record, not from the reconcile that found it, so a retry after a failed
 * status write, or another controller term, still says it.
 */
function unsaidLoss(r: Reconciling, run: Run, aibom: ArtifactRecord | null): string | undefined {
  if (run.status?.conditions?.some((c) => c.type === ConditionTypes.RecordsLost)) return undefined;
  const said = r.deps.written?.lossOf(run.metadata.uid);
  if (said !== undefined) return said;
  const superseded = supersededLoss(aibom);
  return superseded === null ? undefined : supersededMessage(superseded);
}

/**
 * The acts of a plan that is not empty: the records (mirror, steps, terminal records), then the
 * AIBOM and a manifest repair; returns the vault as they left it (gathered again).
 */
async function act(r: Reconciling, known: Known, todo: Plan, observed: Observed): Promise<Observed> {
  const { deps, told } = r;
  const run = known.run;
  await attempt(r, known, () => recordRecords(deps, run, todo, told));
  // The terminal records are stored once recordRecords returned (its last act).
  const recorded: Known = { ...known, terminalRecorded: known.terminalRecorded === true || todo.terminal };
  return attempt(r, recorded, async () => {
    if (todo.aibom) await recordAibom(deps, run, told, known.lost !== undefined);
    if (todo.repair !== null && observed.aibom !== null)
      await repairManifest(deps, run, observed, observed.aibom, todo.repair, r.now());
    return gather(deps.vault, run);
  });
}

/**
 * The record acts of a plan, in order: the Run's mirror (the one vault write the reconciler makes
 * itself), the finished steps' records, then the terminal records (last: once this returns they are
 * stored). What was created is noted for the reconcile's Event.
 */
export async function recordRecords(
  deps: Pick<RunReconcilerDeps, 'vault' | 'recorder'>,
  run: Run,
  todo: Plan,
  told: Telling,
): Promise<void> {
  if (todo.mirror) await because(Reasons.VaultUnavailable, () => deps.vault.runs.upsert(run));
  const recorded = await deps.recorder.recordSteps(run, todo.steps);
  if (todo.terminal) recorded.push(await deps.recorder.recordTerminal(run));
  const created = recorded.filter((x) => x.created);
  if (created.length > 0)
    told.note(`recorded ${created.map((x) => `${x.ids.length} attestation(s) for ${x.what}`).join(', ')}`);
}

/**
 * Records the Run's AIBOM (the recorder makes, stores and seals it); when this call created it, its
 * time is observed and it is noted for the Event, and a Warning says which lost AIBOM it supersedes.
 * A loss only the bucket showed gets its RecordsLost Warning here too, unless `lossTold` (the
 * reconcile told a loss the status showed).
 */
export async function recordAibom(
  deps: Pick<RunReconcilerDeps, 'api' | 'recorder' | 'observeAibom'>,
  run: Run,
  told: Telling,
  lossTold = false,
): Promise<void> {
  const t0 = performance.now();
  const { artifact, created } = await deps.recorder.recordAibom(run);
  if (!created) return;
  deps.observeAibom?.((performance.now() - t0) / 1000);
  told.note(`AIBOM ${artifact.digest} stored at ${artifact.objectKey}`, EventReasons.AIBOMRecorded);
  const superseded = supersededLoss(artifact);
  if (superseded === null) return;
  await deps.api.event(
    run,
    'Warning',
    EventReasons.AIBOMSuperseded,
    `AIBOM ${artifact.digest} supersedes AIBOM ${superseded.digest}, whose record the vault lost ` +
      `(loss ${superseded.loss_id}); the earlier one is kept in the bucket and is no longer served`,
  );
  if (!lossTold)
    await deps.api.event(run, 'Warning', EventReasons.RecordsLost, supersededMessage(superseded));
}

/**
 * Serves an open request to re-sign the AIBOM's C2PA manifest. The Run shows the repair
 * (AIBOMReady=False, ManifestRepairing) before it is attempted: if the attempt fails, the condition
 * then says what it failed on. The outcome is told with its own Event.
 */
export async function repairManifest(
  deps: RunReconcilerDeps,
  run: Run,
  observed: Observed,
  aibom: ArtifactRecord,
  request: ManifestRepair,
  now: Date,
): Promise<void> {
  const repairing = desiredStatus(run, observed, now);
  if (statusChanged(run.status, repairing)) await writeStatus(deps, run, repairing);
  const { repair, outcome } = await deps.recorder.repairManifest(run, aibom, request);
  const done = outcome === 'done';
  await deps.api.event(
    run,
    done ? 'Normal' : 'Warning',
    done ? EventReasons.ManifestRepaired : EventReasons.ManifestRepairFailed,
    done
      ? `C2PA manifest of AIBOM ${aibom.digest} re-signed over the same bytes: ${repair.manifestDigest ?? ''} replaces ${repair.replacesDigest ?? ''} (${repair.reason})`
      : `C2PA manifest of AIBOM ${aibom.digest} cannot be repaired: ${repair.lastError ?? ''}`,
  );
}

/**
 * A failed act: what was recorded before it is told still (a retry finds it claimed and stays
 * silent), the condition of the stage that failed says why (with the loss, once written down), a
 * Warning Event too, and the error is rethrown for a rate-limited retry.
 */
async function failRun(r: Reconciling, known: Known, err: unknown): Promise<never> {
  const { deps, now } = r;
  const run = known.run;
  const failure = failureReason(err);
  const message = humanCause(failure, err);
  r.log.warn({ err, reason: failure }, 'reconcile failed; will retry');
  await r.told.tell(run);
  const failed = noted(
    failedStatus(run, failure, message, now(), known.terminalRecorded),
    run,
    known.lost,
    now(),
  );
  if (statusChanged(run.status, failed)) await writeStatus(deps, run, failed);
  await deps.api.event(run, 'Warning', failure, message);
  throw err;
}

/** `status` with the RecordsLost condition when the vault lost records this Run showed: said on the Run for good. */
function noted(status: RunStatus, run: Run, lost: string | undefined, now: Date): RunStatus {
  return lost === undefined ? status : withLoss(status, lost, run.metadata.generation, now);
}

/**
 * The end of a reconcile that did all that was due: the status written when it changed (with what it
 * claims of the Attestation resources, `resources`; remembered so that its echo is not reconciled
 * again), and the finalizer of a Run being deleted removed once its evidence is stored. A Run kept
 * is looked at again when its resources are due to go (the retention, resources.ts). Not an
 * `attempt`: a failure here is retried without a failure condition.
 */
async function finish(
  r: Reconciling,
  run: Run,
  observed: Observed,
  lost: string | undefined,
  resources: AttestationResources,
): Promise<ReconcileResult | undefined> {
  const { deps } = r;
  const status = withResources(
    noted(desiredStatus(run, observed, r.now()), run, lost, r.now()),
    run,
    resources,
  );
  if (!r.deleting && statusChanged(run.status, status)) {
    // No room for the status: told, and not retried (the evidence is stored; nothing will make it fit).
    if (!(await writeStatus(deps, run, status))) return undefined;
    // Only what this reconcile saw and wrote: its echo carries exactly that, any other change differs.
    deps.written?.remember(r.key, { view: runView(run), status });
  }
  const terminal = isTerminal(run.status?.phase);
  if (r.deleting && (!terminal || observed.aibom)) {
    await deps.api.removeFinalizer(run);
    r.log.info('finalizer removed: attestations and AIBOM are recorded');
  }
  // Looked at again when its resources are due to go (the retention), whatever happens before.
  return r.deleting ? undefined : requeueAtPrune(run, observed.aibom, deps.resources, r.now());
}

/**
 * A Run admitted but beyond what can be recorded (recordable.ts): both conditions say why, once, with
 * a Warning Event; it is not retried (nothing will change: its spec and finished steps are final),
 * and nothing of it is stored. Its finalizer, if it has one, does not hold its deletion: no evidence
 * can come.
 */
async function refuseRun(
  deps: RunReconcilerDeps,
  run: Run,
  why: string,
  deleting: boolean,
  now: Date,
): Promise<undefined> {
  if (deleting) {
    if (hasFinalizer(run, FINALIZER)) await deps.api.removeFinalizer(run);
    return undefined;
  }
  const status = refusedStatus(run, why, now);
  if (statusChanged(run.status, status)) {
    await deps.api.applyStatus(run, status);
    await deps.api.event(run, 'Warning', Reasons.RunNotRecordable, why);
    deps.logger.warn(
      { run: `${run.metadata.namespace}/${run.metadata.name}`, reason: why },
      'Run cannot be recorded',
    );
  }
  return undefined;
}

/**
 * Writes the controller's status fields; false when the API server cannot store them because the Run
 * is too large (a pipeline filled it to the limit: isTooLarge), told with a Warning Event instead.
 * Nothing else can say it: the Run takes no status write.
 */
async function writeStatus(deps: RunReconcilerDeps, run: Run, status: RunStatus): Promise<boolean> {
  try {
    await deps.api.applyStatus(run, status);
    return true;
  } catch (err) {
    if (!isTooLarge(err)) throw err;
    const why = ((err as Error).message ?? '').split('\n')[0]!.slice(0, 300);
    await deps.api.event(
      run,
      'Warning',
      EventReasons.StatusTooLarge,
      `the API server refuses this Run's status (${why}): the Run leaves no room for it. Its records ` +
        `and AIBOM are in the vault: GET /v1/runs/${run.metadata.uid} (docs/runs.md, size)`,
    );
    deps.logger.warn(
      { run: `${run.metadata.namespace}/${run.metadata.name}`, err },
      'Run status too large to write',
    );
    return false;
  }
}
