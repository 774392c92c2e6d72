import { jcsSha256Hex } from '../json.ts';
import { PredicateTypes, subjectNames, type DigestSet, type Statement, type Subject } from '../statement.ts';
import { buildStatement, type PolicyPackRef } from './common.ts';

export interface ModelRef {
  name: string;
  provider: string;
  version: string;
  temperature: number;
}

export interface ToolRef {
  name: string;
  /** May be empty: the Run CRD admits a tool step without a command (recorded as []). */
  command: string[];
}

/** Attestations are made when a step reaches one of these terminal phases. */
export type StepPhase = 'succeeded' | 'failed' | 'skipped';

type StepKind = { kind: 'model'; model: ModelRef } | { kind: 'tool'; tool: ToolRef };

/** Mirrors docs/predicates/step.schema.json. */
export type StepPredicate = {
  runId: string;
  stepId: string;
  inputDigest: DigestSet;
  outputDigest: DigestSet;
  phase: StepPhase;
  startedAt: string;
  finishedAt: string;
  policyPack: PolicyPackRef;
} & StepKind;

export type StepInput = {
  runId: string;
  stepId: string;
  /** The step inputs as a JSON value; hashed as JCS canonical JSON. */
  inputs: unknown;
  /** The step output, or the error object of a failed step, or null; hashed as JCS canonical JSON. */
  output: unknown;
  phase: StepPhase;
  /** RFC 3339 timestamps. */
  startedAt: string;
  finishedAt: string;
  policyPack: PolicyPackRef;
} & StepKind;

/** Subject `step:<runId>:<stepId>`; its digest is the output digest (the step's product). */
export function stepSubject(predicate: StepPredicate): Subject {
  return {
    digest: { sha256: predicate.outputDigest.sha256 },
    name: subjectNames.step(predicate.runId, predicate.stepId),
  };
}

export function stepStatement(input: StepInput): Statement<StepPredicate, typeof PredicateTypes.step> {
  // Fields are copied one by one: extra keys on the caller's objects never reach a signed payload.
  // Members in JCS order (makeStatement says why): `model` sorts before `outputDigest`, `tool` last.
  const inputDigest = { sha256: jcsSha256Hex(input.inputs) };
  const outputDigest = { sha256: jcsSha256Hex(input.output) };
  const policyPack = { name: input.policyPack.name, version: input.policyPack.version };
  const { finishedAt, phase, runId, startedAt, stepId } = input;
  const predicate: StepPredicate =
    input.kind === 'model'
      ? {
          finishedAt,
          inputDigest,
          kind: 'model',
          model: {
            name: input.model.name,
            provider: input.model.provider,
            temperature: input.model.temperature,
            version: input.model.version,
          },
          outputDigest,
          phase,
          policyPack,
          runId,
          startedAt,
          stepId,
        }
      : {
          finishedAt,
          inputDigest,
          kind: 'tool',
          outputDigest,
          phase,
          policyPack,
          runId,
          startedAt,
          stepId,
          tool: { command: [...input.tool.command], name: input.tool.name },
        };
  return buildStatement(PredicateTypes.step, predicate, stepSubject);
}
