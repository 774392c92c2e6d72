import type { X509Certificate } from 'node:crypto';
import swagger from '@fastify/swagger';
import type { BlobStore } from '../blob/store.ts';
import { Histogram, type Registry } from 'prom-client';
import Fastify, { LogController, type FastifyBaseLogger, type FastifyInstance } from 'fastify';
import type { Logger } from '../log/index.ts';
import type { Vault } from '../vault/index.ts';
import type { Transparency } from '../transparency/setup.ts';
import type { Authorizer } from './auth/authorizer.ts';
import { isAllowed } from './auth/plugin.ts';
import { ProblemError } from './problem.ts';
import { installAuth } from './auth/plugin.ts';
import { installErrorHandling, problemCodeOf } from './error-handler.ts';
import { exportMetrics } from '../metrics/domain.ts';
import { problemSchema } from './problem.ts';
import { transparencyViewSchema } from './schemas.ts';
import { attestationRoutes, attestationSchemas } from './routes/v1/attestations.ts';
import { runDetailSchema, runRoutes } from './routes/v1/runs.ts';
import { registerScrapiRoutes } from './routes/scrapi.ts';

export interface AppDeps {
  readonly logger: Logger;
  readonly vault: Vault;
  readonly authorizer: Authorizer;
  readonly listNamespaces: () => Promise<string[]>;
  readonly blobs: BlobStore;
  /** SERVICE_REQUIRE_SIGNED_EXPORTS */
  readonly requireSignedExports: boolean;
  /** CA certificates artifacts' C2PA manifests must chain to (the service signer's ca.crt). */
  readonly trustAnchors: readonly X509Certificate[];
  /**
   * The transparency subsystem: POST /v1/attestations/scitt publishes through it, and the sidecar
   * serves its local log over SCRAPI (/entries, /.well-known/scitt-keys).
   */
  readonly transparency?: Transparency;
  /**
   * Roots whose statements the SCRAPI endpoints accept for registration (other deployments'
   * signer CAs); default `trustAnchors`.
   */
  readonly scrapiTrustAnchors?: readonly X509Certificate[];
  /** Resolves when every dependency the API needs answers; drives /readyz. */
  readonly ready?: () => Promise<void>;
  /** Where request metrics go (`http_request_duration_seconds`); served by the ops server. */
  readonly registry?: Registry;
  /** Largest accepted request body; queries are small. */
  readonly bodyLimit?: number;
}

/**
 * Builds the sidecar's Fastify application without listening, so tests drive it with `inject()`
 * and the entry point alone decides the address.
 */
export async function buildApp(deps: AppDeps): Promise<FastifyInstance> {
  const loggerInstance: FastifyBaseLogger = deps.logger;
  const app = Fastify({
    loggerInstance,
    bodyLimit: deps.bodyLimit ?? 64 * 1024,
    // Strict validation: unknown fields are errors (not silently removed), no type coercion of bodies.
    ajv: { customOptions: { removeAdditional: false, coerceTypes: false, allErrors: true } },
    routerOptions: { ignoreTrailingSlash: true },
    // Fastify's two lines per request are replaced by one (the onResponse hook below).
    logController: new LogController({ disableRequestLogging: true }),
  });
  const requests = deps.registry
    ? new Histogram({
        name: 'http_request_duration_seconds',
        help: 'Sidecar API request latency by route and status code',
        labelNames: ['method', 'route', 'code'],
        buckets: [0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5],
        registers: [deps.registry],
      })
    : undefined;
  const exports = deps.registry ? exportMetrics(deps.registry) : undefined;
  app.addHook('onResponse', (req, reply, done) => {
    const status = reply.statusCode;
    const code = problemCodeOf(req);
    // One line per request: refusals of credentials at warn, other client errors (a 404, a 409
    // conflict, a blocked export) at info, failures at error.
    const level = status >= 500 ? 'error' : status === 401 || status === 403 ? 'warn' : 'info';
    req.log[level](
      {
        method: req.method,
        path: req.url.split('?')[0],
        route: req.routeOptions.url ?? null,
        status,
        ms: Math.round(reply.elapsedTime * 100) / 100,
        ...(code !== undefined ? { code } : {}),
        ...(req.user?.username !== undefined ? { user: req.user.username } : {}),
      },
      'request',
    );
    if (code === 'UNSIGNED_EXPORT_BLOCKED') exports?.blocked();
    // The route pattern, not the URL: ids would make the label set unbounded.
    requests?.observe(
      { method: req.method, route: req.routeOptions.url ?? 'unmatched', code: String(status) },
      reply.elapsedTime / 1000,
    );
    done();
  });
  installErrorHandling(app);
  // JSON only: a text/plain body is a client mistake (415), not a string to validate.
  app.removeContentTypeParser('text/plain');
  for (const schema of [problemSchema, transparencyViewSchema, ...attestationSchemas, runDetailSchema]) {
    app.addSchema(schema);
  }
  await app.register(swagger, {
    openapi: {
      openapi: '3.1.0',
      info: {
        title: 'aibom-vault API',
        version: 'v1',
        description:
          'Attestation vault and AI Bill of Materials. Errors are RFC 9457 problem+json with a stable `code`.',
      },
      components: { securitySchemes: { bearer: { type: 'http', scheme: 'bearer' } } },
      security: [{ bearer: [] }],
    },
    refResolver: {
      buildLocalReference: (json, _base, _frag, i) => (typeof json.$id === 'string' ? json.$id : `def-${i}`),
    },
  });
  installAuth(app, deps.authorizer);

  app.get('/healthz', { config: { public: true }, schema: { hide: true } }, () => ({ status: 'ok' }));
  app.get('/readyz', { config: { public: true }, schema: { hide: true } }, async (_req, reply) => {
    try {
      await deps.ready?.();
      return { status: 'ready' };
    } catch (err) {
      return reply.code(503).send({ status: 'not ready', reason: (err as Error).message });
    }
  });
  app.get('/v1/openapi.json', { config: { public: true }, schema: { hide: true } }, () => app.swagger());

  attestationRoutes(app, deps);
  runRoutes(app, deps);
  if (deps.transparency) {
    // Registering a statement in this service's own log is a cluster-wide right.
    await registerScrapiRoutes(app, {
      log: deps.transparency.log,
      trustAnchors: [...(deps.scrapiTrustAnchors ?? deps.trustAnchors)],
      authorize: async (req, action) => {
        if (action === 'read') return;
        if (
          !(await isAllowed(deps.authorizer, req, {
            namespace: '',
            verb: 'create',
            resource: 'attestations',
            subresource: 'scitt',
          }))
        ) {
          throw new ProblemError(
            403,
            'FORBIDDEN',
            'registering statements needs create on attestations/scitt',
          );
        }
      },
    });
  }
  await app.ready();
  return app;
}
