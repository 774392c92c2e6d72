import type { FastifyError, FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { VaultError } from '../vault/index.ts';
import { problem, ProblemError, PROBLEM_CONTENT_TYPE, type FieldProblem, type Problem } from './problem.ts';

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

function toProblem(err: unknown): { body: Problem; headers: Record<string, string> } {
  if (err instanceof ProblemError) {
    return { body: problem(err.status, err.code, err.message, err.errors), headers: { ...err.headers } };
  }
  if (err instanceof VaultError) {
    if (err.code === 'CURSOR_INVALID') {
      return {
        body: problem(400, 'CURSOR_INVALID', err.message, [
          { pointer: '/body/cursor', message: err.message },
        ]),
        headers: {},
      };
    }
    if (err.code === 'INVALID_INPUT')
      return { body: problem(400, 'VALIDATION_FAILED', err.message), headers: {} };
  }
  const fe = err as FastifyError;
  if (fe.validation)
    return { body: problem(400, 'VALIDATION_FAILED', fe.message, fieldProblems(fe)), headers: {} };
  switch (fe.code) {
    case 'FST_ERR_CTP_INVALID_MEDIA_TYPE':
    case 'FST_ERR_CTP_INVALID_CONTENT_LENGTH':
      return { body: problem(415, 'UNSUPPORTED_MEDIA_TYPE', 'send application/json'), headers: {} };
    case 'FST_ERR_CTP_BODY_TOO_LARGE':
      return { body: problem(413, 'PAYLOAD_TOO_LARGE', fe.message), headers: {} };
    case 'FST_ERR_CTP_EMPTY_JSON_BODY':
    case 'FST_ERR_CTP_INVALID_JSON_BODY':
      return { body: problem(400, 'MALFORMED_JSON', 'the body is not valid JSON'), headers: {} };
  }
  if (fe instanceof SyntaxError || (fe.statusCode === 400 && /JSON/i.test(fe.message))) {
    return { body: problem(400, 'MALFORMED_JSON', 'the body is not valid JSON'), headers: {} };
  }
  if (typeof fe.statusCode === 'number' && fe.statusCode >= 400 && fe.statusCode < 500) {
    return { body: problem(fe.statusCode, 'VALIDATION_FAILED', fe.message), headers: {} };
  }
  return { body: problem(500, 'INTERNAL', 'internal error; see the server log'), headers: {} };
}

/** One error handler for the whole API: problem+json, never a stack trace. */
export function installErrorHandling(app: FastifyInstance): void {
  app.setErrorHandler((err: unknown, req: FastifyRequest, reply: FastifyReply) => {
    const { body, headers } = toProblem(err);
    if (body.status >= 500) req.log.error({ err }, 'request failed');
    else req.log.debug({ code: body.code }, 'request rejected');
    return reply
      .code(body.status)
      .headers(headers)
      .type(PROBLEM_CONTENT_TYPE)
      .send({ ...body, instance: req.url.split('?')[0] });
  });
  app.setNotFoundHandler((req, reply) =>
    reply
      .code(404)
      .type(PROBLEM_CONTENT_TYPE)
      .send({
        ...problem(404, 'NOT_FOUND', `no route ${req.method} ${req.url.split('?')[0]}`),
        instance: req.url,
      }),
  );
}
