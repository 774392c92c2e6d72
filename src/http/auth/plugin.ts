import type { FastifyInstance, FastifyRequest } from 'fastify';
import { ProblemError, upstreamUnavailable } from '../problem.ts';
import { bindingOf, CSRF_HEADER, parseCookies, SESSION_COOKIE, type SessionCodec } from '../ui/session.ts';
import type { Authorizer, ResourceAttributes, UserInfo } from './authorizer.ts';

declare module 'fastify' {
  interface FastifyRequest {
    /** Set by the auth hook on every authenticated route. */
    user?: UserInfo;
    /** The credential `user` was authenticated with. */
    credential?: Credential;
  }
  interface FastifyContextConfig {
    /** Routes that answer without a token (health, OpenAPI). Everything else authenticates. */
    public?: boolean;
    /**
     * The UI's pages and forms: authenticated like /v1 when a credential comes, but one that is
     * missing or refused leaves `req.user` unset (the page sends the browser to sign in) instead
     * of answering 401; their forms check their CSRF token themselves (src/http/ui/routes.ts).
     */
    ui?: boolean;
  }
}

/**
 * How a request proves who it is: `Authorization: Bearer` (the CLI, an authenticating proxy in
 * front of the UI), else the UI's session cookie (a token pasted on the sign-in page, sealed).
 * The header wins when both come.
 */
export interface Credential {
  readonly token: string;
  readonly via: 'bearer' | 'session';
  /** The session's id (what its CSRF token is bound to, and what sign-out revokes). */
  readonly sid?: string;
  /** When the session's cookie expires (epoch ms). */
  readonly exp?: number;
}

/** Sessions ended by sign-out, as every replica sees them (the vault's ui_session_revocations). */
export interface SessionRevocations {
  isRevoked(sid: string): Promise<boolean>;
}

const SAFE_METHODS = new Set(['GET', 'HEAD', 'OPTIONS']);

/** The request's credential; null when it brings none; throws 401 for a malformed header. */
export function credentialOf(req: FastifyRequest, sessions: SessionCodec | undefined): Credential | null {
  const header = req.headers.authorization;
  if (header !== undefined) {
    const match = /^Bearer\s+(\S+)\s*$/i.exec(header);
    if (!match) {
      throw new ProblemError(401, 'UNAUTHENTICATED', 'send Authorization: Bearer <token>', {
        headers: { 'www-authenticate': 'Bearer realm="aibom-vault"' },
      });
    }
    return { token: match[1]!, via: 'bearer' };
  }
  const sealed = sessions !== undefined ? parseCookies(req.headers.cookie).get(SESSION_COOKIE) : undefined;
  const session = sealed !== undefined ? sessions!.open(sealed) : undefined;
  return session !== undefined
    ? { token: session.token, via: 'session', sid: session.sid, exp: session.exp }
    : null;
}

function upstream(err: unknown): ProblemError {
  return upstreamUnavailable('the Kubernetes API server could not review the request', err);
}

/**
 * Authenticates every non-public route (TokenReview): the bearer token, else the UI's session
 * cookie. A state-changing request authenticated by the cookie must carry the session's CSRF token
 * in `X-CSRF-Token` (403 CSRF_REJECTED): a cookie is sent by the browser whoever made the page,
 * a header only by the page that read the token. Bearer requests are not checked: browsers never
 * add that header on their own, and /v1 bodies are JSON, which another site cannot send without a
 * CORS preflight the sidecar never grants.
 */
export function installAuth(
  app: FastifyInstance,
  authorizer: Authorizer,
  sessions?: SessionCodec,
  revocations?: SessionRevocations,
): void {
  app.addHook('onRequest', async (req) => {
    const config = req.routeOptions.config;
    if (config.public === true) return;
    const ui = config.ui === true;
    let credential: Credential | null;
    try {
      credential = credentialOf(req, sessions);
    } catch (err) {
      if (ui) return;
      throw err;
    }
    // A signed-out session is no session, on every replica, for the UI and /v1 alike (a copied
    // cookie stays decryptable until its exp). Asked of the vault on each request it authenticates;
    // a vault that does not answer refuses the request (503), never lets the session through.
    if (credential?.via === 'session' && revocations !== undefined) {
      let revoked: boolean;
      try {
        revoked = await revocations.isRevoked(credential.sid ?? '');
      } catch (err) {
        throw upstreamUnavailable('the session store could not be read; try again', err);
      }
      if (revoked) credential = null;
    }
    if (credential === null) {
      if (ui) return;
      throw new ProblemError(401, 'UNAUTHENTICATED', 'send Authorization: Bearer <token>', {
        headers: { 'www-authenticate': 'Bearer realm="aibom-vault"' },
      });
    }
    let user: UserInfo | null;
    try {
      user = await authorizer.authenticate(credential.token);
    } catch (err) {
      throw upstream(err);
    }
    if (!user) {
      if (ui) return;
      throw new ProblemError(401, 'UNAUTHENTICATED', 'the token was not accepted', {
        headers: { 'www-authenticate': 'Bearer realm="aibom-vault", error="invalid_token"' },
      });
    }
    if (
      !ui &&
      credential.via === 'session' &&
      !SAFE_METHODS.has(req.method) &&
      !sessions!.checkCsrf(bindingOf(credential), headerValue(req.headers[CSRF_HEADER]))
    ) {
      throw new ProblemError(
        403,
        'CSRF_REJECTED',
        `a request authenticated by the session cookie must carry its CSRF token in ${CSRF_HEADER}`,
      );
    }
    req.user = user;
    req.credential = credential;
  });
}

const headerValue = (v: string | string[] | undefined): string | undefined => (Array.isArray(v) ? v[0] : v);

/** Asks the authorizer; API-server failures become 503, never an accidental allow. */
export async function isAllowed(
  authorizer: Authorizer,
  req: FastifyRequest,
  attrs: ResourceAttributes,
): Promise<boolean> {
  if (!req.user) throw new ProblemError(401, 'UNAUTHENTICATED', 'not authenticated');
  try {
    return await authorizer.allowed(req.user, attrs);
  } catch (err) {
    throw upstream(err);
  }
}

/** What a caller may do with one record: read it (or act on it), know that it exists, or neither. */
export type Visibility = 'allowed' | 'listed' | 'hidden';

/**
 * The caller's access to one record: `attrs.verb` on it, else `list` of it in its namespace (a
 * caller who could list it may learn that it exists: 403; anyone else: 404).
 *
 * Both questions name the record (`name` = the id asked for), so neither answer is reused for
 * another id: every id costs the same fresh reviews whether it is hidden in another tenant's
 * namespace, in a namespace the caller has asked about before, or unknown. `namespace` is undefined
 * when no record has the id; it is then asked about as if it lived cluster-wide (`''`). Hidden and
 * unknown ids therefore take the same path to the same 404: neither the answer nor its timing
 * tells an outsider that an id exists. (With the namespace-wide `list` cached, the first probe
 * into each namespace would have cost one review more than an unknown id.)
 */
export async function visibilityOf(
  authorizer: Authorizer,
  req: FastifyRequest,
  namespace: string | undefined,
  attrs: Omit<ResourceAttributes, 'namespace'>,
): Promise<Visibility> {
  const ns = namespace ?? '';
  if (await isAllowed(authorizer, req, { ...attrs, namespace: ns })) return 'allowed';
  const list = {
    namespace: ns,
    verb: 'list',
    resource: attrs.resource,
    ...(attrs.name !== undefined ? { name: attrs.name } : {}),
    ...(attrs.cacheScope !== undefined ? { cacheScope: attrs.cacheScope } : {}),
  } as const;
  return (await isAllowed(authorizer, req, list)) ? 'listed' : 'hidden';
}

/**
 * `found` (the object the caller asked for, looked up by the caller), if the caller may
 * `attrs.verb` it in `namespace` (visibilityOf). Else 404 `<what> not found` when it does not exist
 * or is hidden (the same answer, after the same reviews), or 403 when the caller may only list
 * there. A caller that looks up only once allowed passes `true` (only the access is decided).
 */
export async function requireVisible<T>(
  authorizer: Authorizer,
  req: FastifyRequest,
  namespace: string | undefined,
  attrs: Omit<ResourceAttributes, 'namespace'>,
  what: string,
  // Required, never defaulted: a lookup that found nothing passes undefined, which a default
  // parameter would silently replace.
  found: T | null | undefined,
): Promise<T> {
  const access = await visibilityOf(authorizer, req, namespace, attrs);
  if (found == null || access === 'hidden') throw new ProblemError(404, 'NOT_FOUND', `${what} not found`);
  if (access === 'listed') {
    const resource =
      attrs.subresource !== undefined ? `${attrs.resource}/${attrs.subresource}` : attrs.resource;
    throw new ProblemError(403, 'FORBIDDEN', `not allowed to ${attrs.verb} ${resource} in this namespace`);
  }
  return found;
}
