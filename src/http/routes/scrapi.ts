import type { X509Certificate } from 'node:crypto';
import type { FastifyInstance, FastifyRequest } from 'fastify';
import { encodeCbor } from '../../cose/cbor.ts';
import { encodeKeySet } from '../../cose/key.ts';
import { TransparencyError } from '../../transparency/errors.ts';
import type { LocalLog } from '../../transparency/local-log.ts';
import { MediaType } from '../../transparency/media-types.ts';
import { leafHash } from '../../transparency/merkle.ts';
import { entryOf } from '../../transparency/receipt.ts';
import { verifySignedStatement } from '../../transparency/statement.ts';
import { ProblemError } from '../problem.ts';

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
 * app that installed it). Registration policy: the statement must verify
 * (signature by its x5chain leaf, did:x509 `iss` bound to the chain) and, when `trustAnchors` are
 * configured, its chain must lead to one of them.
 *
 * Authentication is the caller's: routes are marked `config.public` per `deps.public` (for the
 * sidecar's bearer-token hook), and `deps.authorize` runs before every entries route.
 */

export type ScrapiAction = 'register' | 'read';

export type RegistrationMode =
  | { readonly mode: 'sync' }
  | {
      /**
       * Answer 303 at once and append in the background (how a service that batches behaves).
       * The pending set lives in this process: run it on one replica, or behind sticky routing.
       */
      readonly mode: 'async';
      readonly retryAfterSeconds?: number;
      /** Runs the append; default `setImmediate`. Tests pass a gate to observe the pending state. */
      readonly schedule?: (task: () => Promise<void>) => void;
    };

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

interface Pending {
  state: 'pending' | 'failed';
  error?: string;
}

const ENTRY_ID = '^[0-9a-f]{64}$';

export async function registerScrapiRoutes(app: FastifyInstance, deps: ScrapiRouteDeps): Promise<void> {
  const prefix = (deps.prefix ?? '').replace(/\/+$/, '');
  const maxBytes = deps.maxStatementBytes ?? 64 * 1024;
  const registration = deps.registration ?? { mode: 'sync' };
  // Errors of these routes are CBOR problem details (written by the app's one error handler).
  const config = { public: deps.public ?? false, problem: 'cbor' } as const;
  const pending = new Map<string, Pending>();
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
        const statement = req.body;
        if (!Buffer.isBuffer(statement) || statement.length === 0) {
          throw new TransparencyError('MALFORMED_STATEMENT', 'the body is not a COSE_Sign1 statement');
        }
        verifySignedStatement(
          statement,
          deps.trustAnchors !== undefined ? { trustAnchors: deps.trustAnchors } : {},
        );
        if (registration.mode === 'sync') {
          const result = await deps.log.append(statement);
          return reply
            .code(result.created ? 201 : 200)
            .header('location', entryUrl(result.entryId))
            .type(MediaType.cose)
            .send(result.receipt);
        }
        const entryId = leafHash(entryOf(statement)).toString('hex');
        const existing = await deps.log.getEntry(entryId);
        if (existing !== null) {
          return reply
            .code(200)
            .header('location', entryUrl(entryId))
            .type(MediaType.cose)
            .send(existing.receipt);
        }
        if (pending.get(entryId)?.state !== 'pending') {
          pending.set(entryId, { state: 'pending' });
          const task = async (): Promise<void> => {
            try {
              await deps.log.append(statement);
              pending.delete(entryId);
            } catch (err) {
              req.log.error({ err, entryId }, 'background SCITT registration failed');
              pending.set(entryId, { state: 'failed', error: (err as Error).message });
            }
          };
          (registration.schedule ?? ((t) => void setImmediate(() => void t())))(task);
        }
        return reply
          .code(303)
          .header('location', entryUrl(entryId))
          .header('retry-after', String(registration.retryAfterSeconds ?? 1))
          .send();
      },
    );

    scope.get<{ Params: { id: string } }>(
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
        const entry = await deps.log.getEntry(id);
        if (entry !== null) return reply.code(200).type(MediaType.cose).send(entry.receipt);
        const job = pending.get(id);
        if (job?.state === 'pending') {
          const retry = registration.mode === 'async' ? (registration.retryAfterSeconds ?? 1) : 1;
          return reply.code(302).header('location', entryUrl(id)).header('retry-after', String(retry)).send();
        }
        if (job?.state === 'failed') {
          pending.delete(id);
          throw new ProblemError(500, 'REGISTRATION_FAILED', `registration of ${id} failed; submit it again`);
        }
        throw new TransparencyError('ENTRY_NOT_FOUND', `no entry ${id}`, { retryable: false });
      },
    );

    scope.get(
      '/.well-known/scitt-keys',
      { config: { public: true, problem: 'cbor' }, schema: { hide: true } },
      async (_req, reply) => reply.type(MediaType.cbor).send(encodeKeySet(deps.log.keys)),
    );

    scope.get(
      '/.well-known/transparency-configuration',
      { config: { public: true, problem: 'cbor' }, schema: { hide: true } },
      async (_req, reply) =>
        reply.type(MediaType.cbor).send(
          encodeCbor(
            new Map<string, unknown>([
              ['issuer', deps.log.issuer],
              ['registration_endpoint', `${prefix}/entries`],
              ['scitt_keys', '/.well-known/scitt-keys'],
              ['verifiable_data_structures', [1]],
            ]),
          ),
        ),
    );
  });
}
