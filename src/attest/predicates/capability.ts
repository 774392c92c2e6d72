import { jcsSha256Hex } from '../json.ts';
import { PredicateTypes, subjectNames, type Statement, type Subject } from '../statement.ts';
import { buildStatement } from './common.ts';

/** One delegation: `grantedBy` gave `scope`, `approvedBy` approved it (null: no approval needed). */
export interface CapabilityLink {
  scope: string;
  grantedBy: string;
  approvedBy: string | null;
}

/** The root of a chain: the envelope signer (docs/capabilities.md). */
export interface CapabilityRoot {
  keyId: string;
  algorithm: 'ECDSA_P256_SHA256' | 'ED25519';
  authority: 'service' | 'namespace';
  /** `ed25519/<hex>`: the Biscuit projection's root public key, derived from the signer. */
  biscuitRootKey: string;
}

/** Mirrors docs/predicates/capability.schema.json. */
export interface CapabilityPredicate {
  runId: string;
  stepId: string;
  /** n: position of the token among the step's tokens, from 0. */
  index: number;
  /** Root authority first, the step's own grant last. */
  chain: CapabilityLink[];
  /** Absent only in records made before chains had roots. */
  root?: CapabilityRoot;
}

export interface CapabilityInput {
  runId: string;
  stepId: string;
  index: number;
  chain: readonly { scope: string; grantedBy: string; approvedBy?: string | null }[];
  root?: CapabilityRoot;
}

/** Subject `capability:<runId>:<stepId>:<n>`; digest: SHA-256 of the JCS canonical JSON of the chain. */
export function capabilitySubject(predicate: CapabilityPredicate): Subject {
  return {
    digest: { sha256: jcsSha256Hex(predicate.chain) },
    name: subjectNames.capability(predicate.runId, predicate.stepId, predicate.index),
  };
}

export function capabilityStatement(
  input: CapabilityInput,
): Statement<CapabilityPredicate, typeof PredicateTypes.capability> {
  // Members in JCS order (makeStatement says why).
  const predicate: CapabilityPredicate = {
    chain: input.chain.map((link) => ({
      approvedBy: link.approvedBy ?? null,
      grantedBy: link.grantedBy,
      scope: link.scope,
    })),
    index: input.index,
    ...(input.root !== undefined
      ? {
          root: {
            algorithm: input.root.algorithm,
            authority: input.root.authority,
            biscuitRootKey: input.root.biscuitRootKey,
            keyId: input.root.keyId,
          },
        }
      : {}),
    runId: input.runId,
    stepId: input.stepId,
  };
  return buildStatement(PredicateTypes.capability, predicate, capabilitySubject);
}
