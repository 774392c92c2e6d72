import type { X509Certificate } from 'node:crypto';
import type { FastifyError, FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { encodeCbor } from '../cose/cbor.ts';
import { encodeKeySet } from '../cose/key.ts';
import { MediaType } from './media-types.ts';
import { verifySignedStatement } from './statement.ts';
import { isTransparencyError, TransparencyError, type TransparencyErrorCode } from './errors.ts';
import type { LocalLog } from './local-log.ts';
import { leafHash } from './merkle.ts';
import { entryOf } from './receipt.ts';
import { encodeProblemDetails } from './problem-details.ts';

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
 * stable code under the text key "code". Registration policy: the statement must verify
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

const STATUS_OF: Partial<Record<TransparencyErrorCode, number>> = {
  MALFORMED_STATEMENT: 400,
  STATEMENT_SIGNATURE_INVALID: 400,
  ISSUER_MISMATCH: 400,
  UNTRUSTED_ISSUER: 400,
  ENTRY_NOT_FOUND: 404,
  INVALID_TREE_SIZE: 400,
};

const TITLES: Record<number, string> = {
  400: 'Bad Request',
  401: 'Unauthorized',
  403: 'Forbidden',
  404: 'Not Found',
  405: 'Method Not Allowed',
  413: 'Payload Too Large',
  415: 'Unsupported Media Type',
  429: 'Too Many Requests',
  500: 'Internal Server Error',
  503: 'Service Unavailable',
};

function sendProblem(
  reply: FastifyReply,
  status: number,
  code: string,
  detail: string,
  headers: Readonly<Record<string, string>> = {},
): FastifyReply {
  return reply
    .code(status)
    .headers(headers)
    .type(MediaType.problem)
    .send(
      encodeProblemDetails({
        title: TITLES[status] ?? 'Error',
        detail,
        extra: new Map([['code', code]]),
      }),
    );
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
  const isPublic = deps.public ?? false;
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

    scope.setErrorHandler((err: unknown, req: FastifyRequest, reply: FastifyReply) => {
      if (isTransparencyError(err)) {
        const status = STATUS_OF[err.code] ?? 500;
        if (status >= 500) req.log.error({ err }, 'SCRAPI request failed');
        return sendProblem(reply, status, err.code, status >= 500 ? 'internal error' : err.message);
      }
      const e = err as FastifyError & { status?: number; headers?: Record<string, string>; code?: string };
      const status = e.status ?? e.statusCode ?? 500;
      if (status >= 500) {
        req.log.error({ err }, 'SCRAPI request failed');
        return sendProblem(reply, status, 'INTERNAL', 'internal error; see the server log', e.headers ?? {});
      }
      const code =
        e.code === 'FST_ERR_CTP_INVALID_MEDIA_TYPE'
          ? 'UNSUPPORTED_MEDIA_TYPE'
          : e.code === 'FST_ERR_CTP_BODY_TOO_LARGE'
            ? 'PAYLOAD_TOO_LARGE'
            : e.validation !== undefined
              ? 'VALIDATION_FAILED'
              : (e.code ?? 'BAD_REQUEST');
      const detail = code === 'UNSUPPORTED_MEDIA_TYPE' ? `send ${MediaType.cose}` : e.message;
      return sendProblem(reply, status, code, detail, e.headers ?? {});
    });

    scope.post(
      `${prefix}/entries`,
      {
        config: { public: isPublic },
        schema: { hide: true },
        preHandler: async (req) => authorize(req, 'register'),
      },
      async (req, reply) => {
        const statement = req.body;
        if (!Buffer.isBuffer(statement) || statement.length === 0) {
          return sendProblem(reply, 400, 'MALFORMED_STATEMENT', 'the body is not a COSE_Sign1 statement');
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
        config: { public: isPublic },
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
          return sendProblem(
            reply,
            500,
            'REGISTRATION_FAILED',
            `registration of ${id} failed; submit it again`,
          );
        }
        throw new TransparencyError('ENTRY_NOT_FOUND', `no entry ${id}`, { retryable: false });
      },
    );

    scope.get(
      '/.well-known/scitt-keys',
      { config: { public: true }, schema: { hide: true } },
      async (_req, reply) => reply.type(MediaType.cbor).send(encodeKeySet(deps.log.keys)),
    );

    scope.get(
      '/.well-known/transparency-configuration',
      { config: { public: true }, schema: { hide: true } },
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
