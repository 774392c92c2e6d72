/**
 * The export-bundle verifier moved to src/verify/ (the room of the "verify" job); these names stay
 * importable from here for the export room's callers and tests.
 */
export {
  MAX_JSONL_LINE,
  verifyBundle,
  type BundleProblem,
  type VerifyBundleOptions,
  type VerifyBundleResult,
} from '../verify/index.ts';
