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
    ...(input.root !== undefined
      ? {
          root: {
            keyId: input.root.keyId,
            algorithm: input.root.algorithm,
            authority: input.root.authority,
            biscuitRootKey: input.root.biscuitRootKey,
          },
        }
      : {}),
  };
  return buildStatement(PredicateTypes.capability, predicate, capabilitySubject);
}
