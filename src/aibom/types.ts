import type { RunSpec, TerminalPhase } from '../crd/run.ts';
import type { PackComponent, PackOverride } from '../policy/index.ts';

export type { TerminalPhase } from '../crd/run.ts';

/** What the builder needs of a Run: the CR's metadata.uid, namespace and name, spec and terminal phase. */
export interface AibomRun {
  /** The Run's metadata.uid (a UUID); recorded in lower case. */
  id: string;
  namespace: string;
  name: string;
  spec: RunSpec;
  phase: TerminalPhase;
}

/** `PACK[@VERSION]`, as `--policy-pack` takes it. */
export type PolicyPackOverride = PackOverride;

export interface AibomInput {
  run: AibomRun;
  /**
   * Ids of the attestations generated during the run, in vault (insert) order, excluding the
   * AIBOM's own attestation (which signs these bytes, so cannot be listed in them).
   */
  attestationIds: readonly string[];
  /**
   * Ids of the steps that ran: those with a step record (a step is recorded once the pipeline
   * reports it Succeeded or Failed). Only these are components and trust subjects; a step of the
   * spec that never ran (a Failed run that stopped early) is in neither, so the AIBOM never claims
   * work that did not happen (docs/aibom.md "Steps that never ran"). Ids naming no step of the spec
   * are ignored.
   */
  ranSteps: readonly string[];
  /** `service-ctl aibom generate --policy-pack`; wins over every pack recorded in the spec. */
  policyPackOverride?: PolicyPackOverride;
}

/** A digest of a component: hex (lower case) SHA-256, without the `sha256:` prefix. */
export interface AibomDigest {
  alg: 'SHA-256';
  content: string;
}

export interface AibomModel {
  /** The step id. */
  id: string;
  type: 'model';
  name: string;
  provider: string;
  version: string;
  /** One entry: SHA-256 of the JCS of the step inputs (`{}` when the step has none). */
  digests: AibomDigest[];
  properties: {
    step_id: string;
    /** The step's own pack name, else the run's resolved pack name. */
    policy_pack: string;
    /** The spec's temperature, else DEFAULT_TEMPERATURE. */
    temperature: number;
  };
}

export interface AibomTool {
  /** The step id. */
  id: string;
  type: 'tool';
  name: string;
  /** One entry: SHA-256 of the JCS of the step inputs (`{}` when the step has none). */
  digests: AibomDigest[];
  properties: {
    step_id: string;
    /** The spec's command, `[]` when it has none. */
    command: string[];
  };
}

export type AibomPolicy = PackComponent;

export type AibomStatus = 'succeeded' | 'failed';

/**
 * The AIBOM payload: exactly the paths of the spec's "AIBOM payload" table, snake_case as written,
 * every path always present (see docs/aibom.md for how each value is derived).
 */
export interface Aibom {
  bom_format: 'CycloneDX';
  spec_version: '1.5';
  /** `urn:uuid:<uuid>`, a name-based UUIDv8 of the run id. */
  serial_number: string;
  metadata: {
    run_id: string;
    status: AibomStatus;
    policy_pack: string;
    policy_pack_version: string;
    /** `sha256:<hex>` */
    dag_digest: string;
    /** `sha256:<hex>` */
    input_digest: string;
  };
  components: {
    models: AibomModel[];
    tools: AibomTool[];
    policies: AibomPolicy[];
  };
  trust: {
    subjects: string[];
    attestation_ids: string[];
  };
}

/** The `summary` of the AIBOM's object-store metadata. */
export interface AibomSummary {
  models: number;
  tools: number;
  /** Sum over `components.policies[]` of their guardrail counts. */
  guardrails: number;
  /** `metadata.policy_pack`. */
  policy_pack: string;
}

/** One node of the run DAG as it is hashed into `metadata.dag_digest`. */
export interface DagNode {
  id: string;
  /** Sorted, without duplicates; ids are kept even when no step has them. */
  dependsOn: string[];
}
