import { STATUS_CODES } from 'node:http';
import type { Duplex } from 'node:stream';
import type { FastifyError, FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { TransparencyError, type TransparencyErrorCode } from '../transparency/errors.ts';
import { MediaType } from '../transparency/media-types.ts';
import { encodeProblemDetails } from '../transparency/problem-details.ts';
import { ObjectStoreError } from '../blob/store.ts';
import { isVaultUnavailable, VaultError } from '../vault/index.ts';
import { trackAllowedMethods } from './allowed-methods.ts';
import { problem, ProblemError, PROBLEM_CONTENT_TYPE, type FieldProblem } from './problem.ts';
import { NO_CONTROL_PATTERN } from './schemas.ts';
import { UI_HEADERS } from './ui/layout.ts';
import { errorPage } from './ui/pages/misc.ts';

declare module 'fastify' {
  interface FastifyContextConfig {
    /**
     * How this route writes its errors: RFC 9457 problem+json (default) or RFC 9290 concise problem
     * details in CBOR (`cbor`, the SCRAPI routes), or an HTML page (`html`, the UI's pages). The
     * failure and its code are the same either way.
     */
    problem?: 'json' | 'cbor' | 'html';
    /** The body media type the route accepts, named in a 415 answer; default application/json. */
    accepts?: string;
    /** A catch-all that answers "no such page" (the UI's `/ui/*`): it serves no path, so no 405 names it. */
    notFoundPage?: boolean;
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

/** A property name as a JSON pointer token (RFC 6901: `~` → `~0`, `/` → `~1`), at most 64 characters. */
const pointerToken = (name: string): string => name.slice(0, 64).replaceAll('~', '~0').replaceAll('/', '~1');

/** Fastify/Ajv validation issues → JSON pointers into the request (`/body/limit`). */
function fieldProblems(err: FastifyError): FieldProblem[] {
  const where = (err as { validationContext?: string }).validationContext ?? 'body';
  const issues = (err as { validation?: AjvIssue[] }).validation ?? [];
  return issues.map((v) => {
    let pointer = `/${where}${v.instancePath ?? ''}`;
    if (v.keyword === 'additionalProperties' && typeof v.params?.additionalProperty === 'string') {
      pointer += `/${pointerToken(v.params.additionalProperty)}`;
      return { pointer, message: 'unknown field' };
    }
    if (v.keyword === 'required' && typeof v.params?.missingProperty === 'string') {
      pointer += `/${v.params.missingProperty}`;
    }
    if (v.keyword === 'pattern' && v.params?.pattern === NO_CONTROL_PATTERN) {
      return { pointer, message: 'must not contain control characters' };
    }
    return { pointer, message: v.message ?? 'invalid' };
  });
}

/**
 * How long a client is told to wait when PostgreSQL or the object store is down or hung. Calls to
 * both have deadlines (S3_TIMEOUT_MS, PG_*_TIMEOUT_MS), so this answer comes within the deadline,
 * never after a hang.
 */
export const UPSTREAM_RETRY_AFTER_SECONDS = 5;

const upstream = (what: string): Failure => ({
  status: 503,
  code: 'UPSTREAM_UNAVAILABLE',
  // Names the dependency only: addresses and driver messages stay in the server log.
  detail: `${what} is unavailable or did not answer in time; retry later`,
  headers: { 'retry-after': String(UPSTREAM_RETRY_AFTER_SECONDS) },
});

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
  if (err instanceof ObjectStoreError) return upstream('the object store');
  if (err instanceof TransparencyError) {
    const status = TRANSPARENCY_STATUS[err.code];
    return status !== undefined ? plain(status, err.code, err.message) : INTERNAL;
  }
  if (isVaultUnavailable(err)) return upstream('the vault (PostgreSQL)');
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
  if (fe.code === 'FST_ERR_BAD_URL') return plain(400, 'VALIDATION_FAILED', 'the URL is not valid');
  // Other framework 4xx: a fixed text, never the framework's message (it may quote the request).
  if (typeof fe.statusCode === 'number' && fe.statusCode >= 400 && fe.statusCode < 500) {
    return plain(fe.statusCode, 'VALIDATION_FAILED', STATUS_CODES[fe.statusCode] ?? 'bad request');
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
  if (req.routeOptions.config?.problem === 'html') {
    const { title } = problem(failure.status, failure.code);
    return reply
      .headers(UI_HEADERS)
      .type('text/html; charset=utf-8')
      .send(
        errorPage(undefined, { status: failure.status, code: failure.code, title, detail: failure.detail }),
      );
  }
  if (wantsCbor(req)) {
    return reply.type(MediaType.problem).send(
      encodeProblemDetails({
        title: STATUS_CODES[failure.status] ?? 'Error',
        detail: failure.detail,
        extra: new Map([['code', failure.code]]),
      }),
    );
  }
  // `instance` is the route's pattern (`/v1/attestations/:id`), never the URL as sent: no error
  // echoes the request's path or query string.
  const route = req.routeOptions.url;
  return reply.type(PROBLEM_CONTENT_TYPE).send({
    ...problem(failure.status, failure.code, failure.detail, failure.errors),
    ...(route !== undefined ? { instance: route } : {}),
  });
}

/** The problem code each failed request was answered with, for its request log line and metrics. */
const problemCodes = new WeakMap<FastifyRequest, string>();
export const problemCodeOf = (req: FastifyRequest): string | undefined => problemCodes.get(req);

/**
 * Errors raised before any request object exists (Node's HTTP parser: malformed request line or
 * headers, header or body timeouts, oversized headers): written straight to the socket, as
 * problem+json like every other error, and the connection is closed.
 */
export function clientErrorHandler(err: NodeJS.ErrnoException, socket: Duplex): void {
  if (err.code === 'ECONNRESET' || socket.destroyed) return;
  const [status, code, detail] =
    err.code === 'ERR_HTTP_REQUEST_TIMEOUT'
      ? [408, 'REQUEST_TIMEOUT', 'the request was not received in time']
      : err.code === 'HPE_HEADER_OVERFLOW'
        ? [431, 'VALIDATION_FAILED', 'the request headers are too large']
        : [400, 'VALIDATION_FAILED', 'the request is not valid HTTP'];
  if (socket.writable) {
    const body = JSON.stringify(problem(status, code, detail));
    socket.write(
      `HTTP/1.1 ${status} ${STATUS_CODES[status]}\r\nConnection: close\r\nContent-Type: ${PROBLEM_CONTENT_TYPE}\r\n` +
        `Content-Length: ${Buffer.byteLength(body)}\r\n\r\n${body}`,
    );
  }
  socket.destroy();
}

/** Fastify's `frameworkErrors` hook (a URL it cannot decode): mapped and written like any other error. */
export function frameworkErrors(err: FastifyError, req: FastifyRequest, reply: FastifyReply): void {
  void send(req, reply, failureOf(err, req));
}

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
    if (failure.status === 503)
      req.log.warn({ err, code: failure.code }, 'request failed: upstream unavailable');
    else if (failure.status >= 500) req.log.error({ err }, 'request failed');
    return send(req, reply, failure);
  });
  const allowedOn = trackAllowedMethods(app);
  app.setNotFoundHandler((req, reply) => {
    const allowed = allowedOn(req.url.split('?', 1)[0]!);
    if (allowed.length > 0 && !allowed.includes(req.method)) {
      problemCodes.set(req, 'METHOD_NOT_ALLOWED');
      return send(req, reply, {
        status: 405,
        code: 'METHOD_NOT_ALLOWED',
        detail: `${req.method} is not served here; this path takes ${allowed.join(', ')}`,
        headers: { allow: allowed.join(', ') },
      });
    }
    problemCodes.set(req, 'NOT_FOUND');
    return send(req, reply, { status: 404, code: 'NOT_FOUND', detail: 'no such route', headers: {} });
  });
}
