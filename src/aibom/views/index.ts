/** The standard views of an AIBOM (CycloneDX 1.7 with CDXA, SPDX 3.0.1): pure builders and checks. */
export { AI_ACT_STANDARD_REF, AI_ACT_URL, PROVISIONS } from './ai-act.ts';
export { ASSESSOR_REF, evidenceRef, type CdxDeclarations, type CdxStandard } from './cdxa.ts';
export {
  CYCLONEDX_17_SCHEMA_URL,
  cyclonedx17SerialNumber,
  datasetRef,
  toCycloneDx17,
  type CycloneDx17Bom,
} from './cyclonedx17.ts';
export {
  buildView,
  buildViews,
  isViewFormat,
  prettyView,
  serializeView,
  VIEW_FORMAT_NAMES,
  VIEW_FORMATS,
  type BuiltView,
  type ViewDocument,
  type ViewFormat,
} from './format.ts';
export { standardRef } from './guardrails.ts';
export {
  checkViewInput,
  spdxTime,
  utcTime,
  viewRecordOf,
  type StoredRecordLike,
  type ViewInput,
  type ViewRecord,
} from './input.ts';
export {
  NO_ASSERTION_LICENSE,
  NOASSERTION,
  SPDX_CONTEXT,
  SPDX_SPEC_VERSION,
  spdxNamespace,
  toSpdx3,
  UNKNOWN_TIME,
  type Spdx3Document,
  type SpdxElement,
} from './spdx3.ts';
export { declarationProblems, evidenceRecord, spdxProfileProblems, type ViewProblem } from './check.ts';
export { validateCycloneDx17 } from './validate.ts';
export {
  verifyView,
  verifyViews,
  type ViewCheckInput,
  type ViewCheckProblem,
  type ViewPart,
} from './verify.ts';
