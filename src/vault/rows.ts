import type {
  AttestationKind,
  CapabilityGrantView,
  DsseEnvelope,
  SignatureMeta,
  StoredAttestation,
} from './types.ts';
import { storedTimestampOf, TIMESTAMP_COLUMN, type TimestampJson } from './timestamps.ts';

/**
 * The stored columns of `attestations`, in table order (migration 0001; no later migration adds
 * one): plain names only, for `COPY attestations (…)` and `COPY (SELECT … ) TO STDOUT` of rows as
 * they are stored. ATTESTATION_COLUMNS below is a read list holding expressions (to_json, the
 * grants and time-stamp subqueries) and cannot name COPY target columns.
 */
export const ATTESTATION_TABLE_COLUMNS =
  'id, seq, namespace, run_id, step_id, kind, subjects, artifact_digests, predicate_type, policy_pack, ' +
  'policy_version, capability_token_ids, envelope, digest, prev_digest, signature, c2pa_manifest_ref, created_at';

/**
 * Column list shared by every read, in table order, then the capability grants of capability and
 * step records that name capabilities (one index lookup each; NULL for every other record, so
 * reads of other kinds pay nothing), then the record's time-stamp. The FROM must name the table
 * `attestations` unaliased. The text[] columns are read as JSON (`to_json`): node-postgres parses
 * JSON natively, its text[] parser is a loop in JavaScript that cost 3–4 µs per row for these
 * three (docs/bench.md, export).
 */
export const ATTESTATION_COLUMNS =
  'id, seq, namespace, run_id, step_id, kind, to_json(subjects) AS subjects, ' +
  'to_json(artifact_digests) AS artifact_digests, predicate_type, policy_pack, policy_version, ' +
  'to_json(capability_token_ids) AS capability_token_ids, envelope, digest, prev_digest, signature, ' +
  'c2pa_manifest_ref, created_at, ' +
  // One plain index lookup per record (its own key column), not an OR of two.
  "CASE WHEN cardinality(capability_token_ids) = 0 THEN NULL WHEN kind = 'capability' THEN " +
  "(SELECT jsonb_build_array(jsonb_build_object('chain', g.chain, 'tokens', g.tokens)) " +
  'FROM capability_grants g WHERE g.capability_attestation_id = attestations.id) ' +
  "WHEN kind = 'step' THEN (SELECT jsonb_agg(jsonb_build_object('chain', g.chain, 'tokens', g.tokens) " +
  'ORDER BY g.capability_attestation_id) FROM capability_grants g WHERE g.step_attestation_id = attestations.id) ' +
  'END AS capability_grants, ' +
  // The signature's RFC 3161 time-stamp (migration 0013): one primary-key probe per record.
  TIMESTAMP_COLUMN;

/** A row as node-postgres returns it (int8 as string, arrays and JSONB parsed). */
export interface AttestationRow {
  id: string;
  seq: string;
  namespace: string;
  run_id: string | null;
  step_id: string | null;
  kind: string;
  subjects: string[];
  artifact_digests: string[];
  predicate_type: string;
  policy_pack: string | null;
  policy_version: string | null;
  capability_token_ids: string[];
  envelope: DsseEnvelope;
  digest: string;
  prev_digest: string;
  signature: SignatureMeta;
  c2pa_manifest_ref: string | null;
  created_at: Date;
  /** NULL (no grants, or another kind) or the grants, in record order. */
  capability_grants: CapabilityGrantView[] | null;
  /** NULL until the record is time-stamped. */
  timestamp: TimestampJson | null;
}

export function toStored(r: AttestationRow): StoredAttestation {
  return {
    id: r.id,
    seq: Number(r.seq),
    namespace: r.namespace,
    runId: r.run_id,
    stepId: r.step_id,
    kind: r.kind as AttestationKind,
    subjects: r.subjects,
    artifactDigests: r.artifact_digests,
    predicateType: r.predicate_type,
    policyPack: r.policy_pack,
    policyVersion: r.policy_version,
    capabilityTokenIds: r.capability_token_ids,
    envelope: r.envelope,
    digest: r.digest,
    prevDigest: r.prev_digest,
    signature: r.signature,
    c2paManifestRef: r.c2pa_manifest_ref,
    createdAt: r.created_at,
    // Only records that have grants carry them, so a row read back equals the row append returned.
    ...(r.capability_grants != null && r.capability_grants.length > 0
      ? {
          capabilityChains: r.capability_grants.map((g) => g.chain),
          capabilityTokens: r.capability_grants.flatMap((g) => g.tokens),
        }
      : {}),
    ...(r.timestamp != null ? { timestamp: storedTimestampOf(r.timestamp) } : {}),
  };
}
