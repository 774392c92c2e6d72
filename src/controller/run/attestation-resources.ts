import type { AttestationResources, Run } from '../../crd/run.ts';
import type { ArtifactRecord, AttestationSummary } from '../../vault/index.ts';
import type { ReconcileLimits } from './plan.ts';
import type { RunApi } from './reconciler.ts';
import { syncResources } from './resource-sync.ts';
import {
  DEFAULT_RESOURCE_POLICY,
  shownResources,
  wantedResources,
  type ResourcePolicy,
} from './resources.ts';

/** Attestation resources created at once for one Run (a Run's records are few; a backlog is bounded). */
const CREATE_CONCURRENCY = 8;

export interface AttestationResourceOptions {
  readonly limits: ReconcileLimits;
  /** The Run is being deleted: it takes its resources with it, none is written. */
  readonly deleting: boolean;
  /** The vault lost records the Run's status shows (recorder/losses.ts): the status count tells nothing. */
  readonly lost: boolean;
  /** ATTESTATION_RESOURCES and the retention (resources.ts); default perRecord, kept. */
  readonly policy: ResourcePolicy | undefined;
  /** The Run's AIBOM record (the retention counts from it). */
  readonly aibom: ArtifactRecord | null;
  readonly now: Date;
  /** What this step did, for the reconcile's one Event. */
  readonly notes: string[];
  /** Tells the reconcile's Event (beside the creates). */
  readonly tell: (run: Run) => Promise<void>;
}

/**
 * Brings the Run's Attestation resources up to its vault records (`records`, in insert order), one
 * bounded batch per reconcile. `left`: work remains for the next reconcile; `state`: what the
 * Run's status may claim once none is left (resources.ts).
 */
export async function writeAttestationResources(
  api: RunApi,
  run: Run,
  records: readonly AttestationSummary[],
  opts: AttestationResourceOptions,
): Promise<{ left: boolean; state: AttestationResources }> {
  const { limits, deleting, notes } = opts;
  const state = wantedResources(run, opts.aibom, opts.policy ?? DEFAULT_RESOURCE_POLICY, opts.now);
  // Any state but per-record resources kept since the Run began (another mode, a retention reached,
  // or a switch back from either) is resource-sync.ts's, a loss included.
  if (!deleting && (state !== 'perRecord' || shownResources(run) !== 'perRecord')) {
    const left = await syncResources(api, run, records, state, opts.lost, limits.resources, notes);
    await opts.tell(run);
    return { left, state };
  }
  // Records are only appended, and the count on the status is written after the resources of
  // that many records exist (a failure keeps the old count): the records past it are the ones
  // without a resource. A stale count only costs AlreadyExists answers, never a missing resource.
  // A Run being deleted takes its Attestation resources with it (they are owned by it), and its
  // status with it: neither is written. Only the vault's evidence holds the finalizer, so a Run
  // whose resources or status cannot be written (a label or a size the API server refuses) can
  // still go once its records and AIBOM are stored.
  let missing = deleting ? [] : records.slice(run.status?.attestations?.count ?? 0);
  if (opts.lost && !deleting) {
    // The status count no longer tells which records have a resource, and resources of lost
    // records name ids the vault does not hold: they go (the loss row keeps the ids).
    const existing = await api.attestationIds(run);
    const held = new Set(records.map((a) => a.id));
    const dangling = [...existing].filter((id) => !held.has(id));
    for (const id of dangling) await api.deleteAttestation(run, id);
    if (dangling.length > 0) {
      notes.push(`deleted ${dangling.length} Attestation resource(s) of records the vault lost`);
    }
    missing = records.filter((a) => !existing.has(a.id));
  } else if (missing.length > limits.resources) {
    // More than one batch behind (a large Run, or resources deleted): one LIST, so that batches
    // after the first do not repeat the creates of the earlier ones as AlreadyExists answers.
    const existing = await api.attestationIds(run);
    missing = records.filter((a) => !existing.has(a.id));
  }
  const batch = missing.slice(0, limits.resources);
  await Promise.all([
    opts.tell(run),
    (async () => {
      for (let i = 0; i < batch.length; i += CREATE_CONCURRENCY) {
        await Promise.all(batch.slice(i, i + CREATE_CONCURRENCY).map((a) => api.createAttestation(run, a)));
      }
    })(),
  ]);
  return { left: missing.length > batch.length, state };
}
