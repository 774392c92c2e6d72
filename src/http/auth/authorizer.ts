import { createHash } from 'node:crypto';
import { Counter, type Registry } from 'prom-client';
import type { KubeAccess } from '../../kube/access.ts';
import { kubeClient } from '../../kube/client.ts';
import { KeyedLimiter } from './limiter.ts';
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
  /**
   * Not part of the review (never sent to the API server): answers asked under different scopes
   * are cached apart. A route that must not share cached decisions with another route asking the
   * same question (a hit there would be a timing oracle) gives its questions a scope of their own.
   */
  readonly cacheScope?: string;
}

/** Who is calling (TokenReview) and may they (SubjectAccessReview). */
export interface Authorizer {
  /** Null when the token is not valid. Throws when the API server cannot be asked. */
  authenticate(token: string): Promise<UserInfo | null>;
  allowed(user: UserInfo, attrs: ResourceAttributes): Promise<boolean>;
}

/** The wire: one call is one review sent to the API server, nothing cached or limited. */
export interface ReviewClient {
  tokenReview(token: string): Promise<UserInfo | null>;
  accessReview(user: UserInfo, attrs: ResourceAttributes): Promise<boolean>;
}

export const API_GROUP = 'vault.service.dev';

/**
 * Bounds on what reviews cost (docs/api.md, "Authorisation cost"). Decisions are cached 10 s
 * (allow and deny alike, the order of magnitude of the kube-apiserver webhook authorizer's cache):
 * a revoked RoleBinding takes effect within that time.
 */
export const AUTH_DEFAULTS = {
  ttlMs: 10_000,
  maxEntries: 50_000,
  /** SubjectAccessReviews in flight for one user; more wait for their turn. */
  maxInflightPerIdentity: 4,
  /** SubjectAccessReviews in flight for all users together. */
  maxInflight: 32,
  /** TokenReviews in flight (callers are not known yet: one pool for all). */
  maxTokenReviewsInflight: 16,
} as const;

export interface AuthorizerOptions {
  readonly ttlMs?: number;
  readonly maxEntries?: number;
  readonly maxInflightPerIdentity?: number;
  readonly maxInflight?: number;
  readonly maxTokenReviewsInflight?: number;
  /** Where `sidecar_auth_reviews_total{review}` (reviews sent upstream) goes. */
  readonly registry?: Registry;
}

/** The parts of the review objects' answers read here (authentication.k8s.io/v1, authorization.k8s.io/v1). */
interface TokenReview {
  status?: {
    authenticated?: boolean;
    user?: { username?: string; uid?: string; groups?: string[]; extra?: Record<string, string[]> };
  };
}
interface SubjectAccessReview {
  status?: { allowed?: boolean; denied?: boolean };
}

/**
 * TokenReview and SubjectAccessReview against the Kubernetes API server, as kube-rbac-proxy and
 * aggregated API servers do: the sidecar's own identity needs `create` on tokenreviews and
 * subjectaccessreviews (ClusterRole system:auth-delegator).
 */
export function kubeReviewClient(kc: KubeAccess): ReviewClient {
  const client = kubeClient(kc, { userAgent: 'aibom-vault-sidecar' });
  return {
    async tokenReview(token) {
      const review = await client.request<TokenReview>({
        method: 'POST',
        path: '/apis/authentication.k8s.io/v1/tokenreviews',
        body: { apiVersion: 'authentication.k8s.io/v1', kind: 'TokenReview', spec: { token } },
      });
      const st = review.status;
      if (!st?.authenticated || !st.user?.username) return null;
      return {
        username: st.user.username,
        groups: st.user.groups ?? [],
        ...(st.user.uid !== undefined ? { uid: st.user.uid } : {}),
        ...(st.user.extra !== undefined ? { extra: st.user.extra } : {}),
      };
    },
    async accessReview(user, attrs) {
      const review = await client.request<SubjectAccessReview>({
        method: 'POST',
        path: '/apis/authorization.k8s.io/v1/subjectaccessreviews',
        body: {
          apiVersion: 'authorization.k8s.io/v1',
          kind: 'SubjectAccessReview',
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
    },
  };
}

/**
 * Reviews with a cache and concurrency limits in front: a burst of identical questions makes one
 * review (single flight), answers are reused for `ttlMs`, and no caller can have more than
 * `maxInflightPerIdentity` reviews in flight (all callers together `maxInflight`), however many
 * requests it sends: its reviews queue behind each other, not in front of other callers'.
 */
export function cachingAuthorizer(reviews: ReviewClient, opts: AuthorizerOptions = {}): Authorizer {
  const o = { ...AUTH_DEFAULTS, ...opts };
  const users = new TtlCache<string, UserInfo | null>(o.ttlMs, o.maxEntries);
  const decisions = new TtlCache<string, boolean>(o.ttlMs, o.maxEntries);
  const access = new KeyedLimiter({ perKey: o.maxInflightPerIdentity, global: o.maxInflight });
  const tokens = new KeyedLimiter({ perKey: o.maxTokenReviewsInflight, global: o.maxTokenReviewsInflight });
  const sent = opts.registry
    ? new Counter({
        name: 'sidecar_auth_reviews_total',
        help: 'TokenReviews and SubjectAccessReviews the sidecar sent to the Kubernetes API server',
        labelNames: ['review'],
        registers: [opts.registry],
      })
    : undefined;
  return {
    authenticate(token) {
      // Key on a hash: raw bearer tokens are never kept in memory longer than the request.
      const key = createHash('sha256').update(token).digest('base64url');
      return users.getOrLoad(key, () =>
        tokens.run('', () => {
          sent?.inc({ review: 'token' });
          return reviews.tokenReview(token);
        }),
      );
    },
    allowed(user, attrs) {
      // One key per user and question, whatever order the attributes were spread in, plus the
      // scope the question was asked under (routes that must not see each other's answers).
      const a = attrs;
      const key = JSON.stringify([
        user.username,
        user.uid,
        user.groups,
        [a.namespace, a.verb, a.resource, a.subresource, a.name, a.cacheScope],
      ]);
      return decisions.getOrLoad(key, () =>
        access.run(user.username, () => {
          sent?.inc({ review: 'access' });
          return reviews.accessReview(user, attrs);
        }),
      );
    },
  };
}

/** The sidecar's authorizer: the API server's reviews behind the cache and limits. */
export function kubernetesAuthorizer(kc: KubeAccess, opts: AuthorizerOptions = {}): Authorizer {
  return cachingAuthorizer(kubeReviewClient(kc), opts);
}
