import { STATUS_CODES } from 'node:http';
import { BaseError } from '../errors.ts';

/**
 * RFC 9457 problem details. Every error response of the API is one of these, with a stable `code`
 * clients switch on (never the message) and, for input errors, JSON pointers to the bad fields.
 * docs/api.md lists every code (a unit test keeps the list complete).
 */

export const PROBLEM_CONTENT_TYPE = 'application/problem+json';

export type ProblemCode =
  | 'UNAUTHENTICATED'
  | 'FORBIDDEN'
  | 'CSRF_REJECTED'
  | 'NOT_FOUND'
  | 'METHOD_NOT_ALLOWED'
  | 'VALIDATION_FAILED'
  | 'MALFORMED_JSON'
  | 'UNSUPPORTED_MEDIA_TYPE'
  | 'PAYLOAD_TOO_LARGE'
  | 'REQUEST_TIMEOUT'
  | 'CURSOR_INVALID'
  | 'INVALID_TIME_WINDOW'
  | 'UNSIGNED_EXPORT_BLOCKED'
  | 'VIEW_NOT_RECORDED'
  | 'ARTIFACT_NOT_AS_RECORDED'
  | 'EMPTY_SELECTION'
  | 'EXPORT_TOO_LARGE'
  | 'EXPORT_BUSY'
  | 'PAGE_BUSY'
  | 'UPSTREAM_UNAVAILABLE'
  | 'REGISTRATION_FAILED'
  | 'RECORD_TAMPERED'
  | 'TREE_DIVERGED'
  | 'CAPABILITY_TOKEN_MALFORMED'
  | 'CAPABILITY_TOKEN_EXPIRED'
  | 'CAPABILITY_TOKEN_UNTRUSTED'
  | 'INTERNAL';

export interface FieldProblem {
  /** RFC 6901 pointer into the request (`/body/limit`, `/params/id`). */
  readonly pointer: string;
  readonly message: string;
}

export interface Problem {
  readonly type: string;
  readonly title: string;
  readonly status: number;
  /** A ProblemCode, or the code of the module error it reports (e.g. a TransparencyError's). */
  readonly code: string;
  readonly detail?: string;
  readonly instance?: string;
  readonly errors?: readonly FieldProblem[];
}

const TITLES: Record<ProblemCode, string> = {
  UNAUTHENTICATED: 'Authentication required',
  FORBIDDEN: 'Forbidden',
  CSRF_REJECTED: 'Missing or invalid CSRF token',
  NOT_FOUND: 'Not found',
  METHOD_NOT_ALLOWED: 'Method not allowed',
  VALIDATION_FAILED: 'Request validation failed',
  MALFORMED_JSON: 'Malformed JSON body',
  UNSUPPORTED_MEDIA_TYPE: 'Unsupported media type',
  PAYLOAD_TOO_LARGE: 'Payload too large',
  REQUEST_TIMEOUT: 'Request timeout',
  CURSOR_INVALID: 'Invalid cursor',
  INVALID_TIME_WINDOW: 'Invalid time window',
  UNSIGNED_EXPORT_BLOCKED: 'Export blocked: no signed C2PA manifest',
  VIEW_NOT_RECORDED: 'No such view was recorded for this AIBOM',
  ARTIFACT_NOT_AS_RECORDED: 'Refused: the stored artifact is not the one the vault recorded',
  EMPTY_SELECTION: 'Nothing to export',
  EXPORT_TOO_LARGE: 'Export selection too large',
  EXPORT_BUSY: 'Too many exports at once',
  PAGE_BUSY: 'Too many pages of yours at once',
  UPSTREAM_UNAVAILABLE: 'A backing service is unavailable',
  REGISTRATION_FAILED: 'Registration failed',
  RECORD_TAMPERED: 'Stored record does not match what is signed',
  TREE_DIVERGED: 'Stored vault tree does not match the signed checkpoints',
  CAPABILITY_TOKEN_MALFORMED: 'Not a capability token, token id, capability id or scope',
  CAPABILITY_TOKEN_EXPIRED: 'Capability token expired',
  CAPABILITY_TOKEN_UNTRUSTED: 'Capability token not signed by a key of the namespaces you can read',
  INTERNAL: 'Internal error',
};

/** Every ProblemCode (for documentation checks). */
export const PROBLEM_CODES = Object.keys(TITLES) as readonly ProblemCode[];

/** Thrown by routes and plugins; the error handler renders it. */
export class ProblemError extends BaseError<ProblemCode> {
  readonly status: number;
  readonly errors: readonly FieldProblem[] | undefined;
  readonly headers: Readonly<Record<string, string>>;
  constructor(
    status: number,
    code: ProblemCode,
    detail: string,
    extra: { errors?: FieldProblem[]; headers?: Record<string, string>; cause?: unknown } = {},
  ) {
    super(code, detail, extra.cause !== undefined ? { cause: extra.cause } : undefined);
    this.status = status;
    this.errors = extra.errors;
    this.headers = extra.headers ?? {};
  }
}

/**
 * 503 UPSTREAM_UNAVAILABLE with `retry-after: 5`: a backing service (the API server, the vault) did
 * not answer; `detail` names the dependency only, `cause` stays in the server log.
 */
export function upstreamUnavailable(detail: string, cause: unknown): ProblemError {
  return new ProblemError(503, 'UPSTREAM_UNAVAILABLE', detail, { headers: { 'retry-after': '5' }, cause });
}

export function problem(
  status: number,
  code: string,
  detail?: string,
  errors?: readonly FieldProblem[],
): Problem {
  return {
    type: `https://vault.service.dev/problems/${code.toLowerCase().replaceAll('_', '-')}`,
    title: Object.hasOwn(TITLES, code) ? TITLES[code as ProblemCode] : (STATUS_CODES[status] ?? 'Error'),
    status,
    code,
    ...(detail !== undefined ? { detail } : {}),
    ...(errors !== undefined && errors.length > 0 ? { errors } : {}),
  };
}

/** JSON Schema of a problem body, referenced by every route's error responses. */
export const problemSchema = {
  $id: 'Problem',
  type: 'object',
  required: ['type', 'title', 'status', 'code'],
  properties: {
    type: { type: 'string' },
    title: { type: 'string' },
    status: { type: 'integer' },
    code: { type: 'string' },
    detail: { type: 'string' },
    instance: { type: 'string' },
    errors: {
      type: 'array',
      items: {
        type: 'object',
        required: ['pointer', 'message'],
        properties: { pointer: { type: 'string' }, message: { type: 'string' } },
      },
    },
  },
} as const;
