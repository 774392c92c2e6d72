/**
 * Public API of the AIBOM module: run + attestation ids → the spec's AIBOM payload, its canonical
 * bytes and digest, the metadata summary, and the strict CycloneDX 1.5 view. Pure except
 * validateCycloneDx (reads the bundled CycloneDX schema). Derivations: docs/aibom.md. Policy-pack
 * resolution is src/policy (the recorder uses it too).
 */
export { aibomRunOf, buildAibom, dagDigest, dagOf, DEFAULT_TEMPERATURE, inputDigest } from './build.ts';
export {
  CYCLONEDX_SCHEMA_URL,
  GENERATOR_NAME,
  PROPERTY_NAMESPACE,
  prettyCycloneDx,
  toCycloneDx,
  type CdxComponent,
  type CdxDependency,
  type CdxHash,
  type CdxProperty,
  type CycloneDxBom,
  type CycloneDxOptions,
} from './cyclonedx.ts';
export { AibomError, type AibomErrorCode } from './errors.ts';
export { aibomDigest, prettyAibom, serializeAibom, summarize } from './serialize.ts';
export type {
  Aibom,
  AibomDigest,
  AibomInput,
  AibomModel,
  AibomPolicy,
  AibomRun,
  AibomStatus,
  AibomSummary,
  AibomTool,
  DagNode,
  PolicyPackOverride,
  TerminalPhase,
} from './types.ts';
export { aibomSerialNumber, nameBasedUuidV8 } from './uuid.ts';
export {
  assertValidCycloneDx,
  validateCycloneDx,
  type CycloneDxProblem,
  type CycloneDxProblemCode,
} from './validate.ts';
