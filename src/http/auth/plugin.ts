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
 * The caller's access to one record: `attrs.verb` on it, else `list` in its namespace (a caller who
 * can list there may learn that the record exists: 403; anyone else: 404).
 *
 * `namespace` is undefined when no record has the id. It is then asked about as if it lived
 * cluster-wide (`''`) under the name asked for, so an unknown id costs the same reviews as a record
 * hidden in another tenant's namespace (one uncached review for the name, one cached `list`), and
 * both end in the same 404: neither the answer nor its timing tells an outsider that the id exists.
 */
export async function visibilityOf(
  authorizer: Authorizer,
  req: FastifyRequest,
  namespace: string | undefined,
  attrs: Omit<ResourceAttributes, 'namespace'>,
): Promise<Visibility> {
  const ns = namespace ?? '';
  if (await isAllowed(authorizer, req, { ...attrs, namespace: ns })) return 'allowed';
  const list = { namespace: ns, verb: 'list', resource: attrs.resource } as const;
  return (await isAllowed(authorizer, req, list)) ? 'listed' : 'hidden';
}
