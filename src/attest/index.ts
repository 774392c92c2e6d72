/** Public API of the attestation library (pure: no I/O). */
export { envelopeDigest, DIGEST_PATTERN } from './digest.ts';
export {
  IN_TOTO_PAYLOAD_TYPE,
  decodeBase64Strict,
  signPayload,
  signStatement,
  statementPayload,
  type DsseEnvelope,
  type DsseSignature,
} from './dsse.ts';
export {
  AttestError,
  VerificationError,
  type AttestErrorCode,
  type Problem,
  type ProblemCode,
} from './errors.ts';
export { canonicalJson, jcsSha256Hex, sha256Hex, type JsonObject, type JsonValue } from './json.ts';
export {
  labelMismatches,
  labelStatement,
  RECORD_LABELS_ANNOTATION,
  recordIndex,
  signedLabels,
  type IndexedRecord,
  type RecordIndex,
  type RecordLabels,
} from './labels.ts';
export { preAuthEncoding } from './pae.ts';
export {
  aibomStatement,
  viewStatement,
  type AibomInput,
  type ViewStatementInput,
} from './predicates/aibom.ts';
export {
  artifactStatement,
  artifactSubject,
  type ArtifactInput,
  type ArtifactPredicate,
} from './predicates/artifact.ts';
export {
  capabilityStatement,
  capabilitySubject,
  type CapabilityInput,
  type CapabilityLink,
  type CapabilityPredicate,
  type CapabilityRoot,
} from './predicates/capability.ts';
export type { PolicyPackRef } from './predicates/common.ts';
export { expectedSubject } from './predicates/index.ts';
export {
  policyStatement,
  policySubject,
  type PolicyDecision,
  type PolicyInput,
  type PolicyPredicate,
} from './predicates/policy.ts';
export {
  CONTROLLER_BUILDER_ID,
  RUN_BUILD_TYPE,
  runStatement,
  runSubject,
  type ModelDependency,
  type ProvenancePredicate,
  type ResourceDescriptor,
  type RunInput,
  type ToolDependency,
} from './predicates/provenance.ts';
export {
  stepStatement,
  stepSubject,
  type ModelRef,
  type StepInput,
  type StepPhase,
  type StepPredicate,
  type ToolRef,
} from './predicates/step.ts';
export { isKnownPredicateType, predicateProblems, statementProblems } from './schemas.ts';
export { sealStatement, type SealedAttestation } from './seal.ts';
export {
  readStream,
  StreamDigest,
  StreamError,
  StreamReader,
  TRAILER_KEY,
  type StreamErrorCode,
  type StreamTrailer,
} from './stream.ts';
export {
  PredicateTypes,
  STATEMENT_TYPE,
  makeStatement,
  subjectNames,
  type DigestSet,
  type PredicateType,
  type Statement,
  type Subject,
} from './statement.ts';
export {
  assertVerified,
  verifyRecord,
  type RecordTimestampCheck,
  type Trust,
  type VerificationResult,
} from './verify.ts';
