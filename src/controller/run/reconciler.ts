import { EventReasons, FINALIZER, Reasons, type FailureReason } from '../../crd/reasons.ts';
import { isTerminal, type Run, type RunStatus } from '../../crd/run.ts';
import type { Logger } from '../../log/index.ts';
import { lossMessage, lostRecords, RecordError, type Recorder } from '../../recorder/index.ts';
import { because } from '../../recorder/errors.ts';
import { ObjectStoreError } from '../../blob/store.ts';
import {
  isVaultUnavailable,
  type ArtifactRepository,
  type AttestationRepository,
  type AttestationSummary,
  type ClaimRepository,
  type RunRepository,
} from '../../vault/index.ts';
import { hasFinalizer, isTooLarge } from '../../kube/index.ts';
import { unrecordable } from './recordable.ts';
import { writeAttestationResources } from './attestation-resources.ts';
import { requeueAtPrune, withResources, type RecordCounts, type ResourcePolicy } from './resources.ts';
import type { AttestationResources } from '../../crd/run.ts';
import { terminalKey } from '../../recorder/index.ts';
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
  type Written,
} from './plan.ts';
import type { ReconcileResult } from '../../queue/index.ts';

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
   * enqueues a Run for another reason (a manifest repair request) deletes its entry first.
   */
  readonly written?: Map<string, Written>;
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

function humanCause(reason: FailureReason, err: unknown): string {
  const msg = ((err as Error)?.message ?? String(err)).split('\n')[0]!.slice(0, 500);
  switch (reason) {
    case Reasons.VaultUnavailable:
      return `the vault (PostgreSQL) is unavailable: ${msg}`;
    case Reasons.ObjectStoreUnavailable:
      return `the object store is unavailable: ${msg}`;
    case Reasons.SignerUnavailable:
      return `no signer could be loaded: ${msg}`;
    case Reasons.TimestampUnavailable:
      return `no RFC 3161 time-stamp could be obtained: ${msg}`;
    default:
      return msg;
  }
}

/**
 * Reconciles one Run in the cert-manager shape: get (informer cache) → return when gone → finalizer
 * → gather (vault reads) → ordered pure checks (plan.ts) → act through the recorder → Attestation
 * resources for new records → write status only when it changed (compared structurally). A
 * converged Run costs four reads and no write; a Run reaching its terminal phase costs one request
 * per new Attestation resource, one Event and one status write (ADR 0017). Every act is
 * idempotent, so a crash at any point is repaired by the next reconcile. Errors set a condition
 * with their reason (RecordError), emit a Warning event and are rethrown for a rate-limited retry.
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
  let run = deps.api.cached(namespace, name);
  const written = deps.written?.get(key);
  deps.written?.delete(key);
  if (!run) return undefined;
  const deleting = run.metadata.deletionTimestamp !== undefined;
  // Before anything walks the Run's JSON (the echo check included): see recordable.ts.
  const why = unrecordable(run);
  if (why !== null) return refuseRun(deps, run, why, deleting, now());
  // The event of our own status write: the reconcile that wrote it acted on all it saw.
  if (isOwnEcho(run, written)) return undefined;
  if (deleting && !hasFinalizer(run, FINALIZER)) return undefined;
  if (!deleting) run = await deps.api.addFinalizer(run);
  const log = deps.logger.child({ run: `${namespace}/${name}`, runId: run.metadata.uid });

  const limits = deps.limits ?? RECONCILE_LIMITS;
  let observed: Observed | undefined;
  let todo: Plan;
  // Whether the terminal records (policies, provenance) are in the vault: for the conditions a
  // failure writes (failedStatus). Known once gathered, and once this reconcile recorded them.
  let terminalRecorded: boolean | undefined;
  let resources: { left: boolean; state: AttestationResources };
  // The vault lost records this Run's status shows (recorder/losses.ts): said on the Run for good.
  let lost: string | undefined;
  const noted = (status: RunStatus): RunStatus =>
    lost === undefined ? status : withLoss(status, lost, run?.metadata.generation, now());
  // What this reconcile recorded, told in one Event (not one per batch).
  const notes: string[] = [];
  let reason: string = EventReasons.Attested;
  const tell = async (current: Run): Promise<void> => {
    if (notes.length > 0) await deps.api.event(current, 'Normal', reason, notes.splice(0).join('; '));
  };
  try {
    observed = await gather(deps.vault, run);
    // Costs nothing: both sides were just read. Written down before anything is recorded again,
    // judged on the live Run (the cache may hold an older status claiming less).
    let loss = lostRecords(run, observed);
    if (loss !== null) {
      const live = await deps.api.live(namespace, name);
      if (live === null || live.metadata.uid !== run.metadata.uid) return undefined;
      run = live;
      loss = lostRecords(run, observed);
    }
    if (loss !== null) {
      const { loss: row, created } = await deps.recorder.recordLoss(run, loss);
      lost = lossMessage(loss, row.id);
      if (created) await deps.api.event(run, 'Warning', EventReasons.RecordsLost, lost);
    }
    terminalRecorded = observed.claimed.has(terminalKey(run.metadata.uid));
    // A terminal Run is final by admission (its spec and phase cannot change: the CRD's rules), so
    // the cached copy is the Run the terminal records and the AIBOM are made from; no live GET.
    todo = plan(run, observed, limits);
    if (!isEmpty(todo)) {
      const current = run;
      if (todo.mirror) await because(Reasons.VaultUnavailable, () => deps.vault.runs.upsert(current));
      const recorded = await deps.recorder.recordSteps(current, todo.steps);
      if (todo.terminal) {
        recorded.push(await deps.recorder.recordTerminal(current));
        terminalRecorded = true;
      }
      const created = recorded.filter((r) => r.created);
      if (created.length > 0)
        notes.push(
          `recorded ${created.map((r) => `${r.ids.length} attestation(s) for ${r.what}`).join(', ')}`,
        );
      if (todo.aibom) {
        const t0 = performance.now();
        const { artifact, created } = await deps.recorder.recordAibom(current);
        if (created) {
          deps.observeAibom?.((performance.now() - t0) / 1000);
          reason = EventReasons.AIBOMRecorded;
          notes.push(`AIBOM ${artifact.digest} stored at ${artifact.objectKey}`);
          const superseded = (artifact.metadata as { supersedes?: { digest: string; loss_id: string } })
            .supersedes;
          if (superseded) {
            await deps.api.event(
              current,
              'Warning',
              EventReasons.AIBOMSuperseded,
              `AIBOM ${artifact.digest} supersedes AIBOM ${superseded.digest}, whose record the vault lost ` +
                `(loss ${superseded.loss_id}); the earlier one is kept in the bucket and is no longer served`,
            );
          }
        }
      }
      if (todo.repair !== null && observed.aibom !== null) {
        // The Run shows the repair (AIBOMReady=False, ManifestRepairing) before it is attempted:
        // if the attempt fails, the condition then says what it failed on.
        const repairing = desiredStatus(current, observed, now());
        if (statusChanged(current.status, repairing)) await writeStatus(deps, current, repairing);
        const { repair, outcome } = await deps.recorder.repairManifest(current, observed.aibom, todo.repair);
        await deps.api.event(
          current,
          outcome === 'done' ? 'Normal' : 'Warning',
          outcome === 'done' ? EventReasons.ManifestRepaired : EventReasons.ManifestRepairFailed,
          outcome === 'done'
            ? `C2PA manifest of AIBOM ${observed.aibom.digest} re-signed over the same bytes: ${repair.manifestDigest ?? ''} replaces ${repair.replacesDigest ?? ''} (${repair.reason})`
            : `C2PA manifest of AIBOM ${observed.aibom.digest} cannot be repaired: ${repair.lastError ?? ''}`,
        );
      }
      observed = await gather(deps.vault, current);
    }
    resources = await writeAttestationResources(deps.api, run, observed.attestations, {
      limits,
      deleting,
      lost: lost !== undefined,
      policy: deps.resources,
      aibom: observed.aibom,
      now: now(),
      notes,
      tell,
    });
  } catch (err) {
    const failure: FailureReason =
      err instanceof RecordError
        ? err.code
        : err instanceof ObjectStoreError
          ? Reasons.ObjectStoreUnavailable
          : isVaultUnavailable(err)
            ? Reasons.VaultUnavailable
            : Reasons.RecordingFailed;
    const message = humanCause(failure, err);
    log.warn({ err, reason: failure }, 'reconcile failed; will retry');
    // What was recorded before the failure is told still: a retry finds it claimed and stays silent.
    await tell(run);
    const failed = noted(failedStatus(run, failure, message, now(), terminalRecorded));
    if (statusChanged(run.status, failed)) await writeStatus(deps, run, failed);
    await deps.api.event(run, 'Warning', failure, message);
    throw err;
  }

  // A bounded batch was done and more is due: back in the queue, behind other namespaces' Runs.
  // The status is written once the batches are done: a status write of a large Run is among the
  // most expensive requests the API server serves (server-side apply and the CEL rules over every
  // step), and the count it holds must only ever cover records whose resources exist.
  if (todo.more || resources.left) return { more: true };
  const status = withResources(noted(desiredStatus(run, observed, now())), run, resources.state);
  if (!deleting && statusChanged(run.status, status)) {
    // No room for the status: told, and not retried (the evidence is stored; nothing will make it fit).
    if (!(await writeStatus(deps, run, status))) return undefined;
    // Only what this reconcile saw and wrote: its echo carries exactly that, any other change differs.
    deps.written?.set(key, { view: runView(run), status });
  }
  const terminal = isTerminal(run.status?.phase);
  if (deleting && (!terminal || observed.aibom)) {
    await deps.api.removeFinalizer(run);
    log.info('finalizer removed: attestations and AIBOM are recorded');
  }
  // Looked at again when its resources are due to go (the retention), whatever happens before.
  return deleting ? undefined : requeueAtPrune(run, observed.aibom, deps.resources, now());
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
