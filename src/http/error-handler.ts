import { STATUS_CODES } from 'node:http';
import type { FastifyError, FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { TransparencyError, type TransparencyErrorCode } from '../transparency/errors.ts';
import { MediaType } from '../transparency/media-types.ts';
import { encodeProblemDetails } from '../transparency/problem-details.ts';
import { VaultError } from '../vault/index.ts';
import { problem, ProblemError, PROBLEM_CONTENT_TYPE, type FieldProblem } from './problem.ts';

declare module 'fastify' {
  interface FastifyContextConfig {
    /**
     * How this route writes its errors: RFC 9457 problem+json (default) or RFC 9290 concise problem
     * details in CBOR (`cbor`, the SCRAPI routes). The failure and its code are the same either way.
     */
    problem?: 'json' | 'cbor';
    /** The body media type the route accepts, named in a 415 answer; default application/json. */
    accepts?: string;
  }
}

/** A failure as the API reports it, before it is written as JSON or CBOR. */
interface Failure {
  readonly status: number;
  readonly code: string;
  readonly detail: string;
  readonly errors?: readonly FieldProblem[];
  readonly headers: Readonly<Record<string, string>>;
}

/** Transparency failures a client caused (the rest are the service's: 500). */
export const TRANSPARENCY_STATUS: Partial<Record<TransparencyErrorCode, number>> = {
  MALFORMED_STATEMENT: 400,
  STATEMENT_SIGNATURE_INVALID: 400,
  ISSUER_MISMATCH: 400,
  UNTRUSTED_ISSUER: 400,
  ENTRY_NOT_FOUND: 404,
};

interface AjvIssue {
  instancePath?: string;
  message?: string;
  keyword?: string;
  params?: Record<string, unknown>;
}

/** Fastify/Ajv validation issues → JSON pointers into the request (`/body/limit`). */
function fieldProblems(err: FastifyError): FieldProblem[] {
  const where = (err as { validationContext?: string }).validationContext ?? 'body';
  const issues = (err as { validation?: AjvIssue[] }).validation ?? [];
  return issues.map((v) => {
    let pointer = `/${where}${v.instancePath ?? ''}`;
    if (v.keyword === 'additionalProperties' && typeof v.params?.additionalProperty === 'string') {
      pointer += `/${v.params.additionalProperty}`;
      return { pointer, message: 'unknown field' };
    }
    if (v.keyword === 'required' && typeof v.params?.missingProperty === 'string') {
      pointer += `/${v.params.missingProperty}`;
    }
    return { pointer, message: v.message ?? 'invalid' };
  });
}

const INTERNAL: Failure = {
  status: 500,
  code: 'INTERNAL',
  detail: 'internal error; see the server log',
  headers: {},
};

/** The one mapping from anything a route, hook or parser throws to a failure; never leaks a 5xx cause. */
function failureOf(err: unknown, req: FastifyRequest): Failure {
  const plain = (status: number, code: string, detail: string, errors?: FieldProblem[]): Failure => ({
    status,
    code,
    detail,
    ...(errors !== undefined ? { errors } : {}),
    headers: {},
  });
  if (err instanceof ProblemError) {
    return {
      status: err.status,
      code: err.code,
      detail: err.message,
      ...(err.errors ? { errors: err.errors } : {}),
      headers: err.headers,
    };
  }
  if (err instanceof VaultError) {
    if (err.code === 'CURSOR_INVALID') {
      return plain(400, 'CURSOR_INVALID', err.message, [{ pointer: '/body/cursor', message: err.message }]);
    }
    if (err.code === 'INVALID_INPUT') return plain(400, 'VALIDATION_FAILED', err.message);
  }
  if (err instanceof TransparencyError) {
    const status = TRANSPARENCY_STATUS[err.code];
    return status !== undefined ? plain(status, err.code, err.message) : INTERNAL;
  }
  const fe = err as FastifyError;
  if (fe.validation) return plain(400, 'VALIDATION_FAILED', fe.message, fieldProblems(fe));
  switch (fe.code) {
    case 'FST_ERR_CTP_INVALID_MEDIA_TYPE':
    case 'FST_ERR_CTP_INVALID_CONTENT_LENGTH':
      return plain(
        415,
        'UNSUPPORTED_MEDIA_TYPE',
        `send ${req.routeOptions.config.accepts ?? 'application/json'}`,
      );
    case 'FST_ERR_CTP_BODY_TOO_LARGE':
      return plain(413, 'PAYLOAD_TOO_LARGE', fe.message);
    case 'FST_ERR_CTP_EMPTY_JSON_BODY':
    case 'FST_ERR_CTP_INVALID_JSON_BODY':
      return plain(400, 'MALFORMED_JSON', 'the body is not valid JSON');
  }
  if (fe instanceof SyntaxError || (fe.statusCode === 400 && /JSON/i.test(fe.message))) {
    return plain(400, 'MALFORMED_JSON', 'the body is not valid JSON');
  }
  if (typeof fe.statusCode === 'number' && fe.statusCode >= 400 && fe.statusCode < 500) {
    return plain(fe.statusCode, 'VALIDATION_FAILED', fe.message);
  }
  return INTERNAL;
}

/**
 * CBOR when the route says so; for requests no route matched, when the client asks for concise
 * problem details and not for JSON (a SCRAPI client at a wrong path).
 */
function wantsCbor(req: FastifyRequest): boolean {
  const format = req.routeOptions.config?.problem;
  if (format !== undefined) return format === 'cbor';
  const accept = req.headers.accept ?? '';
  return accept.includes(MediaType.problem) && !/application\/(?:problem\+)?json/.test(accept);
}

function send(req: FastifyRequest, reply: FastifyReply, failure: Failure): FastifyReply {
  reply.code(failure.status).headers(failure.headers);
  if (wantsCbor(req)) {
    return reply.type(MediaType.problem).send(
      encodeProblemDetails({
        title: STATUS_CODES[failure.status] ?? 'Error',
        detail: failure.detail,
        extra: new Map([['code', failure.code]]),
      }),
    );
  }
  return reply.type(PROBLEM_CONTENT_TYPE).send({
    ...problem(failure.status, failure.code, failure.detail, failure.errors),
    instance: req.url.split('?')[0],
  });
}

/** The problem code each failed request was answered with, for its request log line and metrics. */
const problemCodes = new WeakMap<FastifyRequest, string>();
export const problemCodeOf = (req: FastifyRequest): string | undefined => problemCodes.get(req);

/**
 * One error handler for the whole application, /v1 and SCRAPI alike: every failure is mapped once
 * (failureOf) and written as problem+json or, on the SCRAPI routes, as CBOR problem details; never
 * a stack trace.
 */
export function installErrorHandling(app: FastifyInstance): void {
  app.setErrorHandler((err: unknown, req: FastifyRequest, reply: FastifyReply) => {
    const failure = failureOf(err, req);
    problemCodes.set(req, failure.code);
    // The cause of a 5xx (never sent to the client); the request line itself comes on response.
    if (failure.status >= 500) req.log.error({ err }, 'request failed');
    return send(req, reply, failure);
  });
  app.setNotFoundHandler((req, reply) => {
    problemCodes.set(req, 'NOT_FOUND');
    return send(req, reply, {
      status: 404,
      code: 'NOT_FOUND',
      detail: `no route ${req.method} ${req.url.split('?')[0]}`,
      headers: {},
    });
  });
}
