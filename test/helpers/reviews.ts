import {
  cachingAuthorizer,
  kubeReviewClient,
  type Authorizer,
  type AuthorizerOptions,
  type ResourceAttributes,
  type ReviewClient,
} from '../../src/http/auth/authorizer.ts';
import { kubeAccess } from './stack.ts';

/**
 * The stack's real TokenReview/SubjectAccessReview wire (as the sidecar identity), counted where
 * the requests leave for the API server: what the sidecar's cache and limits let through.
 */
export interface CountedReviews {
  readonly authorizer: Authorizer;
  /** Reviews sent so far. */
  readonly sent: { token: number; access: number };
  /** SubjectAccessReviews sent per user. */
  readonly byUser: Map<string, number>;
  /** Every SubjectAccessReview sent, in order: who and the attributes asked about. */
  readonly asked: { user: string; attrs: ResourceAttributes }[];
  /** Most SubjectAccessReviews in flight at once: per user, and in all. */
  readonly maxInflight: { byUser: Map<string, number>; all: number; token: number };
  reset(): void;
}

export function countedReviews(opts: AuthorizerOptions = {}): CountedReviews {
  const wire = kubeReviewClient(kubeAccess('aibom-vault'));
  const sent = { token: 0, access: 0 };
  const byUser = new Map<string, number>();
  const asked: { user: string; attrs: ResourceAttributes }[] = [];
  const inflight = new Map<string, number>();
  const maxInflight = { byUser: new Map<string, number>(), all: 0, token: 0 };
  let all = 0;
  let tokens = 0;
  const counting: ReviewClient = {
    async tokenReview(token) {
      sent.token += 1;
      tokens += 1;
      maxInflight.token = Math.max(maxInflight.token, tokens);
      try {
        return await wire.tokenReview(token);
      } finally {
        tokens -= 1;
      }
    },
    async accessReview(user, attrs) {
      const u = user.username;
      sent.access += 1;
      asked.push({ user: u, attrs });
      byUser.set(u, (byUser.get(u) ?? 0) + 1);
      inflight.set(u, (inflight.get(u) ?? 0) + 1);
      all += 1;
      maxInflight.byUser.set(u, Math.max(maxInflight.byUser.get(u) ?? 0, inflight.get(u)!));
      maxInflight.all = Math.max(maxInflight.all, all);
      try {
        return await wire.accessReview(user, attrs);
      } finally {
        inflight.set(u, inflight.get(u)! - 1);
        all -= 1;
      }
    },
  };
  return {
    authorizer: cachingAuthorizer(counting, opts),
    sent,
    byUser,
    asked,
    maxInflight,
    reset() {
      asked.length = 0;
      sent.token = 0;
      sent.access = 0;
      byUser.clear();
      maxInflight.byUser.clear();
      maxInflight.all = 0;
      maxInflight.token = 0;
    },
  };
}
