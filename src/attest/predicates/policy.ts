import { jcsSha256Hex } from '../json.ts';
import { PredicateTypes, subjectNames, type Statement, type Subject } from '../statement.ts';
import { buildStatement } from './common.ts';

export type PolicyDecision = 'allow' | 'deny';

/** Mirrors docs/predicates/policy.schema.json. */
export interface PolicyPredicate {
  runId: string;
  pack: string;
  version: string;
  guardrails: string[];
  decision: PolicyDecision;
}

export type PolicyInput = PolicyPredicate;

/**
 * Subject `policy:<pack>@<version>`; its digest identifies the pack content that was evaluated:
 * SHA-256 of the JCS canonical JSON of `{pack, version, guardrails}` (guardrail order matters).
 */
export function policySubject(predicate: PolicyPredicate): Subject {
  const { pack, version, guardrails } = predicate;
  return {
    name: subjectNames.policy(pack, version),
    digest: { sha256: jcsSha256Hex({ pack, version, guardrails }) },
  };
}

export function policyStatement(
  input: PolicyInput,
): Statement<PolicyPredicate, typeof PredicateTypes.policy> {
  const predicate: PolicyPredicate = {
    runId: input.runId,
    pack: input.pack,
    version: input.version,
    guardrails: [...input.guardrails],
    decision: input.decision,
  };
  return buildStatement(PredicateTypes.policy, predicate, policySubject);
}
