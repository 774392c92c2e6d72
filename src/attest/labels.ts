import type { JsonValue } from './json.ts';
import type { Statement } from './statement.ts';

/**
 * The vault labels of a record, signed inside its statement (ADR 0007). The vault indexes every
 * record by namespace, kind, run, step, subjects, policy pack and capability tokens, and the
 * namespace decides who may read it; a label outside the signature could be rewritten in the
 * database to move one tenant's record into another's results. So the labels travel in the signed
 * in-toto statement, as an annotation of its first subject (`ResourceDescriptor.annotations`, part
 * of in-toto Statement v1: cosign and other in-toto consumers accept it), and every column the
 * vault indexes is derived from the signed statement by {@link recordIndex}, the one function the
 * recorder stores with and every reader checks against.
 */

/** The annotation key (on `subject[0].annotations`) holding the labels. */
export const RECORD_LABELS_ANNOTATION = 'vault.service.dev/record';

export interface RecordLabels {
  readonly namespace: string;
  /** The vault kind: run, step, artifact, policy, capability, aibom. */
  readonly kind: string;
  readonly run_id?: string;
  readonly step_id?: string;
  readonly policy_pack?: string;
  readonly policy_version?: string;
  /** Capability subjects the record is about or was authorised by, in order, without repeats. */
  readonly capability_token_ids?: readonly string[];
}

/** Every column the vault indexes a record by (snake case: the API's names). */
export interface RecordIndex {
  readonly namespace: string;
  readonly kind: string;
  readonly run_id: string | null;
  readonly step_id: string | null;
  /** The statement's subject names. */
  readonly subjects: readonly string[];
  /** `sha256:<hex>` of the subjects of artifact and AIBOM records (digests of stored bytes). */
  readonly artifact_digests: readonly string[];
  readonly predicate_type: string;
  readonly policy_pack: string | null;
  readonly policy_version: string | null;
  readonly capability_token_ids: readonly string[];
}

/** Kinds whose subject digests are digests of stored bytes, indexed as artifact digests. */
const ARTIFACT_KINDS = new Set(['artifact', 'aibom']);

/** `statement` with `labels` annotated on its first subject (nothing else changes). */
export function labelStatement<S extends Statement>(statement: S, labels: RecordLabels): S {
  const [first, ...rest] = statement.subject;
  if (first === undefined) throw new TypeError('a statement to label needs a subject');
  // Members in JCS order, as the builders write theirs (makeStatement in statement.ts says why).
  const value: { [key: string]: JsonValue } = {};
  if (labels.capability_token_ids !== undefined && labels.capability_token_ids.length > 0) {
    value.capability_token_ids = [...new Set(labels.capability_token_ids)];
  }
  value.kind = labels.kind;
  value.namespace = labels.namespace;
  for (const key of ['policy_pack', 'policy_version', 'run_id', 'step_id'] as const) {
    const v = labels[key];
    if (v !== undefined) value[key] = v;
  }
  const { annotations, ...described } = first;
  return {
    ...statement,
    subject: [{ annotations: { ...annotations, [RECORD_LABELS_ANNOTATION]: value }, ...described }, ...rest],
  };
}

const isRecord = (v: unknown): v is Record<string, unknown> =>
  typeof v === 'object' && v !== null && !Array.isArray(v);

/**
 * The labels signed in `statement`, or undefined when it carries none (records made before labels
 * were signed) or carries a malformed value (which no verifier may take as a label).
 */
export function signedLabels(statement: unknown): RecordLabels | undefined {
  if (!isRecord(statement) || !Array.isArray(statement.subject)) return undefined;
  const first: unknown = statement.subject[0];
  if (!isRecord(first) || !isRecord(first.annotations)) return undefined;
  const v = first.annotations[RECORD_LABELS_ANNOTATION];
  if (!isRecord(v) || typeof v.namespace !== 'string' || typeof v.kind !== 'string') return undefined;
  const out: { -readonly [K in keyof RecordLabels]: RecordLabels[K] } = {
    namespace: v.namespace,
    kind: v.kind,
  };
  for (const key of ['run_id', 'step_id', 'policy_pack', 'policy_version'] as const) {
    const x = v[key];
    if (x === undefined) continue;
    if (typeof x !== 'string') return undefined;
    out[key] = x;
  }
  const caps = v.capability_token_ids;
  if (caps !== undefined) {
    if (!Array.isArray(caps) || !caps.every((c) => typeof c === 'string')) return undefined;
    out.capability_token_ids = caps;
  }
  return out;
}

/** The columns of a record: everything from the (labelled) statement, nothing from elsewhere. */
export function recordIndex(statement: Statement, labels: RecordLabels): RecordIndex {
  const subjects = statement.subject.map((s) => s.name);
  return {
    namespace: labels.namespace,
    kind: labels.kind,
    run_id: labels.run_id ?? null,
    step_id: labels.step_id ?? null,
    subjects,
    artifact_digests: ARTIFACT_KINDS.has(labels.kind)
      ? statement.subject.flatMap((s) => (s.digest.sha256 !== undefined ? [`sha256:${s.digest.sha256}`] : []))
      : [],
    predicate_type: statement.predicateType,
    policy_pack: labels.policy_pack ?? null,
    policy_version: labels.policy_version ?? null,
    capability_token_ids: [...new Set(labels.capability_token_ids ?? [])],
  };
}

/** A stored record's index columns as a reader holds them; absent fields are not compared. */
export type IndexedRecord = { readonly [K in keyof RecordIndex]?: RecordIndex[K] | undefined };

function same(a: unknown, b: unknown): boolean {
  if (Array.isArray(a) && Array.isArray(b)) return a.length === b.length && a.every((x, i) => x === b[i]);
  return a === b;
}

/**
 * The index fields of `record` that differ from what `statement` signs, by name (empty when all
 * agree). With signed labels every field present is compared; a statement without labels (made
 * before they were signed) binds only its subjects and predicate type, so only those are.
 */
export function labelMismatches(record: IndexedRecord, statement: Statement): (keyof RecordIndex)[] {
  const labels = signedLabels(statement);
  const subjects = statement.subject.map((s) => s.name);
  const expected: Partial<RecordIndex> =
    labels !== undefined
      ? recordIndex(statement, labels)
      : { subjects, predicate_type: statement.predicateType };
  const out: (keyof RecordIndex)[] = [];
  for (const key of Object.keys(expected) as (keyof RecordIndex)[]) {
    const actual = record[key];
    if (actual === undefined) continue;
    if (!same(actual, expected[key])) out.push(key);
  }
  return out;
}
