import type { RunSpec } from '../crd/run.ts';
import { packContext, policyComponents, type ResolvedPack } from './packs.ts';

/**
 * PolicyPack resources (crds/vault.service.dev_policypacks.yaml) and how a Run's pack is matched
 * against them: which resource describes the pack a Run names, what that pack requires, and what
 * the Run declared. Pure: the resources are read elsewhere (src/http/sources/policy-packs.ts) and passed in.
 *
 * Nothing here feeds the AIBOM: the BOM keeps recording the guardrails the Run declares, so
 * `service-ctl aibom generate` reproduces stored BOMs byte for byte whatever packs exist later.
 */

/** The parts of a PolicyPack resource this service reads. */
export interface PolicyPackResource {
  readonly metadata: { readonly name: string; readonly creationTimestamp?: string };
  readonly spec: {
    readonly pack: string;
    readonly version?: string;
    readonly description?: string;
    readonly guardrails?: readonly string[];
    readonly minimumRetention: string;
    readonly notice: string;
  };
}

/** ISO 8601 duration of calendar units, as the CRD admits it (`P7Y`, `P1Y6M`, `P90D`). */
export interface Retention {
  readonly years: number;
  readonly months: number;
  readonly weeks: number;
  readonly days: number;
}

const RETENTION = /^P(?:(\d{1,4})Y)?(?:(\d{1,4})M)?(?:(\d{1,4})W)?(?:(\d{1,5})D)?$/;

/** Parses a `minimumRetention`; undefined for anything the CRD would refuse. */
export function parseRetention(text: string): Retention | undefined {
  const m = RETENTION.exec(text);
  if (!m || text === 'P') return undefined;
  const n = (s: string | undefined): number => (s === undefined ? 0 : Number(s));
  return { years: n(m[1]), months: n(m[2]), weeks: n(m[3]), days: n(m[4]) };
}

/** `P1Y6M` → `1 year, 6 months`. */
export function describeRetention(r: Retention): string {
  const parts: string[] = [];
  const add = (n: number, unit: string) => {
    if (n > 0) parts.push(`${n} ${unit}${n === 1 ? '' : 's'}`);
  };
  add(r.years, 'year');
  add(r.months, 'month');
  add(r.weeks, 'week');
  add(r.days, 'day');
  return parts.length > 0 ? parts.join(', ') : '0 days';
}

/**
 * The earliest day evidence exported on `from` may be discarded: calendar addition in UTC, years and
 * months first (the day clamped to the month's length, 29 February + 1 year = 28 February), then
 * weeks and days. Returns `YYYY-MM-DD`.
 */
export function retainUntil(from: Date, r: Retention): string {
  const y = from.getUTCFullYear() + r.years;
  const m0 = from.getUTCMonth() + r.months;
  const year = y + Math.floor(m0 / 12);
  const month = ((m0 % 12) + 12) % 12;
  const lastDay = new Date(Date.UTC(year, month + 1, 0)).getUTCDate();
  const day = Math.min(from.getUTCDate(), lastDay);
  const base = Date.UTC(year, month, day);
  const end = new Date(base + (r.weeks * 7 + r.days) * 86_400_000);
  return end.toISOString().slice(0, 10);
}

/**
 * The resource describing `pack`: one with the same pack name and version, else one with the same
 * pack name and no version (it stands for every version without a resource of its own). Among
 * several equal candidates (two resources claiming the same pack@version) the oldest wins, then the
 * smallest name, so every replica picks the same one; the others are reported as `conflicting`.
 */
export function matchPackResource(
  pack: ResolvedPack,
  resources: readonly PolicyPackResource[],
): { resource: PolicyPackResource | undefined; conflicting: string[] } {
  const order = (a: PolicyPackResource, b: PolicyPackResource): number => {
    const ta = a.metadata.creationTimestamp ?? '';
    const tb = b.metadata.creationTimestamp ?? '';
    if (ta !== tb) return ta < tb ? -1 : 1;
    return a.metadata.name < b.metadata.name ? -1 : a.metadata.name > b.metadata.name ? 1 : 0;
  };
  const same = resources.filter((r) => r.spec.pack === pack.name);
  for (const candidates of [
    same.filter((r) => r.spec.version === pack.version),
    same.filter((r) => r.spec.version === undefined || r.spec.version === ''),
  ]) {
    if (candidates.length > 0) {
      const [first, ...rest] = [...candidates].sort(order);
      return { resource: first, conflicting: rest.map((r) => r.metadata.name) };
    }
  }
  return { resource: undefined, conflicting: [] };
}

/** The `policy_pack` of GET /v1/runs/{id}: the run's pack, the resource describing it, and the relation. */
export interface RunPolicyPack {
  /** The run's pack as its records name it (metadata.policy_pack of the AIBOM). */
  name: string;
  version: string;
  /**
   * `resolved`: a PolicyPack describes it; `not_found`: none does (no retention is defined);
   * `unavailable`: the resources could not be read (the API server did not answer).
   */
  status: 'resolved' | 'not_found' | 'unavailable';
  /** Guardrails the Run declares for this pack (what its AIBOM records in components.policies[]). */
  declared_guardrails: string[];
  resource: {
    /** metadata.name of the PolicyPack. */
    name: string;
    pack: string;
    /** null: the resource describes every version without a resource of its own. */
    version: string | null;
    description: string | null;
    guardrails: string[];
    minimum_retention: string;
    /** `minimum_retention` in words (`1 year, 6 months`). */
    minimum_retention_text: string;
    notice: string;
    /** Other resources claiming the same pack@version (the oldest wins). */
    conflicting: string[];
  } | null;
  /** The pack's guardrails the Run does not declare (sorted); empty without a resource. */
  missing_guardrails: string[];
}

/** The run's pack, resolved against `resources` (undefined: they could not be read). */
export function runPolicyPack(
  spec: RunSpec,
  resources: readonly PolicyPackResource[] | undefined,
): RunPolicyPack {
  const packs = packContext(spec);
  const pack = packs.run;
  // The run's pack is always first in components.policies[]: what the AIBOM records for it.
  const declared = policyComponents(spec, packs)[0]?.guardrails ?? [];
  const base = { name: pack.name, version: pack.version, declared_guardrails: [...declared] };
  if (resources === undefined) {
    return { ...base, status: 'unavailable', resource: null, missing_guardrails: [] };
  }
  const { resource, conflicting } = matchPackResource(pack, resources);
  if (resource === undefined) return { ...base, status: 'not_found', resource: null, missing_guardrails: [] };
  const required = [...new Set(resource.spec.guardrails ?? [])].sort();
  const retention = parseRetention(resource.spec.minimumRetention);
  return {
    ...base,
    status: 'resolved',
    resource: {
      name: resource.metadata.name,
      pack: resource.spec.pack,
      version: resource.spec.version ?? null,
      description: resource.spec.description ?? null,
      guardrails: required,
      minimum_retention: resource.spec.minimumRetention,
      minimum_retention_text:
        retention !== undefined ? describeRetention(retention) : resource.spec.minimumRetention,
      notice: resource.spec.notice,
      conflicting,
    },
    missing_guardrails: required.filter((g) => !declared.includes(g)),
  };
}
