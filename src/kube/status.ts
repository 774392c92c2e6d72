import { apiVersionOf, KubeApiError, resourcePath, type KubeClient, type ResourceType } from './client.ts';

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
 * Adds `finalizer` to the object as read (`obj`), unless present (then no request is made). The
 * finalizer list is replaced wholesale by a JSON patch that first tests that the list is still the
 * one read: a concurrent change to the list (another controller's finalizer) makes the patch fail
 * with 409, so it is never lost, while changes elsewhere in the object (a pipeline writing status
 * between our read and our patch, which is the common case for a new Run) do not conflict, as a
 * resourceVersion guard would. On 409, re-read and retry (requeue).
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

/** Removes `finalizer` (no request if absent); guarded by the list as read, like `addFinalizer`. */
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
  const { name, namespace } = obj.metadata ?? {};
  if (!name) throw new TypeError('the object needs metadata.name');
  const read = obj.metadata?.finalizers;
  const path = '/metadata/finalizers';
  // A `test` of null passes for an absent field (the API server's JSON patch), so a first finalizer
  // is guarded too: another writer's finalizer added meanwhile fails the test.
  // `add` of an object member replaces it when present (RFC 6902).
  const ops: object[] = [
    { op: 'test', path, value: read && read.length > 0 ? read : null },
    finalizers.length > 0 ? { op: 'add', path, value: finalizers } : { op: 'remove', path },
  ];
  try {
    return await client.request<T>({
      method: 'PATCH',
      path: resourcePath(type, { namespace, name }),
      query: { fieldManager: options.fieldManager },
      contentType: 'application/json-patch+json',
      body: ops,
      ...(options.signal ? { signal: options.signal } : {}),
    });
  } catch (err) {
    // A failed `test` is the API server's 422 `Invalid` with no field causes (a refusal by the
    // schema or a CEL rule names its fields); to callers it is what it means: a conflict.
    if (err instanceof KubeApiError && err.code === 422 && (err.status?.details?.causes ?? []).length === 0) {
      throw new KubeApiError(409, {
        reason: 'Conflict',
        code: 409,
        message: `the finalizers of ${namespace ?? ''}/${name} changed since they were read`,
      });
    }
    throw err;
  }
}
