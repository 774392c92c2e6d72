import type { AttestationKind, DsseEnvelope, SignatureMeta, StoredAttestation } from './types.ts';

/** Column list shared by every read, in table order. */
export const ATTESTATION_COLUMNS =
  'id, seq, namespace, run_id, step_id, kind, subjects, artifact_digests, predicate_type, policy_pack, ' +
  'policy_version, capability_token_ids, envelope, digest, prev_digest, signature, c2pa_manifest_ref, created_at';

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
  };
}
