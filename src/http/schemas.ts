import { MAX_QUERY_NAMESPACES } from './auth/namespaces.ts';

/**
 * JSON Schemas of the /v1 API, shared by route validation, response serialisation and the OpenAPI
 * document. What stops field leaks: Fastify's serializer for the routes it writes, and for the hot
 * routes that send pre-serialised bytes the allow-listing builders of envelope.ts, which copy the
 * fields listed here (checked against these schemas, closed, in test/unit/http/views/envelope.test.ts).
 */

export const UUID_V7_PATTERN =
  '^[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-7[0-9a-fA-F]{3}-[89abAB][0-9a-fA-F]{3}-[0-9a-fA-F]{12}$';
export const UUID_PATTERN = '^[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}$';
export const DIGEST_PATTERN = '^sha256:[0-9a-f]{64}$';
export const DNS_LABEL = '^[a-z0-9]([-a-z0-9]*[a-z0-9])?$';
/** A Kubernetes object name (a Run's): DNS-1123 subdomain. */
export const DNS_SUBDOMAIN = '^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$';
/**
 * Free-text filters hold no control characters (Unicode Cc: U+0000-U+001F, U+007F-U+009F), as
 * admission refuses them in every name of a Run (docs/runs.md): nothing stored can match one, and
 * NUL cannot even be sent to PostgreSQL. Refused as 400 VALIDATION_FAILED with a pointer.
 */
export const NO_CONTROL_PATTERN = '^[^\\u0000-\\u001f\\u007f-\\u009f]*$';
const text = (minLength: number, maxLength: number, description?: string) =>
  ({
    type: 'string',
    minLength,
    maxLength,
    pattern: NO_CONTROL_PATTERN,
    ...(description !== undefined ? { description } : {}),
  }) as const;

const freeObject = { type: 'object', additionalProperties: true } as const;

/** The `transparency` member of an envelope: SCITT job id while queued, the receipt once published. */
export const transparencyViewSchema = {
  $id: 'TransparencyView',
  type: 'object',
  required: ['job_id', 'status', 'attempts'],
  properties: {
    job_id: { type: 'string' },
    status: {
      type: 'string',
      enum: ['queued', 'published'],
      description:
        'queued until published; a job that cannot publish stays queued (attempts, last_error, next_attempt_at)',
    },
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
    attempts: { type: 'integer', description: 'attempts so far (one may be running)' },
    last_error: { type: 'string', description: 'error of the last failed attempt, while queued' },
    next_attempt_at: {
      type: 'string',
      format: 'date-time',
      description: 'while queued: when the job is due again (the end of its backoff or of a running attempt)',
    },
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
    capability_chain: {
      type: ['array', 'null'],
      description:
        'capability and step records: the chain of authority of each capability (docs/capabilities.md); null for other kinds',
      items: {
        type: 'object',
        required: ['capability', 'step', 'root', 'links', 'scope', 'granted_by', 'approved_by'],
        properties: {
          capability: { type: 'string', description: 'capability:<run>:<step>:<n>' },
          step: { type: ['string', 'null'], description: 'step:<run>:<step>' },
          root: {
            anyOf: [
              {
                type: 'object',
                required: ['authority', 'key_id', 'algorithm', 'biscuit_root_key'],
                properties: {
                  authority: { type: 'string', enum: ['service', 'namespace'] },
                  key_id: { type: 'string' },
                  algorithm: { type: 'string' },
                  biscuit_root_key: { type: 'string' },
                },
              },
              { type: 'null' },
            ],
          },
          links: {
            type: 'array',
            items: {
              type: 'object',
              required: ['scope', 'granted_by', 'approved_by'],
              properties: {
                scope: { type: 'string' },
                granted_by: { type: 'string' },
                approved_by: { type: ['string', 'null'] },
              },
            },
          },
          scope: { type: ['string', 'null'] },
          granted_by: { type: ['string', 'null'] },
          approved_by: { type: ['string', 'null'] },
        },
      },
    },
    capability_tokens: {
      type: 'array',
      description:
        'capability and step records, when SERVICE_CAPABILITY_TOKENS=1: the VC (vc+jwt) and Biscuit projections of each chain',
      items: {
        type: 'object',
        required: ['format', 'id', 'token'],
        properties: {
          format: { type: 'string', enum: ['vc+jwt', 'biscuit'] },
          id: { type: 'string', description: 'the VC id, or the Biscuit revocation id of its first block' },
          token: { type: 'string' },
        },
      },
    },
    signature: {
      type: 'object',
      required: ['algorithm', 'key_id'],
      properties: {
        algorithm: { type: 'string' },
        key_id: { type: 'string' },
        cert_chain_ref: { type: ['string', 'null'] },
        timestamp: {
          type: 'object',
          description:
            'RFC 3161 time-stamp over the raw bytes of envelope.signatures[0].sig, taken right after the record was stored (absent until then, and without a TSA); verifiers judge the certificate at its time',
          required: ['time', 'tsa', 'signed_timestamp'],
          properties: {
            time: { type: 'string', format: 'date-time', description: 'genTime of the token' },
            tsa: { type: 'string', description: 'subject of the TSA certificate' },
            signed_timestamp: {
              type: 'string',
              description:
                'base64 DER TimeStampResp (a Sigstore bundle’s rfc3161Timestamps[].signedTimestamp)',
            },
          },
        },
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
    c2pa_manifest_ref: {
      type: ['string', 'null'],
      description:
        "the API path (relative to the base URL) of the C2PA manifest that staples the record: /v1/runs/{run_id}/artifacts/aibom/manifest for every record the AIBOM manifest lists, the AIBOM record and the AIBOM bytes' artifact record; it serves the manifest in force (after a repair, the new one); null otherwise",
    },
    transparency: { anyOf: [{ $ref: 'TransparencyView#' }, { type: 'null' }] },
  },
} as const;

export const queryBodySchema = {
  $id: 'AttestationQuery',
  type: 'object',
  additionalProperties: false,
  properties: {
    subject: text(1, 600, 'exact subject, e.g. step:<run_id>:<step_id>'),
    run_id: { type: 'string', pattern: UUID_PATTERN },
    step_id: text(1, 63),
    artifact_digest: { type: 'string', pattern: DIGEST_PATTERN },
    policy_pack: {
      type: 'object',
      additionalProperties: false,
      required: ['name'],
      properties: {
        name: text(1, 253),
        version: text(1, 128),
      },
    },
    capability_token: text(
      1,
      16384,
      'a capability token (VC-JWT or Biscuit), a token id, a capability id (capability:<run>:<step>:<n>) or a scope',
    ),
    kind: { type: 'string', enum: ['run', 'step', 'artifact', 'policy', 'capability', 'aibom'] },
    from: { type: 'string', format: 'date-time', description: 'inclusive lower bound on created_at' },
    to: { type: 'string', format: 'date-time', description: 'exclusive upper bound on created_at' },
    namespaces: {
      type: 'array',
      maxItems: MAX_QUERY_NAMESPACES,
      description: `at most ${MAX_QUERY_NAMESPACES}: each costs a SubjectAccessReview unless the caller may list cluster-wide`,
      uniqueItems: true,
      items: { type: 'string', pattern: DNS_LABEL, maxLength: 63 },
    },
    limit: {
      type: 'integer',
      minimum: 1,
      maximum: 1000,
      description: 'page size; default 100, maximum 1000',
    },
    cursor: text(1, 2048, 'next_cursor of the previous page'),
  },
} as const;

export const queryPageSchema = {
  $id: 'AttestationPage',
  type: 'object',
  required: ['items', 'next_cursor', 'excluded_namespace_count'],
  properties: {
    items: { type: 'array', items: { $ref: 'AttestationEnvelope#' } },
    next_cursor: { type: ['string', 'null'] },
    excluded_namespace_count: {
      type: 'integer',
      minimum: 0,
      description:
        'how many namespaces asked for (or holding records) the caller may not list; they are never named',
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
