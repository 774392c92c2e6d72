import { canonicalJson, type Statement } from '../attest/index.ts';

/** One reason a record's capability chain does not hold. */
export interface CapabilityProblem {
  readonly code: 'CAPABILITY_CHAIN_INVALID' | 'CAPABILITY_TOKEN_INVALID';
  readonly message: string;
}

/**
 * Workflow step (d): the capability chain attached to a record, checked offline. THE hook for
 * capability tokens: the export verifier (`service-ctl verify bundle.tar`) calls this for every
 * record and reports what it returns; token verification (W3C VC JWTs, Biscuit) plugs in here,
 * resolving each token's `kid` (the signer's key id, `sha256:<SPKI hex>`) through the same chains
 * the verifier already trusts (`trustedKey`).
 *
 * Today it checks what the vault records: the envelope's unsigned `capability_chain` projection is
 * the signed predicate's chain (a capability record), every link names who granted its scope, and
 * `capability_tokens`, when present, are tokens this verifier does not know yet (reported, so a
 * token is never silently taken as checked).
 */
export function verifyCapabilityChain(
  record: { capability_chain?: unknown; capability_tokens?: unknown; kind?: unknown },
  statement: Statement | undefined,
  _trustedKey: (keyId: string) => boolean,
): CapabilityProblem[] {
  const problems: CapabilityProblem[] = [];
  const projected = record.capability_chain;
  if (projected === undefined || projected === null) {
    if (record.kind === 'capability') {
      problems.push({ code: 'CAPABILITY_CHAIN_INVALID', message: 'a capability record without its chain' });
    }
  } else {
    const signed = (statement?.predicate as { chain?: unknown } | undefined)?.chain;
    if (signed === undefined) {
      problems.push({
        code: 'CAPABILITY_CHAIN_INVALID',
        message: 'capability_chain is set but the signed statement carries no chain',
      });
    } else if (canonicalJson(projected) !== canonicalJson(signed)) {
      problems.push({
        code: 'CAPABILITY_CHAIN_INVALID',
        message: 'capability_chain differs from the signed chain',
      });
    }
    if (Array.isArray(projected)) {
      for (const [i, link] of (projected as unknown[]).entries()) {
        const l = link as { scope?: unknown; grantedBy?: unknown } | null;
        if (typeof l?.scope !== 'string' || typeof l.grantedBy !== 'string' || l.grantedBy === '') {
          problems.push({
            code: 'CAPABILITY_CHAIN_INVALID',
            message: `link ${i} does not name a scope and who granted it`,
          });
        }
      }
    }
  }
  const tokens = record.capability_tokens;
  if (tokens !== undefined && tokens !== null && Object.keys(tokens).length > 0) {
    problems.push({
      code: 'CAPABILITY_TOKEN_INVALID',
      message: `capability_tokens (${Object.keys(tokens).join(', ')}) cannot be verified by this version`,
    });
  }
  return problems;
}
