/**
 * Pure helpers for `metav1.Condition` lists with Kubernetes semantics (cert-manager's
 * `apiutil.SetCertificateCondition`, apimachinery's `meta.SetStatusCondition`).
 *
 * Invariants:
 * - At most one condition per `type`; setting a type replaces its entry in place (order is kept).
 * - `lastTransitionTime` moves only when `status` flips; a new reason, message or generation
 *   with the same status keeps it. That is what makes it answer "since when is this true".
 * - Inputs are never mutated: callers compare the old and new lists to decide whether a status
 *   write is needed at all (`conditionsEqual`).
 */

export type ConditionStatus = 'True' | 'False' | 'Unknown';

export interface Condition {
  type: string;
  status: ConditionStatus;
  observedGeneration?: number;
  /** RFC 3339 with second precision, as the API server stores `metav1.Time`. */
  lastTransitionTime: string;
  /** CamelCase, machine-readable. */
  reason: string;
  message: string;
}

export interface ConditionInput {
  type: string;
  status: ConditionStatus;
  reason: string;
  message: string;
  observedGeneration?: number;
}

/**
 * `metav1.Time` is serialised with second precision; writing milliseconds would make the value read
 * back differ from the one written, and a controller comparing them would write status forever.
 */
export function formatConditionTime(d: Date): string {
  return d.toISOString().replace(/\.\d{3}Z$/, 'Z');
}

export function findCondition(
  conditions: readonly Condition[] | undefined,
  type: string,
): Condition | undefined {
  return conditions?.find((c) => c.type === type);
}

export function setCondition(
  conditions: readonly Condition[] | undefined,
  input: ConditionInput,
  now: Date,
): Condition[] {
  const list = [...(conditions ?? [])];
  const i = list.findIndex((c) => c.type === input.type);
  const existing = i >= 0 ? list[i] : undefined;
  const next: Condition = {
    type: input.type,
    status: input.status,
    ...(input.observedGeneration !== undefined ? { observedGeneration: input.observedGeneration } : {}),
    lastTransitionTime:
      existing !== undefined && existing.status === input.status
        ? existing.lastTransitionTime
        : formatConditionTime(now),
    reason: input.reason,
    message: input.message,
  };
  if (i >= 0) list[i] = next;
  else list.push(next);
  return list;
}

export function removeCondition(conditions: readonly Condition[] | undefined, type: string): Condition[] {
  return (conditions ?? []).filter((c) => c.type !== type);
}

export function isTrue(conditions: readonly Condition[] | undefined, type: string): boolean {
  return findCondition(conditions, type)?.status === 'True';
}

export function isFalse(conditions: readonly Condition[] | undefined, type: string): boolean {
  return findCondition(conditions, type)?.status === 'False';
}

/**
 * Same set of conditions with the same fields, ignoring order (the CRD declares conditions a
 * list-map keyed by `type`, so order carries no meaning and the server may not preserve it).
 */
export function conditionsEqual(
  a: readonly Condition[] | undefined,
  b: readonly Condition[] | undefined,
): boolean {
  const x = a ?? [];
  const y = b ?? [];
  if (x.length !== y.length) return false;
  return x.every((c) => {
    const d = findCondition(y, c.type);
    return (
      d !== undefined &&
      d.status === c.status &&
      d.reason === c.reason &&
      d.message === c.message &&
      d.lastTransitionTime === c.lastTransitionTime &&
      d.observedGeneration === c.observedGeneration
    );
  });
}
