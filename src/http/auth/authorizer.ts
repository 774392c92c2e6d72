import { createHash } from 'node:crypto';
import { AuthenticationV1Api, AuthorizationV1Api, type KubeConfig } from '@kubernetes/client-node';
import { TtlCache } from './ttl-cache.ts';

export interface UserInfo {
  readonly username: string;
  readonly uid?: string;
  readonly groups: readonly string[];
  readonly extra?: Readonly<Record<string, string[]>>;
}

export interface ResourceAttributes {
  /** Empty string = cluster-wide (all namespaces). */
  readonly namespace: string;
  readonly verb: 'get' | 'list' | 'create';
  readonly resource: 'attestations' | 'runs' | 'auditlogs';
  readonly subresource?: string;
  readonly name?: string;
}

/** Who is calling (TokenReview) and may they (SubjectAccessReview). */
export interface Authorizer {
  /** Null when the token is not valid. Throws when the API server cannot be asked. */
  authenticate(token: string): Promise<UserInfo | null>;
  allowed(user: UserInfo, attrs: ResourceAttributes): Promise<boolean>;
}

export const API_GROUP = 'vault.service.dev';

export interface KubeAuthorizerOptions {
  /** How long a decision is reused. Short: a revoked RoleBinding takes effect within this time. */
  readonly ttlMs?: number;
  readonly maxEntries?: number;
}

/** Decisions are cached 10 s (allow and deny alike), like the kube-apiserver webhook authorizer default order of magnitude. */
export const DEFAULT_AUTH_TTL_MS = 10_000;

/**
 * Delegates to the Kubernetes API server, as kube-rbac-proxy and aggregated API servers do: the
 * sidecar's own identity needs `create` on tokenreviews and subjectaccessreviews
 * (ClusterRole system:auth-delegator).
 */
export function kubernetesAuthorizer(kc: KubeConfig, opts: KubeAuthorizerOptions = {}): Authorizer {
  const authn = kc.makeApiClient(AuthenticationV1Api);
  const authz = kc.makeApiClient(AuthorizationV1Api);
  const ttl = opts.ttlMs ?? DEFAULT_AUTH_TTL_MS;
  const users = new TtlCache<string, UserInfo | null>(ttl, opts.maxEntries ?? 10_000);
  const decisions = new TtlCache<string, boolean>(ttl, opts.maxEntries ?? 50_000);
  return {
    async authenticate(token) {
      // Key on a hash: raw bearer tokens are never kept in memory longer than the request.
      const key = createHash('sha256').update(token).digest('base64url');
      return users.getOrLoad(key, async () => {
        const review = await authn.createTokenReview({ body: { spec: { token } } });
        const st = review.status;
        if (!st?.authenticated || !st.user?.username) return null;
        return {
          username: st.user.username,
          groups: st.user.groups ?? [],
          ...(st.user.uid !== undefined ? { uid: st.user.uid } : {}),
          ...(st.user.extra !== undefined ? { extra: st.user.extra } : {}),
        };
      });
    },
    async allowed(user, attrs) {
      const key = JSON.stringify([user.username, user.uid, user.groups, attrs]);
      return decisions.getOrLoad(key, async () => {
        const review = await authz.createSubjectAccessReview({
          body: {
            spec: {
              user: user.username,
              groups: [...user.groups],
              ...(user.uid !== undefined ? { uid: user.uid } : {}),
              ...(user.extra !== undefined ? { extra: { ...user.extra } } : {}),
              resourceAttributes: {
                group: API_GROUP,
                resource: attrs.resource,
                verb: attrs.verb,
                namespace: attrs.namespace,
                ...(attrs.subresource !== undefined ? { subresource: attrs.subresource } : {}),
                ...(attrs.name !== undefined ? { name: attrs.name } : {}),
              },
            },
          },
        });
        return review.status?.allowed === true && review.status.denied !== true;
      });
    },
  };
}
