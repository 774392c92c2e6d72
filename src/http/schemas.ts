/**
 * JSON Schemas of the /v1 API, shared by route validation, response serialisation and the OpenAPI
 * document. What stops field leaks: Fastify's serializer for the routes it writes, and for the hot
 * routes that send pre-serialised bytes the allow-listing builders of envelope.ts, which copy the
 * fields listed here (checked against these schemas, closed, in test/unit/http/envelope.test.ts).
 */

export const UUID_V7_PATTERN =
  '^[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-7[0-9a-fA-F]{3}-[89abAB][0-9a-fA-F]{3}-[0-9a-fA-F]{12}$';
export const UUID_PATTERN = '^[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}$';
export const DIGEST_PATTERN = '^sha256:[0-9a-f]{64}$';
export const DNS_LABEL = '^[a-z0-9]([-a-z0-9]*[a-z0-9])?$';
/** A Kubernetes object name (a Run's): DNS-1123 subdomain. */
export const DNS_SUBDOMAIN = '^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$';

const freeObject = { type: 'object', additionalProperties: true } as const;

/** The `transparency` member of an envelope: SCITT job id while queued, the receipt once published. */
export const transparencyViewSchema = {
  $id: 'TransparencyView',
  type: 'object',
  required: ['job_id', 'status', 'attempts'],
  properties: {
    job_id: { type: 'string' },
    status: { type: 'string', enum: ['queued', 'published', 'failed'] },
    backend: { type: 'string', enum: ['local', 'scrapi'], description: 'local: this service’s own log' },
    mode: { type: 'string', enum: ['dry_run', 'published'] },
    entry_id: { type: 'string' },
    log_index: { type: 'integer' },
    receipt: { type: 'string', description: 'COSE receipt (base64), RFC9162_SHA256 inclusion proof' },
    receipt_media_type: { type: 'string' },
    statement: {
      type: 'string',
      description: 'the signed statement (COSE_Sign1, base64) the receipt is over',
    },
    published_at: { type: 'string', format: 'date-time' },
    attempts: { type: 'integer' },
    last_error: { type: 'string' },
  },
} as const;

export const envelopeSchema = {
  $id: 'AttestationEnvelope',
  type: 'object',
  required: [
    'id',
    'predicate_type',
    'predicate',
    'subject',
    'subjects',
    'signature',
    'digest',
    'envelope',
    'c2pa_manifest_ref',
    'transparency',
  ],
  properties: {
    id: { type: 'string', description: 'UUIDv7 of the vault record' },
    seq: { type: 'integer', description: 'insert order in the vault' },
    namespace: { type: 'string' },
    kind: { type: 'string', enum: ['run', 'step', 'artifact', 'policy', 'capability', 'aibom'] },
    run_id: { type: ['string', 'null'] },
    step_id: { type: ['string', 'null'] },
    created_at: { type: 'string', format: 'date-time' },
    predicate_type: { type: 'string' },
    predicate: freeObject,
    subject: {
      type: 'array',
      items: {
        type: 'object',
        required: ['name', 'digest'],
        properties: {
          name: { type: 'string' },
          digest: { type: 'object', additionalProperties: { type: 'string' } },
        },
      },
    },
    subjects: { type: 'array', items: { type: 'string' } },
    capability_chain: { type: ['array', 'null'], items: freeObject },
    capability_tokens: freeObject,
    signature: {
      type: 'object',
      required: ['algorithm', 'key_id'],
      properties: {
        algorithm: { type: 'string' },
        key_id: { type: 'string' },
        cert_chain_ref: { type: ['string', 'null'] },
      },
    },
    digest: { type: 'string', description: 'sha256 over the RFC 8785 canonical JSON of `envelope`' },
    prev_digest: { type: 'string', description: 'digest of the previous record (hash chain)' },
    envelope: {
      type: 'object',
      required: ['payload', 'payloadType', 'signatures'],
      properties: {
        payload: { type: 'string' },
        payloadType: { type: 'string' },
        signatures: {
          type: 'array',
          items: {
            type: 'object',
            required: ['keyid', 'sig'],
            properties: { keyid: { type: 'string' }, sig: { type: 'string' } },
          },
        },
      },
    },
    c2pa_manifest_ref: { type: ['string', 'null'] },
    transparency: { anyOf: [{ $ref: 'TransparencyView#' }, { type: 'null' }] },
  },
} as const;

export const queryBodySchema = {
  $id: 'AttestationQuery',
  type: 'object',
  additionalProperties: false,
  properties: {
    subject: {
      type: 'string',
      minLength: 1,
      maxLength: 600,
      description: 'exact subject, e.g. step:<run_id>:<step_id>',
    },
    run_id: { type: 'string', pattern: UUID_PATTERN },
    step_id: { type: 'string', minLength: 1, maxLength: 63 },
    artifact_digest: { type: 'string', pattern: DIGEST_PATTERN },
    policy_pack: {
      type: 'object',
      additionalProperties: false,
      required: ['name'],
      properties: {
        name: { type: 'string', minLength: 1, maxLength: 253 },
        version: { type: 'string', minLength: 1, maxLength: 128 },
      },
    },
    capability_token: { type: 'string', minLength: 1, maxLength: 600 },
    kind: { type: 'string', enum: ['run', 'step', 'artifact', 'policy', 'capability', 'aibom'] },
    from: { type: 'string', format: 'date-time', description: 'inclusive lower bound on created_at' },
    to: { type: 'string', format: 'date-time', description: 'exclusive upper bound on created_at' },
    namespaces: {
      type: 'array',
      maxItems: 100,
      uniqueItems: true,
      items: { type: 'string', pattern: DNS_LABEL, maxLength: 63 },
    },
    limit: {
      type: 'integer',
      minimum: 1,
      maximum: 1000,
      description: 'page size; default 100, maximum 1000',
    },
    cursor: {
      type: 'string',
      minLength: 1,
      maxLength: 2048,
      description: 'next_cursor of the previous page',
    },
  },
} as const;

export const queryPageSchema = {
  $id: 'AttestationPage',
  type: 'object',
  required: ['items', 'next_cursor', 'excluded_namespaces'],
  properties: {
    items: { type: 'array', items: { $ref: 'AttestationEnvelope#' } },
    next_cursor: { type: ['string', 'null'] },
    excluded_namespaces: {
      type: 'array',
      items: { type: 'string' },
      description: 'namespaces asked for (or holding records) that the caller may not list',
    },
  },
} as const;

export const problemResponses = {
  400: { $ref: 'Problem#' },
  401: { $ref: 'Problem#' },
  403: { $ref: 'Problem#' },
  404: { $ref: 'Problem#' },
  415: { $ref: 'Problem#' },
  503: { $ref: 'Problem#' },
} as const;
