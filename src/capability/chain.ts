import { CapabilityError } from './errors.ts';
import { covers, isPrincipal, isScope } from './scope.ts';

/**
 * The chain of authority behind one capability of a step:
 *
 *   root (the key that signs the namespace's envelopes: the service signer, or the namespace's
 *         customer-supplied key)
 *     → link 0: `grantedBy` holds `scope` from the root and grants it on, approved by `approvedBy`
 *     → link 1: the next granter (the grantee of link 0) grants a scope within link 0's …
 *     → last link: the step's own grant (`capabilities[]` of the Run), to the step.
 *
 * The grantee of link i is the granter of link i+1; the grantee of the last link is the step.
 * Attenuation only: each link's scope is covered by the scope before it (scope.ts).
 */

export interface ChainLink {
  readonly scope: string;
  readonly grantedBy: string;
  /** null: the grant needed no approval. */
  readonly approvedBy: string | null;
}

/** Who the root is: the key id of the signer, and whether it is the service's or the namespace's. */
export interface ChainRoot {
  /** `sha256:<hex of SPKI DER>` of the envelope signer (the VC `kid`). */
  readonly keyId: string;
  readonly algorithm: string;
  readonly authority: 'service' | 'namespace';
  /** Biscuit root public key, `ed25519/<hex>` (derived from the signer: docs/capabilities.md). */
  readonly biscuitRootKey: string;
}

/** At most this many links before the step's own grant (CRD `delegatedFrom` maxItems). */
export const MAX_DELEGATIONS = 4;

/** A capability as the Run spec has it (src/crd/run.ts `Capability`). */
export interface CapabilitySpec {
  readonly scope: string;
  readonly grantedBy: string;
  readonly approvedBy?: string | null;
  readonly delegatedFrom?: readonly { scope: string; grantedBy: string; approvedBy?: string | null }[];
}

/** The links of a capability, root side first, the step's own grant last; validated. */
export function chainOf(capability: CapabilitySpec): ChainLink[] {
  const links = [...(capability.delegatedFrom ?? []), capability].map((l) => ({
    scope: l.scope,
    grantedBy: l.grantedBy,
    approvedBy: l.approvedBy ?? null,
  }));
  assertChain(links);
  return links;
}

/** The problems of a chain, in link order; empty when it is well formed and never widens. */
export function chainProblems(links: readonly ChainLink[]): CapabilityError[] {
  const out: CapabilityError[] = [];
  if (links.length === 0) out.push(new CapabilityError('CHAIN_INVALID', 'a chain has at least one link'));
  if (links.length > MAX_DELEGATIONS + 1) {
    out.push(
      new CapabilityError(
        'CHAIN_INVALID',
        `a chain has at most ${MAX_DELEGATIONS + 1} links (${MAX_DELEGATIONS} delegations and the step's grant), got ${links.length}`,
      ),
    );
  }
  links.forEach((l, i) => {
    if (!isScope(l.scope)) {
      out.push(
        new CapabilityError(
          'SCOPE_INVALID',
          `link ${i}: scope ${JSON.stringify(l.scope)} is not a scope (1-253 characters, segments separated by ":", no whitespace, "*" only alone)`,
        ),
      );
    }
    for (const [field, value] of [
      ['grantedBy', l.grantedBy],
      ['approvedBy', l.approvedBy],
    ] as const) {
      if (value === null && field === 'approvedBy') continue;
      if (!isPrincipal(value)) {
        out.push(
          new CapabilityError(
            'PRINCIPAL_INVALID',
            `link ${i}: ${field} ${JSON.stringify(value)} is not a principal (<type>:<name>, e.g. user:alice)`,
          ),
        );
      }
    }
    const before = links[i - 1];
    if (before !== undefined && isScope(before.scope) && isScope(l.scope) && !covers(before.scope, l.scope)) {
      out.push(
        new CapabilityError(
          'SCOPE_WIDENED',
          `link ${i}: ${l.grantedBy} grants ${l.scope}, which is not within ${before.scope} granted to it by ${before.grantedBy}`,
        ),
      );
    }
  });
  return out;
}

export function assertChain(links: readonly ChainLink[]): void {
  const first = chainProblems(links)[0];
  if (first !== undefined) throw first;
}
