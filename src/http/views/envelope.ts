import type { FastifyReply } from 'fastify';
import { labelMismatches, type Statement as SignedStatement } from '../../attest/index.ts';
import { transparencyView } from '../../transparency/jobs.ts';
import type { StoredAttestation, TransparencyJob } from '../../vault/index.ts';
import { ProblemError } from '../problem.ts';
import { transparencyViewSchema } from '../schemas.ts';

/**
 * The bodies the hot routes send as pre-serialised bytes (GET /v1/attestations/{id}, query pages
 * and NDJSON lines). They skip Fastify's schema serializer, which cost about three times as much
 * as JSON.stringify for a 230 KiB page (docs/bench.md), and with it the serializer's guarantee that
 * a field outside the response schema never leaves the service. That guarantee lives here instead:
 *
 * - each response type has ONE builder that copies only the fields of its schema (schemas.ts), down
 *   to nested objects (envelope, signatures, subject, signature metadata, transparency); free-form
 *   members are only those the schema leaves free (the signed predicate, capability chain/tokens);
 * - a builder's result carries a compile-time brand, and `sendBody` takes nothing else, so a route
 *   cannot send a hand-made object;
 * - test/unit/http/views/envelope.test.ts checks the bodies of every record kind, with extra fields
 *   planted at every level, against the published schemas closed with additionalProperties: false.
 */

declare const built: unique symbol;
/** A response body made by its allow-listing builder in this file. */
export type Body<T> = T & { readonly [built]: true };

function brand<T>(value: T): Body<T> {
  return value as Body<T>;
}

/** Sends a builder's body as the UTF-8 bytes of JSON.stringify (one pass, one conversion). */
export function sendBody(reply: FastifyReply, body: Body<object>): FastifyReply {
  return reply.type('application/json; charset=utf-8').send(Buffer.from(JSON.stringify(body), 'utf8'));
}

/** One NDJSON line of a builder's body. */
export function ndjsonLine(body: Body<object>): string {
  return `${JSON.stringify(body)}\n`;
}

/**
 * The API view of one vault record. Field names are the contract of GET /v1/attestations/{id} and
 * of every query/export item (docs/api.md): the spec's common fields (`predicate_type`, `predicate`,
 * `capability_tokens`, `c2pa_manifest_ref`, `transparency`) plus the subject, capability chain,
 * signature metadata, digest and the DSSE envelope itself.
 */
export interface ApiEnvelopeFields {
  id: string;
  /** The record's place in the whole vault: for readers who may see positions only (Audience). */
  seq?: number;
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
  capability_tokens?: { format: string; id: string; token: string }[];
  signature: {
    algorithm: string;
    key_id: string;
    cert_chain_ref: string | null;
    /** The RFC 3161 time-stamp of the signature, once taken (docs/timestamps.md). */
    timestamp?: { time: string; tsa: string; signed_timestamp: string };
  };
  digest: string;
  /** The digest of the record before it in the vault (any tenant's): positions readers only. */
  prev_digest?: string;
  envelope: { payload: string; payloadType: string; signatures: { keyid: string; sig: string }[] };
  c2pa_manifest_ref: string | null;
  transparency: Record<string, unknown> | null;
}

export type ApiEnvelope = Body<ApiEnvelopeFields>;

interface Statement {
  subject?: unknown;
  predicate?: Record<string, unknown>;
}

function isRecord(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

/** Statement subjects as the schema has them: `name` and string-valued `digest` entries only. */
function subjectsOf(subject: unknown): ApiEnvelopeFields['subject'] {
  if (!Array.isArray(subject)) return [];
  return (subject as unknown[]).filter(isRecord).map((s) => {
    const digest: Record<string, string> = {};
    if (isRecord(s.digest)) {
      for (const [alg, value] of Object.entries(s.digest)) if (typeof value === 'string') digest[alg] = value;
    }
    return { name: String(s.name), digest };
  });
}

/**
 * `c2pa_manifest_ref` of a record the AIBOM's C2PA manifest staples: the API path of that manifest
 * (relative to the base URL; GET it with the same credentials). It serves the manifest in force,
 * so after a repair it resolves to the new one; the path itself never changes.
 */
export const aibomManifestRef = (runId: string): string => `/v1/runs/${runId}/artifacts/aibom/manifest`;

const TRANSPARENCY_FIELDS = Object.keys(transparencyViewSchema.properties);

/** The transparency view with only the fields its schema lists (the job row holds more). */
function transparencyOf(
  view: Readonly<Record<string, unknown>> | null,
  audience: Audience,
): Record<string, unknown> | null {
  if (view === null) return null;
  const out: Record<string, unknown> = {};
  for (const field of TRANSPARENCY_FIELDS) {
    if (field === 'log_index' && !audience.positions) continue;
    if (view[field] !== undefined) out[field] = view[field];
  }
  return out;
}

/**
 * `capability_chain`: the stored chain views of a capability record (its own) or a step record (its
 * capabilities'); a capability record stored before chains had views shows its signed links; null
 * for every other kind.
 */
function chainsOf(a: StoredAttestation, predicate: Record<string, unknown>): unknown[] | null {
  if (a.kind !== 'capability' && a.kind !== 'step') return null;
  if (a.capabilityChains !== undefined && a.capabilityChains.length > 0) return [...a.capabilityChains];
  if (a.kind === 'capability' && Array.isArray(predicate.chain)) {
    const links = (predicate.chain as unknown[]).filter(isRecord);
    const last = links.at(-1);
    return [
      {
        capability: a.subjects[0] ?? null,
        step: a.runId !== null && a.stepId !== null ? `step:${a.runId}:${a.stepId}` : null,
        root: null,
        links: links.map((l) => ({ scope: l.scope, granted_by: l.grantedBy, approved_by: l.approvedBy })),
        scope: last?.scope ?? null,
        granted_by: last?.grantedBy ?? null,
        approved_by: last?.approvedBy ?? null,
      },
    ];
  }
  return a.kind === 'step' ? [] : null;
}

/**
 * The statement of a stored record, checked against the record's index columns: the namespace
 * (who may read it), kind, run, step, subjects, predicate type, policy pack and capability tokens
 * must be what the statement signs (src/attest/labels.ts, ADR 0007). The service stores only
 * statements it made, so a payload that does not decode, or a column that disagrees, was changed
 * in the database behind the service's back: the record is not served (500 RECORD_TAMPERED, and
 * an error in the log naming it), never shown under labels it was not signed with.
 */
export function checkedStatement(a: StoredAttestation): Statement {
  const tampered = (why: string): never => {
    throw new ProblemError(
      500,
      'RECORD_TAMPERED',
      `attestation ${a.id} was changed in the vault after it was signed (${why}); it is not served`,
    );
  };
  let parsed: unknown;
  try {
    parsed = JSON.parse(Buffer.from(a.envelope.payload, 'base64').toString('utf8'));
  } catch {
    return tampered('its payload is not a statement');
  }
  if (
    !isRecord(parsed) ||
    !Array.isArray(parsed.subject) ||
    typeof parsed.predicateType !== 'string' ||
    !parsed.subject.every((s) => isRecord(s) && typeof s.name === 'string' && isRecord(s.digest))
  ) {
    return tampered('its payload is not a statement');
  }
  const mismatched = labelMismatches(
    {
      namespace: a.namespace,
      kind: a.kind,
      run_id: a.runId,
      step_id: a.stepId,
      subjects: a.subjects,
      artifact_digests: a.artifactDigests,
      predicate_type: a.predicateType,
      policy_pack: a.policyPack,
      policy_version: a.policyVersion,
      capability_token_ids: a.capabilityTokenIds,
    },
    parsed as unknown as SignedStatement,
  );
  if (mismatched.length > 0) tampered(`${mismatched.join(', ')} not as signed`);
  return parsed;
}

/**
 * Who reads a record. The vault is one chain over every tenant's records: a record's `seq` is its
 * place among all of them, its `prev_digest` the digest of whatever record (any tenant's) came
 * before it, and `transparency.log_index` its place in a log all tenants share. Read over time,
 * those tell a tenant how many records the others write, and hand it their digests (issue 28).
 * They are shown only to a reader allowed to see the whole chain (`positions`: get on
 * attestations/chain, cluster-wide, docs/chain.md), who sees positions and leaf hashes of every
 * record anyway; every other reader gets the record without them. Nothing a tenant verifies
 * offline reads them (docs/chain.md "Tenants").
 */
export interface Audience {
  readonly positions: boolean;
}

/** A tenant's view: no positions, no other tenant's digest. The default of every builder. */
export const TENANT: Audience = { positions: false };

/** The API body of a record with its transparency job (none: `transparency` is null). */
export function withJob(
  record: StoredAttestation,
  job: TransparencyJob | null | undefined,
  audience: Audience = TENANT,
): ApiEnvelope {
  return toApiEnvelope(
    record,
    job
      ? (transparencyView(job, { position: audience.positions }) as unknown as Record<string, unknown>)
      : null,
    audience,
  );
}

/**
 * The one builder of an attestation body (GET by id, query items, NDJSON lines). Throws
 * ProblemError RECORD_TAMPERED for a record that does not match its signed statement.
 */
export function toApiEnvelope(
  a: StoredAttestation,
  transparency: Readonly<Record<string, unknown>> | null = null,
  audience: Audience = TENANT,
): ApiEnvelope {
  const statement = checkedStatement(a);
  const predicate = isRecord(statement.predicate) ? statement.predicate : {};
  return brand({
    id: a.id,
    ...(audience.positions ? { seq: a.seq } : {}),
    namespace: a.namespace,
    kind: a.kind,
    run_id: a.runId,
    step_id: a.stepId,
    created_at: a.createdAt.toISOString(),
    predicate_type: a.predicateType,
    predicate,
    subject: subjectsOf(statement.subject),
    subjects: [...a.subjects],
    capability_chain: chainsOf(a, predicate),
    ...(a.capabilityTokens !== undefined
      ? { capability_tokens: a.capabilityTokens.map((t) => ({ format: t.format, id: t.id, token: t.token })) }
      : {}),
    signature: {
      algorithm: a.signature.algorithm,
      key_id: a.signature.key_id,
      cert_chain_ref: a.signature.cert_chain_ref ?? null,
      // Same shape as the AIBOM metadata's `signature.timestamp`; over `envelope.signatures[0].sig`.
      ...(a.timestamp !== undefined
        ? {
            timestamp: {
              time: a.timestamp.genTime.toISOString(),
              tsa: a.timestamp.tsa,
              signed_timestamp: a.timestamp.response.toString('base64'),
            },
          }
        : {}),
    },
    digest: a.digest,
    ...(audience.positions ? { prev_digest: a.prevDigest } : {}),
    envelope: {
      payload: a.envelope.payload,
      payloadType: a.envelope.payloadType,
      signatures: a.envelope.signatures.map((s) => ({ keyid: s.keyid, sig: s.sig })),
    },
    c2pa_manifest_ref: a.stapled === true && a.runId !== null ? aibomManifestRef(a.runId) : null,
    transparency: transparencyOf(transparency, audience),
  });
}

/** A page of POST /v1/attestations/query. */
export interface AttestationPageFields {
  items: readonly ApiEnvelope[];
  next_cursor: string | null;
  /** How many namespaces asked for (or holding records) the caller may not list: counted, never named. */
  excluded_namespace_count: number;
}

/** The one builder of a query page; its items can only come from {@link toApiEnvelope}. */
export function attestationPage(
  items: readonly ApiEnvelope[],
  nextCursor: string | null,
  excludedNamespaces: number,
): Body<AttestationPageFields> {
  return brand({ items, next_cursor: nextCursor, excluded_namespace_count: excludedNamespaces });
}
