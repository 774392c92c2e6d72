import { canonicalJson } from '../attest/json.ts';
import { leafHash } from '../transparency/merkle.ts';

/**
 * The leaf of a record in the vault's Merkle tree (ADR 0008): RFC 9162 leaf hash
 * SHA-256(0x00 || entry), where the entry is the UTF-8 RFC 8785 JSON of the record's position,
 * identity, envelope digest and the labels that decide who sees it:
 *
 *   {"created_at", "digest", "id", "kind", "namespace", "run_id", "seq", "step_id", "subjects",
 *    "type": "https://vault.service.dev/chain/leaf/v1"}
 *
 * Every field is in the API's envelope under the same name, so a client recomputes the leaf of any
 * record it may read; of the others it sees only the leaf hash, which reveals nothing (the digest
 * covers a randomised signature). The digest binds the envelope, hence the signed statement.
 */

export const LEAF_TYPE = 'https://vault.service.dev/chain/leaf/v1';

export interface LeafFields {
  readonly seq: number;
  readonly id: string;
  readonly digest: string;
  readonly namespace: string;
  readonly kind: string;
  readonly run_id: string | null;
  readonly step_id: string | null;
  readonly subjects: readonly string[];
  /** RFC 3339 with milliseconds, UTC (`Date.prototype.toISOString`), as the API serves it. */
  readonly created_at: string;
}

/** The entry bytes of a record's leaf. */
export function leafEntry(f: LeafFields): Buffer {
  return Buffer.from(
    canonicalJson({
      created_at: f.created_at,
      digest: f.digest,
      id: f.id,
      kind: f.kind,
      namespace: f.namespace,
      run_id: f.run_id,
      seq: f.seq,
      step_id: f.step_id,
      subjects: [...f.subjects],
      type: LEAF_TYPE,
    }),
    'utf8',
  );
}

/** RFC 9162 leaf hash of a record. */
export function recordLeafHash(f: LeafFields): Buffer {
  return leafHash(leafEntry(f));
}

const isString = (v: unknown): v is string => typeof v === 'string';

/**
 * The leaf fields of a record as the API serves it (GET /v1/attestations/{id}, query items), or
 * undefined when a field is missing or of the wrong type.
 */
export function leafFieldsOfApiRecord(r: Record<string, unknown>): LeafFields | undefined {
  const { seq, id, digest, namespace, kind, run_id, step_id, subjects, created_at } = r;
  if (typeof seq !== 'number' || !Number.isSafeInteger(seq)) return undefined;
  if (!isString(id) || !isString(digest) || !isString(namespace) || !isString(kind) || !isString(created_at))
    return undefined;
  if (!(run_id === null || isString(run_id)) || !(step_id === null || isString(step_id))) return undefined;
  if (!Array.isArray(subjects) || !subjects.every(isString)) return undefined;
  return { seq, id, digest, namespace, kind, run_id, step_id, subjects, created_at };
}
