import type { X509Certificate } from 'node:crypto';
import type { FastifyInstance, FastifyRequest } from 'fastify';
import type { LocalLog } from '../../transparency/local-log.ts';
import { MediaType } from '../../transparency/media-types.ts';
import { createScrapiServer, type RegistrationMode } from '../../transparency/scrapi-server.ts';
import { ProblemError } from '../problem.ts';
import { typed } from '../typed.ts';

export type { RegistrationMode } from '../../transparency/scrapi-server.ts';

/**
 * Serves the local log over SCRAPI so that one deployment can publish to another:
 *
 *   POST {prefix}/entries                       application/cose → 201 receipt (new entry),
 *                                                200 receipt (already registered), or, in async
 *                                                mode, 303 + Location + Retry-After
 *   GET  {prefix}/entries/:id                   200 receipt, 302 while pending, 404
 *   GET  /.well-known/scitt-keys                COSE Key Set of the log key (application/cbor)
 *   GET  /.well-known/transparency-configuration  CBOR map (issuer, endpoints, algorithms)
 *
 * Errors are RFC 9290 CBOR problem details (`application/concise-problem-details+cbor`) with the
 * stable code under the text key "code", written by the application's one error handler
 * (../error-handler.ts, which these routes ask for CBOR through `config.problem`; mount them on an
 * app that installed it). The registration policy and the pending appends are
 * src/transparency/scrapi-server.ts; this file maps its answers to HTTP.
 *
 * Authentication is the caller's: routes are marked `config.public` per `deps.public` (for the
 * sidecar's bearer-token hook), and `deps.authorize` runs before every entries route.
 */

export type ScrapiAction = 'register' | 'read';

export interface ScrapiRouteDeps {
  readonly log: LocalLog;
  /** Roots a statement's x5chain must lead to; absent = signature and did:x509 binding only. */
  readonly trustAnchors?: readonly X509Certificate[];
  /** Runs before each entries route; throw (e.g. a ProblemError 401/403) to refuse. */
  readonly authorize?: (req: FastifyRequest, action: ScrapiAction) => Promise<void> | void;
  /** Marks the entries routes `config.public` (skipped by the sidecar's bearer hook). Default false. */
  readonly public?: boolean;
  /** Path prefix of the entries routes, e.g. `/scitt`; the well-known routes stay at the root. */
  readonly prefix?: string;
  /** Largest statement accepted. Default 64 KiB. */
  readonly maxStatementBytes?: number;
  readonly registration?: RegistrationMode;
}

const ENTRY_ID = '^[0-9a-f]{64}$';

export async function registerScrapiRoutes(app: FastifyInstance, deps: ScrapiRouteDeps): Promise<void> {
  const prefix = (deps.prefix ?? '').replace(/\/+$/, '');
  const maxBytes = deps.maxStatementBytes ?? 64 * 1024;
  const server = createScrapiServer({
    log: deps.log,
    ...(deps.trustAnchors !== undefined ? { trustAnchors: deps.trustAnchors } : {}),
    ...(deps.registration !== undefined ? { registration: deps.registration } : {}),
  });
  // Errors of these routes are CBOR problem details (written by the app's one error handler).
  const config = { public: deps.public ?? false, problem: 'cbor' } as const;
  const entryUrl = (id: string): string => `${prefix}/entries/${id}`;

  const authorize = async (req: FastifyRequest, action: ScrapiAction): Promise<void> => {
    if (deps.authorize !== undefined) await deps.authorize(req, action);
  };

  // eslint-disable-next-line @typescript-eslint/require-await -- Fastify plugins are async functions
  await app.register(async (scope) => {
    // Only COSE bodies here; everything else is 415 before any handler runs.
    scope.removeAllContentTypeParsers();
    scope.addContentTypeParser(
      MediaType.cose,
      { parseAs: 'buffer', bodyLimit: maxBytes },
      (_req, body, done) => {
        done(null, body);
      },
    );

    scope.post(
      `${prefix}/entries`,
      {
        config: { ...config, accepts: MediaType.cose },
        schema: { hide: true },
        preHandler: async (req) => authorize(req, 'register'),
      },
      async (req, reply) => {
        const result = await server.register(req.body, (err, entryId) =>
          req.log.error({ err, entryId }, 'background SCITT registration failed'),
        );
        if (result.status === 303) {
          return reply
            .code(303)
            .header('location', entryUrl(result.entryId))
            .header('retry-after', String(result.retryAfterSeconds))
            .send();
        }
        return reply
          .code(result.status)
          .header('location', entryUrl(result.entryId))
          .type(MediaType.cose)
          .send(result.receipt);
      },
    );

    typed(scope).get(
      `${prefix}/entries/:id`,
      {
        config,
        schema: {
          hide: true,
          params: {
            type: 'object',
            required: ['id'],
            properties: { id: { type: 'string', pattern: ENTRY_ID } },
          },
        },
        preHandler: async (req) => authorize(req, 'read'),
      },
      async (req, reply) => {
        const { id } = req.params;
        const entry = await server.entry(id);
        if (entry.status === 200) return reply.code(200).type(MediaType.cose).send(entry.receipt);
        if (entry.status === 302) {
          return reply
            .code(302)
            .header('location', entryUrl(id))
            .header('retry-after', String(entry.retryAfterSeconds))
            .send();
        }
        throw new ProblemError(500, 'REGISTRATION_FAILED', `registration of ${id} failed; submit it again`);
      },
    );

    scope.get(
      '/.well-known/scitt-keys',
      { config: { public: true, problem: 'cbor' }, schema: { hide: true } },
      async (_req, reply) => reply.type(MediaType.cbor).send(server.keySet()),
    );

    scope.get(
      '/.well-known/transparency-configuration',
      { config: { public: true, problem: 'cbor' }, schema: { hide: true } },
      async (_req, reply) => reply.type(MediaType.cbor).send(server.configuration(prefix)),
    );
  });
}
