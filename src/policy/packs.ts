import type { PolicyPackRef, RunSpec, StepSpec } from '../crd/run.ts';
import { PolicyError } from './errors.ts';

/**
 * Policy-pack resolution: which pack (and version) governs a run and each of its steps, and the
 * packs a run uses with their guardrails. One definition, read by the AIBOM builder (metadata and
 * `components.policies[]`) and by the recorder (the pack of step and policy attestations), so the
 * two never disagree. Pure.
 */

/** `PACK[@VERSION]`, as `--policy-pack` takes it. */
export interface PackOverride {
  name: string;
  version?: string;
}

/** A pack in use, as `components.policies[]` lists it. */
export interface PackComponent {
  pack: string;
  version: string;
  /** Sorted (UTF-16 code units, as JCS sorts keys), without duplicates. */
  guardrails: string[];
}

/** The pack recorded when neither the override, the run nor any step names one. */
export const DEFAULT_POLICY_PACK = 'baseline';

/** The version recorded for a pack whose reference carries none (or an empty one). */
export const UNVERSIONED = 'unversioned';

/**
 * Guardrails recorded for the `baseline` pack (any version) when no reference in the spec lists
 * any for it. Frozen: `service-ctl aibom generate` must reproduce the bytes stored for old runs, so
 * changing this list changes the regenerated BOM of every run that relied on it. Sorted.
 */
export const BASELINE_GUARDRAILS: readonly string[] = Object.freeze([
  'content-safety-filter',
  'pii-redaction',
  'prompt-injection-detection',
  'secret-detection',
]);

const MAX_NAME = 253;
const MAX_VERSION = 128;
// No `@` (it separates the version), no whitespace, no control characters: a pack must print as
// one unambiguous `PACK@VERSION` token, the form of policy subjects (`policy:<pack>@<version>`).
const TOKEN = /^[^@\s\p{Cc}]+$/u;

/** A pack as the BOM records it: both parts always present. */
export interface ResolvedPack {
  name: string;
  version: string;
}

function checkName(name: string, where: string): void {
  if (name.length === 0 || name.length > MAX_NAME || !TOKEN.test(name)) {
    throw new PolicyError(
      'INVALID_POLICY_PACK',
      `${where}: policy pack name ${JSON.stringify(name)} must be 1-${MAX_NAME} characters without '@', whitespace or control characters`,
    );
  }
}

function checkVersion(version: string, where: string): void {
  if (version.length > MAX_VERSION || !TOKEN.test(version)) {
    throw new PolicyError(
      'INVALID_POLICY_PACK',
      `${where}: policy pack version ${JSON.stringify(version)} must be 1-${MAX_VERSION} characters without '@', whitespace or control characters`,
    );
  }
}

/**
 * Parses `--policy-pack PACK[@VERSION]`. Rejects (PolicyError INVALID_POLICY_PACK) an empty string,
 * an empty pack or version (`@1`, `pack@`), more than one `@`, whitespace and control characters.
 */
export function parsePolicyPackRef(text: string): PackOverride {
  const at = text.indexOf('@');
  const name = at === -1 ? text : text.slice(0, at);
  checkName(name, '--policy-pack');
  if (at === -1) return { name };
  const version = text.slice(at + 1);
  if (version.length === 0) {
    throw new PolicyError('INVALID_POLICY_PACK', `--policy-pack ${JSON.stringify(text)}: empty version`);
  }
  checkVersion(version, '--policy-pack');
  return { name, version };
}

/** The version a reference declares; the CRD allows `""`, which counts as none. */
function declaredVersion(ref: { version?: string | undefined }, where: string): string | undefined {
  if (ref.version === undefined || ref.version === '') return undefined;
  checkVersion(ref.version, where);
  return ref.version;
}

function stepRefs(spec: RunSpec): { step: StepSpec; ref: PolicyPackRef }[] {
  return spec.steps.flatMap((step) =>
    step.policyPack !== undefined ? [{ step, ref: step.policyPack }] : [],
  );
}

/**
 * The packs of a run: `run` is what its records and AIBOM name as the run's pack
 * (`metadata.policy_pack` / `policy_pack_version`), `inherited` what a step without a `policyPack`
 * of its own follows.
 */
export interface PackContext {
  readonly run: ResolvedPack;
  readonly inherited: ResolvedPack;
}

/**
 * A reference of the spec as a pack: its own version, else the version of the first of `against`
 * with the same name (a step saying `strict` in a run pinned to `strict@2` means `strict@2`), else
 * UNVERSIONED.
 */
function resolveRef(
  ref: PolicyPackRef,
  against: readonly (ResolvedPack | undefined)[],
  where: string,
): ResolvedPack {
  checkName(ref.name, where);
  const version = declaredVersion(ref, where);
  if (version !== undefined) return { name: ref.name, version };
  return { name: ref.name, version: against.find((p) => p?.name === ref.name)?.version ?? UNVERSIONED };
}

/** The override as a pack: its version, else the first versioned reference to it in the spec. */
function resolveOverride(spec: RunSpec, override: PackOverride): ResolvedPack {
  checkName(override.name, 'policy pack override');
  const own = declaredVersion(override, 'policy pack override');
  if (own !== undefined) return { name: override.name, version: own };
  const refs = [
    ...(spec.policyPack !== undefined ? [spec.policyPack] : []),
    ...stepRefs(spec).map((r) => r.ref),
  ];
  for (const ref of refs) {
    const version = ref.name === override.name ? declaredVersion(ref, 'spec') : undefined;
    if (version !== undefined) return { name: override.name, version };
  }
  return { name: override.name, version: UNVERSIONED };
}

/**
 * The run's pack (the spec: "default is the pack found in the step specs, else baseline"; docs/aibom.md,
 * "Policy packs"). A run-level `spec.policyPack` is the pack of every step spec that names none of
 * its own (what the CRD says: a step's pack is "its own, when it differs from the run's"); then:
 * 1. the override (`--policy-pack`); without a version it takes the version of the first reference
 *    in the spec with the same name that has one (run-level, then steps in spec order);
 * 2. the pack found in the step specs: that of the first step spec (spec order) that has one, its
 *    own or, with a run-level pack, the run-level one (so with a run-level pack, the first step's);
 * 3. the run-level pack (a run without steps);
 * 4. DEFAULT_POLICY_PACK.
 * A step without a `policyPack` follows the override, else the run-level pack, else the run's.
 * Versions: a reference's own, else the run-level pack's when the names match, else UNVERSIONED.
 */
export function packContext(spec: RunSpec, override?: PackOverride): PackContext {
  if (override !== undefined) {
    const pack = resolveOverride(spec, override);
    return { run: pack, inherited: pack };
  }
  const level = spec.policyPack !== undefined ? resolveRef(spec.policyPack, [], 'spec') : undefined;
  const first = level !== undefined ? spec.steps[0] : stepRefs(spec)[0]?.step;
  const fromSteps =
    first === undefined
      ? undefined
      : first.policyPack !== undefined
        ? resolveRef(first.policyPack, [level], `step ${first.id}`)
        : level;
  const run = fromSteps ?? level ?? { name: DEFAULT_POLICY_PACK, version: UNVERSIONED };
  return { run, inherited: level ?? run };
}

/** The run's pack (`metadata.policy_pack` / `policy_pack_version`): {@link packContext}'s `run`. */
export function resolveRunPack(spec: RunSpec, override?: PackOverride): ResolvedPack {
  return packContext(spec, override).run;
}

/**
 * The pack governing a step: its own reference (its version, else that of the inherited or the
 * run's pack of the same name), else the inherited pack.
 */
export function resolveStepPack(step: StepSpec, packs: PackContext): ResolvedPack {
  return step.policyPack !== undefined
    ? resolveRef(step.policyPack, [packs.inherited, packs.run], `step ${step.id}`)
    : packs.inherited;
}

const keyOf = (p: ResolvedPack): string => JSON.stringify([p.name, p.version]);

const sortedUnique = (values: Iterable<string>): string[] =>
  // Default sort compares UTF-16 code units, the order JCS uses for keys.
  [...new Set(values)].sort();

/**
 * `components.policies[]`: one entry per distinct pack@version in use, the run's pack first, then
 * the run-level pack (unless overridden), then the step packs in spec order of first use.
 * Guardrails of an entry: the union of the `guardrails` of every reference in the spec (run-level
 * and step-level) that resolves to that pack@version, sorted and deduplicated; BASELINE_GUARDRAILS
 * for `baseline` when that union is empty. A run-level reference replaced by the override is not in
 * use, but still contributes guardrails when it resolves to the same pack@version.
 */
export function policyComponents(spec: RunSpec, packs: PackContext): PackComponent[] {
  const used = new Map<string, ResolvedPack>([[keyOf(packs.run), packs.run]]);
  if (!used.has(keyOf(packs.inherited))) used.set(keyOf(packs.inherited), packs.inherited);
  for (const step of spec.steps) {
    const pack = resolveStepPack(step, packs);
    if (!used.has(keyOf(pack))) used.set(keyOf(pack), pack);
  }
  const declared = new Map<string, string[]>();
  const refs = [
    ...(spec.policyPack !== undefined ? [{ ref: spec.policyPack, where: 'spec' }] : []),
    ...stepRefs(spec).map(({ step, ref }) => ({ ref, where: `step ${step.id}` })),
  ];
  for (const { ref, where } of refs) {
    const key = keyOf(resolveRef(ref, [packs.inherited, packs.run], where));
    declared.set(key, [...(declared.get(key) ?? []), ...(ref.guardrails ?? [])]);
  }
  return [...used].map(([key, pack]) => {
    const guardrails = sortedUnique(declared.get(key) ?? []);
    return {
      pack: pack.name,
      version: pack.version,
      guardrails:
        guardrails.length === 0 && pack.name === DEFAULT_POLICY_PACK ? [...BASELINE_GUARDRAILS] : guardrails,
    };
  });
}
