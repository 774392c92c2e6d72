import { apiVersionOf, resourcePath, type KubeClient, type ResourceType } from './kube.ts';

export interface ObjectRef {
  namespace?: string | undefined;
  name: string;
}

export interface ApplyOptions {
  /** The SSA field manager: one per writer (e.g. `aibom-vault-controller`), stable across versions. */
  fieldManager: string;
  /** Take over conflicting fields (default true). See `applyStatus`. */
  force?: boolean;
  signal?: AbortSignal;
}

/**
 * Server-side applies `status` to the `/status` subresource as `fieldManager`.
 *
 * SSA rules the caller must respect:
 * - Send the complete desired state of every field this manager owns, every time: a field this
 *   manager applied before and now omits is removed (if no other manager also owns it).
 * - Send only fields this manager owns. `force` (default true, as controllers do) resolves a conflict
 *   by taking the field over, which is right for the controller's own fields after, say, a manual
 *   `kubectl edit`, and wrong for anybody else's: with `force: false` a conflict is a 409 instead.
 * Fields of other managers (a pipeline's `status.phase`, `status.steps`) are untouched either way.
 */
export async function applyStatus<T = unknown>(
  client: KubeClient,
  type: ResourceType,
  ref: ObjectRef,
  status: Record<string, unknown>,
  options: ApplyOptions,
): Promise<T> {
  const metadata = ref.namespace ? { name: ref.name, namespace: ref.namespace } : { name: ref.name };
  return client.request<T>({
    method: 'PATCH',
    path: resourcePath(type, { namespace: ref.namespace, name: ref.name, subresource: 'status' }),
    query: { fieldManager: options.fieldManager, force: options.force ?? true },
    // JSON is YAML: the apply content type takes this body as is.
    contentType: 'application/apply-patch+yaml',
    body: { apiVersion: apiVersionOf(type), kind: type.kind, metadata, status },
    ...(options.signal ? { signal: options.signal } : {}),
  });
}

export interface FinalizedObject {
  metadata?: { name?: string; namespace?: string; resourceVersion?: string; finalizers?: string[] };
}

export function hasFinalizer(obj: FinalizedObject, finalizer: string): boolean {
  return obj.metadata?.finalizers?.includes(finalizer) ?? false;
}

export interface FinalizerOptions {
  fieldManager?: string;
  signal?: AbortSignal;
}

/**
 * Adds `finalizer` to the object as read (`obj`), unless present (then no request is made). The merge
 * patch carries `obj`'s resourceVersion, so it fails with 409 if the object changed since it was read:
 * the finalizer list is replaced wholesale, and without the guard a concurrent change to it (another
 * controller's finalizer) would be lost. On 409, re-read and retry (requeue).
 */
export async function addFinalizer<T extends FinalizedObject>(
  client: KubeClient,
  type: ResourceType,
  obj: T,
  finalizer: string,
  options: FinalizerOptions = {},
): Promise<T> {
  if (hasFinalizer(obj, finalizer)) return obj;
  return patchFinalizers(client, type, obj, [...(obj.metadata?.finalizers ?? []), finalizer], options);
}

/** Removes `finalizer` (no request if absent); guarded by resourceVersion like `addFinalizer`. */
export async function removeFinalizer<T extends FinalizedObject>(
  client: KubeClient,
  type: ResourceType,
  obj: T,
  finalizer: string,
  options: FinalizerOptions = {},
): Promise<T> {
  if (!hasFinalizer(obj, finalizer)) return obj;
  const rest = (obj.metadata?.finalizers ?? []).filter((f) => f !== finalizer);
  return patchFinalizers(client, type, obj, rest, options);
}

async function patchFinalizers<T extends FinalizedObject>(
  client: KubeClient,
  type: ResourceType,
  obj: T,
  finalizers: string[],
  options: FinalizerOptions,
): Promise<T> {
  const { name, namespace, resourceVersion } = obj.metadata ?? {};
  if (!name || !resourceVersion)
    throw new TypeError('the object needs metadata.name and metadata.resourceVersion');
  return client.request<T>({
    method: 'PATCH',
    path: resourcePath(type, { namespace, name }),
    query: { fieldManager: options.fieldManager },
    contentType: 'application/merge-patch+json',
    // `null` deletes the field in a merge patch; an empty list would be stored as such.
    body: { metadata: { resourceVersion, finalizers: finalizers.length > 0 ? finalizers : null } },
    ...(options.signal ? { signal: options.signal } : {}),
  });
}
