import type { KubeClient, KubeStatus } from './client.ts';
import { cacheStrings } from './intern.ts';

/** The part of an object's metadata the runtime relies on. */
export interface KubeObject {
  metadata?: { name?: string; namespace?: string; resourceVersion?: string; uid?: string };
}

export type WatchEvent<T> =
  | { type: 'ADDED' | 'MODIFIED' | 'DELETED'; object: T }
  /** Progress notification: nothing changed up to `resourceVersion` (sent when allowWatchBookmarks). */
  | { type: 'BOOKMARK'; object: { metadata?: { resourceVersion?: string } } }
  /** E.g. code 410 "too old resource version": the server ends the watch after it. */
  | { type: 'ERROR'; object: KubeStatus };

export interface ListResult<T> {
  items: T[];
  /** The collection's resourceVersion: a watch from it sees every later change exactly once. */
  resourceVersion: string;
}

export interface WatchOptions {
  resourceVersion: string;
  /** Server-side timeout: the server ends a healthy watch after it (with a bookmark shortly before). */
  timeoutSeconds: number;
  signal: AbortSignal;
}

/**
 * The seam between the informer and the API server (client-go's `ListerWatcher`). `watch` resolves
 * when the server closes the stream, rejects on errors, and must stop when `signal` aborts. Tests
 * substitute fakes, or wrap the real one to stall or cut connections.
 */
export interface ListerWatcher<T> {
  list(signal: AbortSignal): Promise<ListResult<T>>;
  watch(options: WatchOptions, onEvent: (event: WatchEvent<T>) => void): Promise<void>;
}

export interface KubeListerWatcherOptions<T = unknown> {
  labelSelector?: string;
  fieldSelector?: string;
  /** Page size of lists (`limit`); pages are stitched with continue tokens. */
  pageSize?: number;
  /**
   * Applied to every listed and watched object before it reaches the cache, e.g. to drop
   * `metadata.managedFields`, which a controller that re-reads before acting never needs.
   */
  transform?: (obj: T) => T;
}

/** Drops `metadata.managedFields` (often the largest part of an object in a cache). */
export function withoutManagedFields<T>(obj: T): T {
  const meta = (obj as { metadata?: { managedFields?: unknown } }).metadata;
  if (meta?.managedFields !== undefined) delete meta.managedFields;
  return obj;
}

/** kubectl's copy of the whole object as last applied: as large as the object, read by kubectl only. */
export const LAST_APPLIED_ANNOTATION = 'kubectl.kubernetes.io/last-applied-configuration';

/**
 * What a controller's cache keeps of an object: everything but `metadata.managedFields` and
 * kubectl's last-applied annotation (together often more than half of an object), neither of which
 * a controller that reads spec, status, labels and its own annotations ever needs, with its strings
 * shared with the other cached objects' (intern.ts). In place.
 */
export function slimForCache<T>(obj: T): T {
  const meta = (obj as { metadata?: { annotations?: Record<string, string> } }).metadata;
  const annotations = meta?.annotations;
  if (annotations !== undefined && LAST_APPLIED_ANNOTATION in annotations) {
    delete annotations[LAST_APPLIED_ANNOTATION];
    if (Object.keys(annotations).length === 0) delete meta!.annotations;
  }
  return cacheStrings.values(withoutManagedFields(obj));
}

/**
 * List+watch over a collection path such as `/apis/vault.service.dev/v1/runs` (all namespaces) or
 * `/apis/vault.service.dev/v1/namespaces/ns/runs`. Lists are consistent reads (resourceVersion unset)
 * because a list is what repairs the cache after 410 Gone: serving it from a stale cache would defeat
 * the purpose. Watches always ask for bookmarks, which is what lets a quiet but healthy watch be told
 * apart from a dead one.
 */
export function kubeListerWatcher<T>(
  client: KubeClient,
  path: string,
  options: KubeListerWatcherOptions<T> = {},
): ListerWatcher<T> {
  const selectors = { labelSelector: options.labelSelector, fieldSelector: options.fieldSelector };
  return {
    async list(signal) {
      const items: T[] = [];
      let cont: string | undefined;
      let resourceVersion: string;
      do {
        const page = await client.request<{
          items?: T[] | null;
          metadata?: { resourceVersion?: string; continue?: string };
        }>({
          method: 'GET',
          path,
          query: { ...selectors, limit: options.pageSize ?? 500, continue: cont },
          signal,
        });
        const got = page.items ?? [];
        items.push(...(options.transform ? got.map(options.transform) : got));
        resourceVersion = page.metadata?.resourceVersion ?? '';
        cont = page.metadata?.continue || undefined;
      } while (cont !== undefined);
      return { items, resourceVersion };
    },

    watch({ resourceVersion, timeoutSeconds, signal }, onEvent) {
      return client.stream(
        {
          path,
          query: {
            ...selectors,
            watch: true,
            allowWatchBookmarks: true,
            resourceVersion,
            timeoutSeconds,
          },
          signal,
        },
        (value) => {
          const ev = value as WatchEvent<T>;
          // Only object events carry a T; BOOKMARK and ERROR pass through untouched.
          if (options.transform && (ev.type === 'ADDED' || ev.type === 'MODIFIED' || ev.type === 'DELETED')) {
            ev.object = options.transform(ev.object);
          }
          onEvent(ev);
        },
      );
    },
  };
}
