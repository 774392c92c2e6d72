import type { FastifyInstance } from 'fastify';
import { ProblemError } from './problem.ts';

/**
 * The JSON body parser. Fastify's own refuses a member named `__proto__`, or a `constructor` member
 * holding `prototype` (prototype pollution, for code that merges bodies into objects), but reports
 * it as "not valid JSON", which misleads a client that sent well-formed JSON. This one refuses the
 * same members (found by JSON.parse's reviver, at any depth) and says why; anything else is parsed
 * as JSON.parse does. An empty or malformed body stays MALFORMED_JSON.
 */
export function installJsonBody(app: FastifyInstance): void {
  app.removeContentTypeParser('application/json');
  app.addContentTypeParser('application/json', { parseAs: 'string' }, (_req, body, done) => {
    let poisoned = false;
    let value: unknown;
    try {
      value = JSON.parse(body as string, (key, member: unknown) => {
        if (key === '__proto__' || (key === 'constructor' && hasPrototype(member))) poisoned = true;
        return member;
      });
    } catch {
      done(new ProblemError(400, 'MALFORMED_JSON', 'the body is not valid JSON'), undefined);
      return;
    }
    if (poisoned) {
      const why =
        'the body has a member named "__proto__", or a "constructor" member holding "prototype": ' +
        'refused (prototype pollution)';
      done(new ProblemError(400, 'MALFORMED_JSON', why), undefined);
      return;
    }
    done(null, value);
  });
}

function hasPrototype(value: unknown): boolean {
  return typeof value === 'object' && value !== null && Object.hasOwn(value, 'prototype');
}
