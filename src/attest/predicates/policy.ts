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
    digest: { sha256: jcsSha256Hex({ guardrails, pack, version }) },
    name: subjectNames.policy(pack, version),
  };
}

export function policyStatement(
  input: PolicyInput,
): Statement<PolicyPredicate, typeof PredicateTypes.policy> {
  // Members in JCS order (makeStatement says why).
  const predicate: PolicyPredicate = {
    decision: input.decision,
    guardrails: [...input.guardrails],
    pack: input.pack,
    runId: input.runId,
    version: input.version,
  };
  return buildStatement(PredicateTypes.policy, predicate, policySubject);
}
