import { jcsSha256Hex } from '../json.ts';
import { PredicateTypes, subjectNames, type Statement, type Subject } from '../statement.ts';
import { buildStatement } from './common.ts';

/** One delegation: `grantedBy` gave `scope`, `approvedBy` approved it (null: no approval needed). */
export interface CapabilityLink {
  scope: string;
  grantedBy: string;
  approvedBy: string | null;
}

/** Mirrors docs/predicates/capability.schema.json. */
export interface CapabilityPredicate {
  runId: string;
  stepId: string;
  /** n: position of the token among the step's tokens, from 0. */
  index: number;
  /** Root authority first, the step's own grant last. */
  chain: CapabilityLink[];
}

export interface CapabilityInput {
  runId: string;
  stepId: string;
  index: number;
  chain: readonly { scope: string; grantedBy: string; approvedBy?: string | null }[];
}

/** Subject `capability:<runId>:<stepId>:<n>`; digest: SHA-256 of the JCS canonical JSON of the chain. */
export function capabilitySubject(predicate: CapabilityPredicate): Subject {
  return {
    name: subjectNames.capability(predicate.runId, predicate.stepId, predicate.index),
    digest: { sha256: jcsSha256Hex(predicate.chain) },
  };
}

export function capabilityStatement(
  input: CapabilityInput,
): Statement<CapabilityPredicate, typeof PredicateTypes.capability> {
  const predicate: CapabilityPredicate = {
    runId: input.runId,
    stepId: input.stepId,
    index: input.index,
    chain: input.chain.map((link) => ({
      scope: link.scope,
      grantedBy: link.grantedBy,
      approvedBy: link.approvedBy ?? null,
    })),
  };
  return buildStatement(PredicateTypes.capability, predicate, capabilitySubject);
}
