import { isTerminal, type Run, type RunSpec, type StepSpec } from '../crd/run.ts';
import { AttestError, jcsSha256Hex, subjectNames } from '../attest/index.ts';
import { AibomError } from './errors.ts';
import { packContext, policyComponents, resolveStepPack } from '../policy/index.ts';
import type {
  Aibom,
  AibomDigest,
  AibomInput,
  AibomModel,
  AibomRun,
  AibomTool,
  DagNode,
  TerminalPhase,
} from './types.ts';
import { aibomSerialNumber, UUID_PATTERN } from './uuid.ts';

/**
 * Recorded as `properties.temperature` of a model step whose spec sets none. 1 is what the
 * major chat APIs (OpenAI, Anthropic, ...) apply when the parameter is not sent, so "unset" is
 * recorded as the sampling that most likely happened; 0 would claim greedy decoding that nobody asked
 * for. Exported so step attestations (whose schema requires a temperature) record the same value.
 * Given the run, the CycloneDX view says whether it was defaulted (`vault:temperature_defaulted`).
 */
export const DEFAULT_TEMPERATURE = 1;

// The Run CRD's step id pattern is stricter; this is what trust subjects need (`:` separates fields).
const STEP_ID = /^[^:\s\p{Cc}]+$/u;

const STATUS: Record<TerminalPhase, Aibom['metadata']['status']> = {
  Succeeded: 'succeeded',
  Failed: 'failed',
};

/** Run ids and attestation ids are UUIDs; the BOM records them in lower case (RFC 9562 §4). */
function normalizeUuid(id: string, code: 'INVALID_RUN' | 'INVALID_ATTESTATION_ID', what: string): string {
  const lower = typeof id === 'string' ? id.toLowerCase() : '';
  if (!UUID_PATTERN.test(lower)) {
    throw new AibomError(code, `${what} ${JSON.stringify(id)} is not a UUID`);
  }
  return lower;
}

/** `sha256:` + hex SHA-256 of the JCS of a JSON value, with the builder's error code. */
function jcsDigest(value: unknown, what: string): string {
  return `sha256:${jcsHex(value, what)}`;
}

function jcsHex(value: unknown, what: string): string {
  try {
    return jcsSha256Hex(value);
  } catch (cause) {
    if (cause instanceof AttestError) {
      throw new AibomError('NOT_CANONICALIZABLE', `${what}: ${cause.message}`, { cause });
    }
    throw cause;
  }
}

/**
 * The run DAG as hashed into `metadata.dag_digest`: one node per step, sorted by id, each with its
 * `dependsOn` sorted and deduplicated. Sorting makes the digest a digest of the graph, not of the
 * order the pipeline happened to list the steps in. Ids in `dependsOn` that name no step are kept:
 * the digest covers what the spec says.
 */
export function dagOf(spec: RunSpec): DagNode[] {
  return spec.steps
    .map((s) => ({ id: s.id, dependsOn: [...new Set(s.dependsOn ?? [])].sort() }))
    .sort((a, b) => (a.id < b.id ? -1 : a.id > b.id ? 1 : 0));
}

/** `metadata.dag_digest`: `sha256:` + hex SHA-256 of the JCS of dagOf(spec). */
export function dagDigest(spec: RunSpec): string {
  return jcsDigest(dagOf(spec), 'run DAG');
}

/** `metadata.input_digest`: `sha256:` + hex SHA-256 of the JCS of `spec.inputs`, `{}` when absent. */
export function inputDigest(spec: RunSpec): string {
  return jcsDigest(spec.inputs ?? {}, 'run inputs');
}

/**
 * A step's digest entry: hex SHA-256 of the JCS of its `inputs` (`{}` when absent): the same value as
 * the step attestation's `inputDigest.sha256` when the controller hashes `inputs ?? {}`.
 */
function stepDigests(step: StepSpec): AibomDigest[] {
  return [{ alg: 'SHA-256', content: jcsHex(step.inputs ?? {}, `step ${step.id} inputs`) }];
}

function checkSteps(steps: readonly StepSpec[]): void {
  const seen = new Set<string>();
  for (const step of steps) {
    if (typeof step.id !== 'string' || !STEP_ID.test(step.id)) {
      throw new AibomError(
        'INVALID_STEP',
        `step id ${JSON.stringify(step.id)} is empty or has ':' or whitespace`,
      );
    }
    if (seen.has(step.id)) throw new AibomError('INVALID_STEP', `step id ${step.id} is listed twice`);
    seen.add(step.id);
    if ((step.model === undefined) === (step.tool === undefined)) {
      throw new AibomError('INVALID_STEP', `step ${step.id} must have exactly one of model or tool`);
    }
    const t = step.model?.temperature;
    if (t !== undefined && (typeof t !== 'number' || !Number.isFinite(t) || t < 0)) {
      throw new AibomError(
        'INVALID_STEP',
        `step ${step.id}: temperature ${String(t)} is not a finite number >= 0`,
      );
    }
  }
}

/**
 * The AIBOM payload of a terminal run. Pure and deterministic: the same run spec (whatever the order
 * of its object keys), phase, attestation ids and override give the same payload, so
 * `service-ctl aibom generate` reproduces the stored bytes. Every derivation is in docs/aibom.md.
 * Throws AibomError (INVALID_RUN, INVALID_STEP, INVALID_POLICY_PACK, INVALID_ATTESTATION_ID,
 * NOT_CANONICALIZABLE).
 */
export function buildAibom(input: AibomInput): Aibom {
  const { run } = input;
  const runId = normalizeUuid(run.id, 'INVALID_RUN', 'run id');
  const status = Object.hasOwn(STATUS, run.phase) ? STATUS[run.phase] : undefined;
  if (status === undefined) {
    throw new AibomError(
      'INVALID_RUN',
      `run ${runId} is in phase ${String(run.phase)}, not Succeeded or Failed`,
    );
  }
  const { spec } = run;
  checkSteps(spec.steps);
  const packs = packContext(spec, input.policyPackOverride);
  const runPack = packs.run;
  const seen = new Set<string>();
  const attestationIds = input.attestationIds.map((id) => {
    const normalized = normalizeUuid(id, 'INVALID_ATTESTATION_ID', 'attestation id');
    if (seen.has(normalized)) {
      throw new AibomError('INVALID_ATTESTATION_ID', `attestation id ${normalized} is listed twice`);
    }
    seen.add(normalized);
    return normalized;
  });

  // Only the steps that ran, in spec order: a step that never ran is no component of the run.
  const ran = new Set(input.ranSteps);
  const steps = spec.steps.filter((s) => ran.has(s.id));
  // Fields are copied one by one: extra keys on the caller's objects never reach the signed payload.
  const models: AibomModel[] = [];
  const tools: AibomTool[] = [];
  for (const step of steps) {
    if (step.model !== undefined) {
      models.push({
        id: step.id,
        type: 'model',
        name: step.model.name,
        provider: step.model.provider,
        version: step.model.version,
        digests: stepDigests(step),
        properties: {
          step_id: step.id,
          policy_pack: resolveStepPack(step, packs).name,
          temperature: step.model.temperature ?? DEFAULT_TEMPERATURE,
        },
      });
    } else if (step.tool !== undefined) {
      tools.push({
        id: step.id,
        type: 'tool',
        name: step.tool.name,
        digests: stepDigests(step),
        properties: { step_id: step.id, command: [...(step.tool.command ?? [])] },
      });
    }
  }

  return {
    bom_format: 'CycloneDX',
    spec_version: '1.5',
    serial_number: aibomSerialNumber(runId),
    metadata: {
      run_id: runId,
      status,
      policy_pack: runPack.name,
      policy_pack_version: runPack.version,
      dag_digest: dagDigest(spec),
      input_digest: inputDigest(spec),
    },
    components: { models, tools, policies: policyComponents(spec, packs) },
    trust: {
      subjects: [subjectNames.run(runId), ...steps.map((s) => subjectNames.step(runId, s.id))],
      attestation_ids: attestationIds,
    },
  };
}

/**
 * The builder's view of a Run custom resource (id = metadata.uid). Throws AibomError INVALID_RUN
 * when `status.phase` is not terminal: the AIBOM describes finished runs only.
 */
export function aibomRunOf(run: Run): AibomRun {
  const phase = run.status?.phase;
  if (!isTerminal(phase)) {
    throw new AibomError(
      'INVALID_RUN',
      `run ${run.metadata.uid} is in phase ${phase ?? '(none)'}, not terminal`,
    );
  }
  return {
    id: run.metadata.uid,
    namespace: run.metadata.namespace,
    name: run.metadata.name,
    spec: run.spec,
    phase,
  };
}
