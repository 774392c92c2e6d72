import type { AttestationResources, Run } from '../../crd/run.ts';
import type { AttestationSummary } from '../../vault/index.ts';
import type { RunApi } from './reconciler.ts';
import { recordCounts, resourceRecords, shownResources } from './resources.ts';

/** Requests in flight at once for one Run's resources (a Run's records are few; a backlog is bounded). */
const CONCURRENCY = 8;

async function inBatches<T>(items: readonly T[], act: (item: T) => Promise<void>): Promise<void> {
  for (let i = 0; i < items.length; i += CONCURRENCY) {
    await Promise.all(items.slice(i, i + CONCURRENCY).map(act));
  }
}

/**
 * Brings a Run's Attestation resources to `state` (resources.ts) when that is not the default
 * `perRecord` kept since the Run's first reconcile (the reconciler's own path does that one).
 *
 * Steady (`state` is what the status shows): a `perRun` resource is created and its counts applied
 * when the vault holds records the status does not count yet; otherwise nothing, not even a read.
 * A change of state (another mode, a retention reached, a loss of records): one LIST of the Run's
 * resources, then deletes of those `state` does not keep and creates of those it lacks, at most
 * `limit` of each per reconcile. Every act is idempotent (absent on delete, existing on create are
 * success), so a crash part way is repaired by the next reconcile, which sees the same old status.
 *
 * Returns whether work is left for another reconcile (the status must not claim `state` before).
 */
export async function syncResources(
  api: RunApi,
  run: Run,
  records: readonly AttestationSummary[],
  state: AttestationResources,
  changed: boolean,
  limit: number,
  notes: string[],
): Promise<boolean> {
  const wanted = resourceRecords(state, records);
  const counted = run.status?.attestations?.count ?? 0;
  if (!changed && shownResources(run) === state) {
    if (state !== 'perRun' || wanted.length === 0 || counted === records.length) return false;
    await api.createAttestation(run, wanted[0]!);
    await api.applyAttestationRecords(run, wanted[0]!.id, recordCounts(records));
    return false;
  }
  const existing = await api.attestationIds(run);
  const keep = new Set(wanted.map((a) => a.id));
  const extra = [...existing].filter((id) => !keep.has(id));
  const missing = wanted.filter((a) => !existing.has(a.id));
  const deletes = extra.slice(0, limit);
  const creates = missing.slice(0, limit);
  await inBatches(deletes, (id) => api.deleteAttestation(run, id));
  await inBatches(creates, (a) => api.createAttestation(run, a));
  if (state === 'perRun' && wanted.length > 0) {
    await api.applyAttestationRecords(run, wanted[0]!.id, recordCounts(records));
  }
  if (deletes.length > 0) {
    notes.push(
      `deleted ${deletes.length} Attestation resource(s) (${state === 'pruned' ? 'retention reached' : `attestationResources=${state}`}; the vault keeps every record)`,
    );
  }
  return extra.length > deletes.length || missing.length > creates.length;
}
