import type { StoredAttestation } from '../vault/index.ts';

/**
 * The API view of one vault record. Field names are the contract of GET /v1/attestations/{id} and
 * of every query/export item (docs/api.md): the spec's common fields (`predicate_type`, `predicate`,
 * `capability_tokens`, `c2pa_manifest_ref`, `transparency`) plus the subject, capability chain,
 * signature metadata, digest and the DSSE envelope itself.
 */
export interface ApiEnvelope {
  id: string;
  seq: number;
  namespace: string;
  kind: string;
  run_id: string | null;
  step_id: string | null;
  created_at: string;
  predicate_type: string;
  predicate: Record<string, unknown>;
  /** The in-toto statement's subjects (`name` + `digest`), as signed. */
  subject: { name: string; digest: Record<string, string> }[];
  /** Vault subject keys (`run:<id>`, `step:<run>:<step>`, …) the record is indexed under. */
  subjects: string[];
  capability_chain: unknown[] | null;
  capability_tokens?: Record<string, unknown>;
  signature: { algorithm: string; key_id: string; cert_chain_ref: string | null };
  digest: string;
  prev_digest: string;
  envelope: { payload: string; payloadType: string; signatures: { keyid: string; sig: string }[] };
  c2pa_manifest_ref: string | null;
  transparency: Record<string, unknown> | null;
}

interface Statement {
  subject?: { name: string; digest: Record<string, string> }[];
  predicateType?: string;
  predicate?: Record<string, unknown>;
}

export function toApiEnvelope(
  a: StoredAttestation,
  transparency: Record<string, unknown> | null = null,
): ApiEnvelope {
  // The payload was produced and signed by this service; a record that fails to decode is reported
  // with an empty predicate rather than hiding the record (verify will flag it).
  let statement: Statement;
  try {
    statement = JSON.parse(Buffer.from(a.envelope.payload, 'base64').toString('utf8')) as Statement;
  } catch {
    statement = {};
  }
  const predicate = statement.predicate ?? {};
  const chain =
    a.kind === 'capability' && Array.isArray(predicate.chain) ? (predicate.chain as unknown[]) : null;
  return {
    id: a.id,
    seq: a.seq,
    namespace: a.namespace,
    kind: a.kind,
    run_id: a.runId,
    step_id: a.stepId,
    created_at: a.createdAt.toISOString(),
    predicate_type: a.predicateType,
    predicate,
    subject: statement.subject ?? [],
    subjects: [...a.subjects],
    capability_chain: chain,
    signature: {
      algorithm: a.signature.algorithm,
      key_id: a.signature.key_id,
      cert_chain_ref: a.signature.cert_chain_ref ?? null,
    },
    digest: a.digest,
    prev_digest: a.prevDigest,
    envelope: a.envelope,
    c2pa_manifest_ref: a.c2paManifestRef,
    transparency,
  };
}
