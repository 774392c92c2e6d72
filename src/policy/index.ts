/** Policy packs: resolution of the pack governing a run and its steps, and the packs in use. */
export { PolicyError, type PolicyErrorCode } from './errors.ts';
export {
  BASELINE_GUARDRAILS,
  DEFAULT_POLICY_PACK,
  packContext,
  parsePolicyPackRef,
  policyComponents,
  resolveRunPack,
  resolveStepPack,
  UNVERSIONED,
  type PackComponent,
  type PackContext,
  type PackOverride,
  type ResolvedPack,
} from './packs.ts';
export {
  describeRetention,
  matchPackResource,
  parseRetention,
  retainUntil,
  runPolicyPack,
  type PolicyPackResource,
  type Retention,
  type RunPolicyPack,
} from './pack-resource.ts';
