import { kubeClient, type KubeAccess, type KubeClient } from '../../kube/index.ts';
import type { PolicyPackResource } from '../../policy/index.ts';
import type { Logger } from '../../log/index.ts';

/**
 * The PolicyPack resources as the sidecar sees them: one cluster-wide LIST, reused for `ttlMs`
 * (concurrent readers share one request), so the API server sees at most one LIST per replica per
 * interval however many pages are rendered. A failed LIST serves the last good list (packs change
 * rarely; an outage of the API server should not hide every retention notice) and is retried on the
 * next read; with no good list yet, the packs are `undefined` (shown as `unavailable`, never as
 * "no pack"). The sidecar's identity needs `list` on policypacks (manifests/rbac.yaml).
 */
export interface PolicyPackSource {
  /** The resources, or undefined when they cannot be read and none were read before. */
  list(): Promise<readonly PolicyPackResource[] | undefined>;
}

export const POLICY_PACK_TTL_MS = 15_000;

interface PackList {
  items?: PolicyPackResource[];
}

/** Reads through `client` (its own deadline per request: KUBE_TIMEOUT_MS). */
export function policyPackSource(
  client: Pick<KubeClient, 'request'>,
  options: { ttlMs?: number; logger?: Logger; now?: () => number } = {},
): PolicyPackSource {
  const ttl = options.ttlMs ?? POLICY_PACK_TTL_MS;
  const now = options.now ?? Date.now;
  let good: { items: readonly PolicyPackResource[]; at: number } | undefined;
  let inflight: Promise<readonly PolicyPackResource[] | undefined> | undefined;
  const load = async (): Promise<readonly PolicyPackResource[] | undefined> => {
    try {
      const list = await client.request<PackList>({
        method: 'GET',
        path: '/apis/vault.service.dev/v1/policypacks',
      });
      good = { items: list.items ?? [], at: now() };
      return good.items;
    } catch (err) {
      options.logger?.warn({ err }, 'cannot list PolicyPacks; serving the last list read');
      return good?.items;
    } finally {
      inflight = undefined;
    }
  };
  return {
    list() {
      if (good !== undefined && now() - good.at < ttl) return Promise.resolve(good.items);
      return (inflight ??= load());
    },
  };
}

/** The sidecar's source: the API server through `kc` (the sidecar's ServiceAccount). */
export function kubePolicyPackSource(
  kc: KubeAccess,
  options: { timeoutMs?: number; logger?: Logger } = {},
): PolicyPackSource {
  return policyPackSource(
    kubeClient(kc, {
      userAgent: 'aibom-vault-sidecar',
      ...(options.timeoutMs !== undefined ? { timeoutMs: options.timeoutMs } : {}),
    }),
    options.logger !== undefined ? { logger: options.logger } : {},
  );
}
