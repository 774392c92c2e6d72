import type { X509Certificate } from 'node:crypto';
import swagger from '@fastify/swagger';
import type { BlobStore } from '../blob/store.ts';
import { Histogram, type Registry } from 'prom-client';
import Fastify, { LogController, type FastifyBaseLogger, type FastifyInstance } from 'fastify';
import { DependenciesUnavailable } from '../health/dependencies.ts';
import type { Logger } from '../log/index.ts';
import { CLAIM_GENERATOR } from '../recorder/aibom.ts';
import type { Vault } from '../vault/index.ts';
import type { Transparency } from '../transparency/setup.ts';
import type { Authorizer } from './auth/authorizer.ts';
import { isAllowed } from './auth/plugin.ts';
import { ProblemError } from './problem.ts';
import { installAuth } from './auth/plugin.ts';
import { clientErrorHandler, frameworkErrors, installErrorHandling, problemCodeOf } from './error-handler.ts';
import { exportMetrics } from '../metrics/domain.ts';
import { installJsonBody } from './json-body.ts';
import { problemSchema } from './problem.ts';
import { transparencyViewSchema } from './schemas.ts';
import { attestationRoutes, attestationSchemas } from './routes/v1/attestations.ts';
import { chainRoutes, chainSchemas } from './routes/v1/chain.ts';
import { tlogRoutes } from './routes/v1/tlog.ts';
import { runDetailSchema, runPolicyPackSchema, runRoutes } from './routes/v1/runs.ts';
import { runListRoutes, runListSchemas } from './routes/v1/run-list.ts';
import type { PolicyPackSource } from './sources/policy-packs.ts';
import { uiRoutes } from './ui/routes.ts';
import { sessionCodec } from './ui/session.ts';
import { registerScrapiRoutes } from './routes/scrapi.ts';
import { auditPageSchema, auditRoutes } from './routes/v1/audit.ts';
import { exportBodySchema, exportRoutes } from './routes/v1/export.ts';
import { DEFAULT_EXPORT_IDLE_MS, DEFAULT_EXPORT_LIMIT } from '../export/service.ts';
import { exportPace } from '../export/pace.ts';
import { DEFAULT_EXPORT_CONCURRENCY, ExportSlots } from '../export/slots.ts';
import { keyEntrySchema, keyRoutes, trustBundleSchema } from './routes/v1/keys.ts';
import { exportKeys } from '../export/service-keys.ts';
import type { KeySigner } from '../signing/index.ts';

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
   * Roots of the TSAs whose time-stamps the export guard trusts (TSA_TRUST_ANCHORS): a manifest
   * time-stamped by one is judged at its time-stamp, so it still leaves after its signer expired.
   */
  readonly tsaTrustAnchors?: readonly X509Certificate[];
  /**
   * The transparency subsystem: POST /v1/attestations/scitt publishes through it, and the sidecar
   * serves its local log over SCRAPI (/entries, /.well-known/scitt-keys).
   */
  readonly transparency?: Transparency;
  /**
   * SERVICE_TRANSPARENCY_WRITER=1. Only then does the AIBOM metadata carry a `transparency` entry
   * (spec): the run detail's `artifacts.aibom` shows it exactly when `aibom.meta.json` and the Run's
   * status do, whatever jobs a push or an export enqueued meanwhile.
   */
  readonly transparencyWriter?: boolean;
  /**
   * Roots whose statements the SCRAPI endpoints accept for registration (other deployments'
   * signer CAs); default `trustAnchors`.
   */
  readonly scrapiTrustAnchors?: readonly X509Certificate[];
  /** Resolves when every dependency the API needs answers; drives /readyz. */
  readonly ready?: () => Promise<void>;
  /**
   * True once the process drains before it stops (SIGTERM: src/bin/lifecycle.ts `Drain`): every
   * answer then says `Connection: close`, so a client does not send its next request on a kept-alive
   * connection to this pod, which the listener's close would race (a reset request). Its next
   * connection goes through the Service to a pod that is ready.
   */
  readonly draining?: () => boolean;
  /** Where request metrics go (`http_request_duration_seconds`); served by the ops server. */
  readonly registry?: Registry;
  /** Largest accepted request body; queries are small. */
  readonly bodyLimit?: number;
  /**
   * The service signer: signs export bundles' own C2PA manifests (exports answer 503 without it).
   * A function when it follows its Secret (read per export, so a renewal is used at once).
   */
  readonly signer?: KeySigner | (() => KeySigner);
  /** EXPORT_MAX_ATTESTATIONS: largest selection one export may hold. */
  readonly exportLimit?: number;
  /** EXPORT_CONCURRENCY: exports streaming at once (at most half of them for one caller). */
  readonly exportConcurrency?: number;
  /** Closes an export whose client takes no byte for this long (default one minute; tests shorten it). */
  readonly exportIdleMs?: number;
  /**
   * EXPORT_MIN_BYTES_PER_SECOND: closes an export read slower than this over a window of twice the
   * idle time (0: no floor).
   */
  readonly exportMinBytesPerSecond?: number;
  /** How long a client may take to send a request, and keep a connection idle (HTTP_*_TIMEOUT_MS). */
  readonly timeouts?: Partial<HttpTimeouts>;
  /** The PolicyPack resources (GET /v1/runs/{id} `policy_pack`, the UI's export dialog). */
  readonly policyPacks?: PolicyPackSource;
  /** TLOG_PUBLIC: /v1/tlog/{log}/checkpoint and the hash tiles answer without authentication. */
  readonly tlogPublic?: boolean;
  /** TLOG_WITNESSES: the witnesses route lists them before they first answer. */
  readonly tlogWitnesses?: readonly { readonly url: string; readonly vkey: string }[];
}

/** Milliseconds; see docs/configuration.md (HTTP_REQUEST_TIMEOUT_MS and the others). */
export interface HttpTimeouts {
  /** The whole request, headers and body, must arrive within this time: else 408 and close. */
  readonly requestMs: number;
  /** The request headers must arrive within this time (at most requestMs): else 408 and close. */
  readonly headersMs: number;
  /** An idle keep-alive connection is closed after this time. */
  readonly keepAliveMs: number;
  /** A connection with no traffic in either direction for this long is destroyed. */
  readonly idleMs: number;
}

export const DEFAULT_HTTP_TIMEOUTS: HttpTimeouts = {
  requestMs: 30_000,
  headersMs: 10_000,
  keepAliveMs: 5_000,
  idleMs: 60_000,
};

/**
 * Every /v1 answer (JSON, problem+json, artifact bytes, manifests, export bundles) carries tenant
 * data or says something about it: no cache may keep it (`no-store`, unless the route chose its
 * own caching), and no browser may sniff a type other than the one sent (`nosniff`, always).
 * The UI's pages set the same through UI_HEADERS.
 */
function installApiHeaders(app: FastifyInstance): void {
  app.addHook('onSend', (req, reply, payload, done) => {
    const path = req.url.split('?', 1)[0]!;
    if (path === '/v1' || path.startsWith('/v1/')) {
      if (!reply.hasHeader('cache-control')) void reply.header('cache-control', 'no-store');
      void reply.header('x-content-type-options', 'nosniff');
    }
    done(null, payload);
  });
}

/** While draining, every answer closes its connection after it (see AppDeps.draining). */
function installDrainClose(app: FastifyInstance, draining: () => boolean): void {
  app.addHook('onSend', (_req, reply, payload, done) => {
    if (draining()) void reply.header('connection', 'close');
    done(null, payload);
  });
}

/** The Fastify instance with the service's limits, timeouts, strict validation and error shapes. */
function createFastify(deps: AppDeps, timeouts: HttpTimeouts): FastifyInstance {
  const loggerInstance: FastifyBaseLogger = deps.logger;
  return Fastify({
    loggerInstance,
    bodyLimit: deps.bodyLimit ?? 64 * 1024,
    // A client that never finishes its headers or body (a content-length it never sends) is cut
    // off with 408; idle connections are closed. Node checks the request timeouts every
    // connectionsCheckingInterval (default 30 s), so that interval is kept below the timeouts.
    requestTimeout: timeouts.requestMs,
    keepAliveTimeout: timeouts.keepAliveMs,
    connectionTimeout: timeouts.idleMs,
    http: {
      headersTimeout: timeouts.headersMs,
      requestTimeout: timeouts.requestMs,
      connectionsCheckingInterval: Math.max(50, Math.min(1000, Math.floor(timeouts.headersMs / 2))),
    },
    // Errors before routing (an undecodable URL, a malformed or too slow request) are problem+json
    // from the one error handler too, and quote nothing of the request.
    frameworkErrors,
    clientErrorHandler,
    // Strict validation: unknown fields are errors (not silently removed), no type coercion of bodies.
    ajv: { customOptions: { removeAdditional: false, coerceTypes: false, allErrors: true } },
    routerOptions: { ignoreTrailingSlash: true },
    // Fastify's two lines per request are replaced by one (the onResponse hook below).
    logController: new LogController({ disableRequestLogging: true }),
  });
}

/**
 * One log line per request, and the request metrics (`http_request_duration_seconds`, the export
 * counters) when a registry is given.
 */
function installRequestLog(app: FastifyInstance, registry: Registry | undefined): void {
  const requests = registry
    ? new Histogram({
        name: 'http_request_duration_seconds',
        help: 'Sidecar API request latency by route and status code',
        labelNames: ['method', 'route', 'code'],
        buckets: [0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5],
        registers: [registry],
      })
    : undefined;
  const exportCounters = registry ? exportMetrics(registry) : undefined;
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
    if (code === 'UNSIGNED_EXPORT_BLOCKED') exportCounters?.blocked();
    // The route pattern, not the URL: ids would make the label set unbounded.
    requests?.observe(
      { method: req.method, route: req.routeOptions.url ?? 'unmatched', code: String(status) },
      reply.elapsedTime / 1000,
    );
    done();
  });
}

/**
 * Builds the sidecar's Fastify application without listening, so tests drive it with `inject()`
 * and the entry point alone decides the address.
 */
export async function buildApp(deps: AppDeps): Promise<FastifyInstance> {
  const timeouts = { ...DEFAULT_HTTP_TIMEOUTS, ...deps.timeouts };
  if (timeouts.headersMs > timeouts.requestMs) {
    throw new RangeError('the headers timeout must not exceed the request timeout');
  }
  const app = createFastify(deps, timeouts);
  installRequestLog(app, deps.registry);
  installErrorHandling(app);
  installApiHeaders(app);
  if (deps.draining !== undefined) installDrainClose(app, deps.draining);
  // JSON only: a text/plain body is a client mistake (415), not a string to validate.
  app.removeContentTypeParser('text/plain');
  installJsonBody(app);
  for (const schema of [
    problemSchema,
    transparencyViewSchema,
    ...attestationSchemas,
    runDetailSchema,
    runPolicyPackSchema,
    ...runListSchemas,
    ...chainSchemas,
    exportBodySchema,
    keyEntrySchema,
    trustBundleSchema,
    auditPageSchema,
  ]) {
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
  // The UI's sessions and CSRF tokens: keys every replica derives alike (src/http/ui/session.ts).
  const sessions = sessionCodec(deps.vault.deriveKey('ui-session'), deps.vault.deriveKey('ui-csrf'));
  installAuth(app, deps.authorizer, sessions, deps.vault.uiSessions);

  app.get('/healthz', { config: { public: true }, schema: { hide: true } }, () => ({ status: 'ok' }));
  // Unauthenticated: the answer says ready or not, never why (a reason would name internal
  // addresses); the cause goes to the log.
  app.get('/readyz', { config: { public: true }, schema: { hide: true } }, async (req, reply) => {
    try {
      await deps.ready?.();
      return { status: 'ready' };
    } catch (err) {
      req.log.warn({ err }, 'not ready');
      // What is down, by name, never why or where (the error may name internal addresses).
      return reply
        .code(503)
        .send(
          err instanceof DependenciesUnavailable
            ? { status: 'not ready', unavailable: err.dependencies }
            : { status: 'not ready' },
        );
    }
  });
  app.get('/v1/openapi.json', { config: { public: true }, schema: { hide: true } }, () => app.swagger());

  attestationRoutes(app, deps);
  runRoutes(app, deps);
  runListRoutes(app, deps);
  chainRoutes(app, deps);
  tlogRoutes(app, {
    vault: deps.vault,
    authorizer: deps.authorizer,
    public: deps.tlogPublic === true,
    ...(deps.tlogWitnesses !== undefined ? { witnesses: deps.tlogWitnesses } : {}),
  });
  const keys = exportKeys(deps);
  const exports = {
    ...deps,
    ...keys,
    exportLimit: deps.exportLimit ?? DEFAULT_EXPORT_LIMIT,
    exportSlots: new ExportSlots(deps.exportConcurrency ?? DEFAULT_EXPORT_CONCURRENCY),
    exportPace: exportPace(deps.exportIdleMs ?? DEFAULT_EXPORT_IDLE_MS, deps.exportMinBytesPerSecond),
    claimGenerator: CLAIM_GENERATOR,
  };
  exportRoutes(app, exports);
  keyRoutes(app, { ...deps, ...keys });
  await app.register(uiRoutes, {
    authorizer: deps.authorizer,
    sessions,
    revocations: deps.vault.uiSessions,
    exports,
  });
  auditRoutes(app, deps);
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
