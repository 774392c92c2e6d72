import type { CapabilityPredicate } from '../attest/index.ts';
import type { JsonObject } from '../vault/index.ts';
import type { ChainLink } from './chain.ts';

/**
 * The API view of one chain (`capability_chain[]` of capability and step envelopes; docs/api.md):
 * who the root is, each delegation, and the step's own grant and approval, in snake_case like the
 * rest of the API. Built from the signed capability predicate, so it says nothing the record does
 * not sign.
 */
export function chainView(p: CapabilityPredicate): JsonObject {
  return viewOf({
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
    links: p.chain,
  });
}

/**
 * The view of a chain from its parts: what chainView makes of a predicate, and what the offline
 * verifier makes of a step's VC (the same chain, signed in another form) to compare a served view
 * with.
 */
export function viewOf(parts: {
  capability: string;
  step: string;
  root: JsonObject | null;
  links: readonly ChainLink[];
}): JsonObject {
  const last = parts.links.at(-1);
  return {
    capability: parts.capability,
    step: parts.step,
    root: parts.root,
    links: parts.links.map((l) => ({ scope: l.scope, granted_by: l.grantedBy, approved_by: l.approvedBy })),
    scope: last?.scope ?? null,
    granted_by: last?.grantedBy ?? null,
    approved_by: last?.approvedBy ?? null,
  };
}
