import { isTerminal, type AttestationResources, type Run, type RunStatus } from '../../crd/run.ts';
import type { ArtifactRecord, AttestationSummary } from '../../vault/index.ts';

/**
 * Which Attestation resources a Run has in Kubernetes (ATTESTATION_RESOURCES, the chart's
 * `attestationResources`): a projection of the vault, which keeps every record whatever this says
 * (docs/runs.md "Attestation resources"). Pure: the reconciler gathers, this decides.
 *
 * - `perRecord`: one resource per record, created as records are appended (the default).
 * - `perRun`: one resource per ended Run: the resource of its provenance record (kind `run`, so the
 *   spec is a record's, immutable like every other), whose status counts all of the Run's records.
 * - `none`: no resource; the Run's status carries the counts and where the records are.
 * - `pruned` (not a setting): ATTESTATION_RESOURCE_RETENTION after the Run's AIBOM was recorded,
 *   its resources are deleted, whatever the mode.
 */
export const ATTESTATION_RESOURCE_MODES = ['perRecord', 'perRun', 'none'] as const;
export type AttestationResourceMode = (typeof ATTESTATION_RESOURCE_MODES)[number];

export interface ResourcePolicy {
  readonly mode: AttestationResourceMode;
  /** Unset: a Run's resources stay as long as the Run. */
  readonly retentionMs?: number;
}

export const DEFAULT_RESOURCE_POLICY: ResourcePolicy = { mode: 'perRecord' };

/**
 * A timer cannot wait longer than 2^31-1 ms; a Run due later is looked at again after this long
 * (and then scheduled anew).
 */
const MAX_WAIT_MS = 24 * 3_600_000;

/**
 * When the Run's resources are due to go (ms since the epoch): its AIBOM's record time plus the
 * retention. Undefined while the Run has no AIBOM (its evidence is not complete) or without a retention.
 */
export function pruneAt(run: Run, aibom: ArtifactRecord | null, policy: ResourcePolicy): number | undefined {
  if (policy.retentionMs === undefined || aibom === null || !isTerminal(run.status?.phase)) return undefined;
  return aibom.createdAt.getTime() + policy.retentionMs;
}

/** The state the Run's resources should be in now. */
export function wantedResources(
  run: Run,
  aibom: ArtifactRecord | null,
  policy: ResourcePolicy,
  now: Date,
): AttestationResources {
  const at = pruneAt(run, aibom, policy);
  return at !== undefined && at <= now.getTime() ? 'pruned' : policy.mode;
}

/** The state the Run's status says its resources are in (absent: `perRecord`, as before the setting). */
export function shownResources(run: Run): AttestationResources {
  return run.status?.attestations?.resources ?? 'perRecord';
}

/** How long until the Run's resources are due to go, for a requeue (undefined: never, or now). */
export function untilPrune(
  run: Run,
  aibom: ArtifactRecord | null,
  policy: ResourcePolicy,
  now: Date,
): number | undefined {
  const at = pruneAt(run, aibom, policy);
  if (at === undefined || at <= now.getTime()) return undefined;
  return Math.min(at - now.getTime(), MAX_WAIT_MS);
}

/** A requeue when the Run's resources are due to go (undefined: never, or now). */
export function requeueAtPrune(
  run: Run,
  aibom: ArtifactRecord | null,
  policy: ResourcePolicy | undefined,
  now: Date,
): { requeueAfterMs: number } | undefined {
  const wait = untilPrune(run, aibom, policy ?? DEFAULT_RESOURCE_POLICY, now);
  return wait !== undefined ? { requeueAfterMs: wait } : undefined;
}

/** The records that have a resource in `state` (in the vault's insert order). */
export function resourceRecords(
  state: AttestationResources,
  records: readonly AttestationSummary[],
): AttestationSummary[] {
  switch (state) {
    case 'perRecord':
      return [...records];
    case 'perRun': {
      const run = records.find((a) => a.kind === 'run');
      return run === undefined ? [] : [run];
    }
    default:
      return [];
  }
}

/** `status.records` of a `perRun` resource: how many records of each kind the Run has. */
export interface RecordCounts {
  readonly count: number;
  readonly kinds: Record<string, number>;
  readonly aibomAttestationId?: string;
}

export function recordCounts(records: readonly AttestationSummary[]): RecordCounts {
  const kinds: Record<string, number> = {};
  for (const r of records) kinds[r.kind] = (kinds[r.kind] ?? 0) + 1;
  const aibom = records.find((a) => a.kind === 'aibom');
  return { count: records.length, kinds, ...(aibom ? { aibomAttestationId: aibom.id } : {}) };
}

/**
 * Where the Run's records are served: the /v1 query of every record of the run (each one then also
 * at `GET /v1/attestations/{id}`), as a request a client can send as it reads.
 */
export const evidencePath = (run: Run): string =>
  `POST /v1/attestations/query {"run_id":"${run.metadata.uid}"}`;

/**
 * The Run's status with the state of its resources: `perRecord` adds nothing (a Run's status reads
 * as before the setting, so that converged Runs cost no write after an upgrade); any other state
 * names itself and where the evidence is.
 */
export function withResources(status: RunStatus, run: Run, state: AttestationResources): RunStatus {
  if (state === 'perRecord') return status;
  return {
    ...status,
    attestations: { ...status.attestations, resources: state, evidence: evidencePath(run) },
  };
}
