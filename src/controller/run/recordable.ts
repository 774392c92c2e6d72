import type { Run } from '../../crd/run.ts';

/**
 * How deep the free-form JSON of a Run (`spec.inputs`, `spec.steps[].inputs`,
 * `status.steps[].output`) may nest to be recorded (docs/runs.md). The API server admits up to
 * ~10,000 levels and no admission rule can measure depth (CEL has no recursion, and a regex over the
 * printed value is beyond the cost budget), while every JSON walker of the recording path
 * (`JSON.stringify` in V8 stops near 4,500, JCS, structural comparison, the drivers) and of the
 * verifiers downstream is recursive. 64 levels is far beyond what inputs and outputs hold in
 * practice and far below where any of those stops.
 */
export const MAX_JSON_DEPTH = 64;

/**
 * Depth of `value` (a scalar is 0, `{}`/`[]` 1, `[[1]]` 2), counted without recursion and only up to
 * `limit + 1`: a value nested 10,000 deep costs no more than one nested `limit + 1` deep.
 */
export function jsonDepthOver(value: unknown, limit: number): boolean {
  const stack: { v: unknown; d: number }[] = [{ v: value, d: 0 }];
  while (stack.length > 0) {
    const { v, d } = stack.pop()!;
    if (typeof v !== 'object' || v === null) continue;
    const depth = d + 1;
    if (depth > limit) return true;
    for (const child of Array.isArray(v) ? v : Object.values(v)) {
      if (typeof child === 'object' && child !== null) stack.push({ v: child, d: depth });
    }
  }
  return false;
}

/**
 * Why the Run cannot be recorded as admitted (a fixed-text message naming the field), or null.
 * Checked before anything walks the Run's JSON: a Run deeper than the bound would overflow the
 * stack of the walkers and be retried for ever under a misleading reason.
 */
export function unrecordable(run: Run): string | null {
  const fields: [string, unknown][] = [
    ['spec.inputs', run.spec.inputs],
    ...(run.spec.steps ?? []).map((s): [string, unknown] => [`spec.steps[id=${s.id}].inputs`, s.inputs]),
    ...(run.status?.steps ?? []).map((s): [string, unknown] => [`status.steps[id=${s.id}].output`, s.output]),
  ];
  for (const [field, value] of fields) {
    if (value !== undefined && jsonDepthOver(value, MAX_JSON_DEPTH)) {
      return (
        `${field} nests JSON more than ${MAX_JSON_DEPTH} levels deep: the vault records at most ` +
        `${MAX_JSON_DEPTH} (docs/runs.md); this Run cannot be attested, create a new one`
      );
    }
  }
  return null;
}
