import { PredicateTypes, type PredicateType, type Subject } from '../statement.ts';
import { artifactSubject, type ArtifactPredicate } from './artifact.ts';
import { capabilitySubject, type CapabilityPredicate } from './capability.ts';
import { policySubject, type PolicyPredicate } from './policy.ts';
import { RUN_BUILD_TYPE, runSubject, type ProvenancePredicate } from './provenance.ts';
import { stepSubject, type StepPredicate } from './step.ts';

/**
 * The subject a statement of this type must carry, derived from its (schema-valid) predicate with
 * the builders' own functions; undefined when it cannot be derived (AIBOM and its views: digest of stored or canonical bytes;
 * SLSA provenance of another buildType). Call only after the predicate passed its schema.
 */
export function expectedSubject(predicateType: PredicateType, predicate: unknown): Subject | undefined {
  switch (predicateType) {
    case PredicateTypes.step:
      return stepSubject(predicate as StepPredicate);
    case PredicateTypes.policy:
      return policySubject(predicate as PolicyPredicate);
    case PredicateTypes.artifact:
      return artifactSubject(predicate as ArtifactPredicate);
    case PredicateTypes.capability:
      return capabilitySubject(predicate as CapabilityPredicate);
    case PredicateTypes.provenance: {
      const p = predicate as ProvenancePredicate;
      return p.buildDefinition.buildType === RUN_BUILD_TYPE ? runSubject(p) : undefined;
    }
    case PredicateTypes.aibom:
    case PredicateTypes.spdx:
      return undefined;
  }
}
