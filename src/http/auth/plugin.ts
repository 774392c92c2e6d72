import type { FastifyInstance, FastifyRequest } from 'fastify';
import { ProblemError } from '../problem.ts';
import type { Authorizer, ResourceAttributes, UserInfo } from './authorizer.ts';

declare module 'fastify' {
  interface FastifyRequest {
    /** Set by the auth hook on every authenticated route. */
    user?: UserInfo;
  }
  interface FastifyContextConfig {
    /** Routes that answer without a token (health, OpenAPI). Everything else authenticates. */
    public?: boolean;
  }
}

function upstream(err: unknown): ProblemError {
  return new ProblemError(
    503,
    'UPSTREAM_UNAVAILABLE',
    'the Kubernetes API server could not review the request',
    {
      headers: { 'retry-after': '5' },
      cause: err,
    },
  );
}

/** Authenticates every non-public route with the bearer token (TokenReview). */
export function installAuth(app: FastifyInstance, authorizer: Authorizer): void {
  app.addHook('onRequest', async (req) => {
    if (req.routeOptions.config.public === true) return;
    const header = req.headers.authorization;
    const match = header === undefined ? null : /^Bearer\s+(\S+)\s*$/i.exec(header);
    if (!match) {
      throw new ProblemError(401, 'UNAUTHENTICATED', 'send Authorization: Bearer <token>', {
        headers: { 'www-authenticate': 'Bearer realm="aibom-vault"' },
      });
    }
    let user: UserInfo | null;
    try {
      user = await authorizer.authenticate(match[1]!);
    } catch (err) {
      throw upstream(err);
    }
    if (!user) {
      throw new ProblemError(401, 'UNAUTHENTICATED', 'the token was not accepted', {
        headers: { 'www-authenticate': 'Bearer realm="aibom-vault", error="invalid_token"' },
      });
    }
    req.user = user;
  });
}

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
  } as const;
  return (await isAllowed(authorizer, req, list)) ? 'listed' : 'hidden';
}
