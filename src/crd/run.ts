/**
 * TypeScript view of the `Run` custom resource (crds/vault.service.dev_runs.yaml is the source of
 * truth; keep these in step with it). The Run's metadata.uid is the run id everywhere else.
 * What admission guarantees about a stored Run (bounds, characters, immutability): docs/runs.md.
 */

export const GROUP = 'vault.service.dev';
export const VERSION = 'v1';
export const RUN_PLURAL = 'runs';
export const ATTESTATION_PLURAL = 'attestations';

/** Succeeded and Failed are terminal: admission refuses any later change of phase or steps. */
export type Phase = 'Pending' | 'Running' | 'Succeeded' | 'Failed';

/** The phases a Run (and a step) ends in: the only definition of "terminal" in the code base. */
export type TerminalPhase = Extract<Phase, 'Succeeded' | 'Failed'>;

export function isTerminal(phase: string | undefined | null): phase is TerminalPhase {
  return phase === 'Succeeded' || phase === 'Failed';
}

/** A step that reached a terminal phase (it is attested once, then). */
export function isFinished(step: StepStatus | undefined): step is StepStatus & { phase: TerminalPhase } {
  return isTerminal(step?.phase);
}

export interface PolicyPackRef {
  /** 1-253 characters without '@', whitespace (Unicode-wide) or control characters. */
  name: string;
  /** Up to 128 characters like name; '' or absent means unversioned. */
  version?: string;
  /** Guardrails the pack enforces, as the pipeline declares them. */
  guardrails?: string[];
}

export interface ModelSpec {
  name: string;
  provider: string;
  version: string;
  temperature?: number;
}

export interface ToolSpec {
  name: string;
  /** Absent is recorded as [] (a tool called through an API has no command line). */
  command?: string[];
}

/** One delegation: `grantedBy` grants `scope` (within what it holds), approved by `approvedBy`. */
export interface Delegation {
  /** A scope (docs/capabilities.md): `*`, or segments separated by `:`. */
  scope: string;
  /** A principal, `<type>:<name>` (`team:support-platform`). */
  grantedBy: string;
  /** A principal; absent (recorded as null) when no approval was required; never ''. */
  approvedBy?: string;
}

/**
 * A capability of a step: the step's own grant, and optionally the delegations that brought its
 * scope to `grantedBy`, root side first (each link's scope within the one before; docs/capabilities.md).
 */
export interface Capability extends Delegation {
  /** At most 4. */
  delegatedFrom?: Delegation[];
}

/** The SPDX 3.0.1 DatasetType vocabulary, less `noAssertion` (what an absent `type` means). */
export const DATASET_TYPES = [
  'audio',
  'categorical',
  'graph',
  'image',
  'numeric',
  'other',
  'sensor',
  'structured',
  'syntactic',
  'text',
  'timeseries',
  'timestamp',
  'video',
] as const;
export type DatasetType = (typeof DATASET_TYPES)[number];

/**
 * A dataset a step reads, as the pipeline declares it. Signed with the spec (the run provenance);
 * listed by the AIBOM's SPDX and CycloneDX 1.7 views, not by the payload (docs/aibom.md).
 */
export interface DatasetSpec {
  name: string;
  /** Who supplies it. */
  provider: string;
  version?: string;
  /** An absolute URI where it can be obtained. */
  location?: string;
  /** Absent: noAssertion. */
  type?: DatasetType;
  /** Hex SHA-256 of its bytes. */
  sha256?: string;
}

export interface StepSpec {
  /** Unique in the run: 1-63 of [a-z0-9-_.], starting and ending with a letter or digit. */
  id: string;
  /** At most 32 distinct ids, each of a step listed before this one (so the DAG has no cycle). */
  dependsOn?: string[];
  /** Any JSON object without NUL (U+0000, which PostgreSQL cannot store). */
  inputs?: Record<string, unknown>;
  policyPack?: PolicyPackRef;
  model?: ModelSpec;
  tool?: ToolSpec;
  /** At most 8. */
  datasets?: DatasetSpec[];
  /** At most 16 per step, 256 per run: each is a vault record. */
  capabilities?: Capability[];
}

/** Immutable once created: every record of the run signs it. */
export interface RunSpec {
  policyPack?: PolicyPackRef;
  inputs?: Record<string, unknown>;
  /** At most 128. */
  steps: StepSpec[];
}

/** Final once its phase is Succeeded or Failed (admission refuses any change or removal). */
export interface StepStatus {
  id: string;
  phase?: Phase;
  startedAt?: string;
  finishedAt?: string;
  outputDigest?: string;
  output?: unknown;
  error?: string;
}

export interface Condition {
  type: string;
  status: 'True' | 'False' | 'Unknown';
  observedGeneration?: number;
  lastTransitionTime: string;
  reason: string;
  message: string;
}

export type TransparencyMode = 'dry_run' | 'published' | 'mixed';

export interface RunStatus {
  phase?: Phase;
  steps?: StepStatus[];
  artifacts?: Record<string, unknown>;
  attestations?: {
    count?: number;
    runAttestationId?: string;
    aibomAttestationId?: string;
    /**
     * Which Attestation resources the Run has (src/controller/run/resources.ts); absent means
     * `perRecord`, one per record.
     */
    resources?: AttestationResources;
    /** Where the records are served (the Run's detail in the /v1 API); with `resources` only. */
    evidence?: string;
  };
  transparency?: {
    /** `published` once every record of the run is, else `queued` (the spec's two states). */
    state?: 'queued' | 'published';
    /**
     * Where the published records went: `dry_run` (this deployment's own log), `published` (a
     * remote SCITT service), `mixed` (some of each). Absent until one is published.
     */
    mode?: TransparencyMode;
    queued?: number;
    published?: number;
    /** Queued records whose last attempt failed. */
    retrying?: number;
    /** Records without a SCITT job (stored while the writer was off). */
    notQueued?: number;
  };
  observedGeneration?: number;
  conditions?: Condition[];
}

/** The Attestation resources of a Run: the ATTESTATION_RESOURCES mode, or `pruned` after the retention. */
export type AttestationResources = 'perRecord' | 'perRun' | 'none' | 'pruned';

export interface ObjectMeta {
  name: string;
  namespace: string;
  uid: string;
  generation?: number;
  resourceVersion?: string;
  creationTimestamp?: string;
  deletionTimestamp?: string;
  finalizers?: string[];
  labels?: Record<string, string>;
  annotations?: Record<string, string>;
}

export interface Run {
  apiVersion: `${typeof GROUP}/${typeof VERSION}`;
  kind: 'Run';
  metadata: ObjectMeta;
  spec: RunSpec;
  status?: RunStatus;
}
