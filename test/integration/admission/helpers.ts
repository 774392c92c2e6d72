/**
 * Talking to the stack's real kube-apiserver the way a pipeline does: create Runs (optionally
 * `dryRun=All`, which runs every admission step, CRD schema, CEL and the ValidatingAdmissionPolicy,
 * without storing), server-side apply of status under the pipeline's own field manager, merge and
 * JSON patches. A refusal is returned, not thrown, so tests can assert on its message.
 */
import { expect } from 'vitest';
import { GROUP, VERSION, type Run, type RunSpec, type RunStatus } from '../../../src/crd/run.ts';
import { PIPELINE_FIELD_MANAGER } from '../../../hack/sample-pipeline.ts';
import { RUN_TYPE } from '../../../src/controller/run/kube-api.ts';
import { FIELD_MANAGER } from '../../../src/crd/reasons.ts';
import {
  applyStatus,
  KubeApiError,
  kubeClient,
  resourcePath,
  type KubeClient,
} from '../../../src/kube/index.ts';
import { createNamespace } from '../../helpers/rbac.ts';
import { kubeAccess, uniqueName } from '../../helpers/stack.ts';

export { FIELD_MANAGER as CONTROLLER_FIELD_MANAGER, PIPELINE_FIELD_MANAGER };

let shared: KubeClient | undefined;
export const client = (): KubeClient => (shared ??= kubeClient(kubeAccess('admin')));

export async function freshNamespace(prefix: string): Promise<string> {
  const ns = uniqueName(prefix);
  await createNamespace(ns);
  return ns;
}

/** What the API server answered when it refused a request. */
export interface Refusal {
  readonly code: number;
  readonly message: string;
}

/** The request's result, or its refusal (any other error is rethrown). */
export async function outcome<T>(request: Promise<T>): Promise<{ ok: T } | { refused: Refusal }> {
  try {
    return { ok: await request };
  } catch (err) {
    if (err instanceof KubeApiError) return { refused: { code: err.code, message: err.message } };
    throw err;
  }
}

/** Asserts a 422 whose message contains every fragment (the field path first, by convention). */
export async function expectRefused<T>(request: Promise<T>, ...fragments: string[]): Promise<string> {
  const result = await outcome(request);
  if ('ok' in result) throw new Error(`admitted, expected a refusal naming ${fragments.join(' / ')}`);
  expect(result.refused.code).toBe(422);
  for (const f of fragments) expect(result.refused.message).toContain(f);
  return result.refused.message;
}

export function runBody(namespace: string, name: string, spec: RunSpec): Record<string, unknown> {
  return { apiVersion: `${GROUP}/${VERSION}`, kind: 'Run', metadata: { name, namespace }, spec };
}

export function createRun(
  namespace: string,
  name: string,
  spec: RunSpec,
  opts: { dryRun?: boolean } = {},
): Promise<Run> {
  return client().request<Run>({
    method: 'POST',
    path: resourcePath(RUN_TYPE, { namespace }),
    ...(opts.dryRun ? { query: { dryRun: 'All' } } : {}),
    body: runBody(namespace, name, spec),
  });
}

/** `dryRun=All` create: the whole admission chain, nothing stored. */
export const admit = (namespace: string, spec: RunSpec, name = 'probe'): Promise<Run> =>
  createRun(namespace, name, spec, { dryRun: true });

export const getRun = (namespace: string, name: string): Promise<Run> =>
  client().request<Run>({ method: 'GET', path: resourcePath(RUN_TYPE, { namespace, name }) });

/** Server-side apply of status as the pipeline (its own field manager, no force), as drive.ts does. */
export function applyPipelineStatus(
  namespace: string,
  name: string,
  status: Pick<RunStatus, 'phase' | 'steps'>,
): Promise<Run> {
  return applyStatus<Run>(client(), RUN_TYPE, { namespace, name }, status, {
    fieldManager: PIPELINE_FIELD_MANAGER,
    force: false,
  });
}

/** Server-side apply of the controller's own status fields, as src/controller does. */
export function applyControllerStatus(namespace: string, name: string, status: RunStatus): Promise<Run> {
  return applyStatus<Run>(client(), RUN_TYPE, { namespace, name }, status as Record<string, unknown>, {
    fieldManager: FIELD_MANAGER,
  });
}

export function patchRun(
  namespace: string,
  name: string,
  body: unknown,
  opts: { subresource?: 'status'; type?: 'merge' | 'json' } = {},
): Promise<Run> {
  return client().request<Run>({
    method: 'PATCH',
    path: resourcePath(RUN_TYPE, {
      namespace,
      name,
      ...(opts.subresource ? { subresource: opts.subresource } : {}),
    }),
    contentType: opts.type === 'json' ? 'application/json-patch+json' : 'application/merge-patch+json',
    body,
  });
}

/** A minimal legal tool step. */
export const toolStep = (id: string, extra: Record<string, unknown> = {}) => ({
  id,
  tool: { name: 'tool', command: ['tool'] },
  ...extra,
});
