import type { CapabilityPredicate } from '../attest/index.ts';
import type { JsonObject } from '../vault/index.ts';

/**
 * The API view of one chain (`capability_chain[]` of capability and step envelopes; docs/api.md):
 * who the root is, each delegation, and the step's own grant and approval, in snake_case like the
 * rest of the API. Built from the signed capability predicate, so it says nothing the record does
 * not sign.
 */
export function chainView(p: CapabilityPredicate): JsonObject {
  const last = p.chain.at(-1);
  return {
    capability: `capability:${p.runId}:${p.stepId}:${p.index}`,
    step: `step:${p.runId}:${p.stepId}`,
    root:
      p.root === undefined
        ? null
        : {
            authority: p.root.authority,
            key_id: p.root.keyId,
            algorithm: p.root.algorithm,
            biscuit_root_key: p.root.biscuitRootKey,
          },
    links: p.chain.map((l) => ({ scope: l.scope, granted_by: l.grantedBy, approved_by: l.approvedBy })),
    scope: last?.scope ?? null,
    granted_by: last?.grantedBy ?? null,
    approved_by: last?.approvedBy ?? null,
  };
}
