/**
 * TypeScript view of the `Run` custom resource (crds/vault.service.dev_runs.yaml is the source of
 * truth; keep these in step with it). The Run's metadata.uid is the run id everywhere else.
 */

export const GROUP = 'vault.service.dev';
export const VERSION = 'v1';
export const RUN_PLURAL = 'runs';
export const ATTESTATION_PLURAL = 'attestations';

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
  name: string;
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
  command?: string[];
}

export interface Capability {
  scope: string;
  grantedBy: string;
  approvedBy?: string;
}

export interface StepSpec {
  id: string;
  dependsOn?: string[];
  inputs?: Record<string, unknown>;
  policyPack?: PolicyPackRef;
  model?: ModelSpec;
  tool?: ToolSpec;
  capabilities?: Capability[];
}

export interface RunSpec {
  policyPack?: PolicyPackRef;
  inputs?: Record<string, unknown>;
  steps: StepSpec[];
}

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

export interface RunStatus {
  phase?: Phase;
  steps?: StepStatus[];
  artifacts?: Record<string, unknown>;
  attestations?: { count?: number; runAttestationId?: string; aibomAttestationId?: string };
  transparency?: {
    state?: 'queued' | 'published' | 'failed';
    queued?: number;
    published?: number;
    failed?: number;
  };
  observedGeneration?: number;
  conditions?: Condition[];
}

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
