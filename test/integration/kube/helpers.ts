import { pino } from 'pino';
import { kubeClient, type KubeClient, type ResourceType } from '../../../src/kube/client.ts';
import { kubeAccess, uniqueName } from '../../helpers/stack.ts';

export const logger = pino({ level: process.env.TEST_LOG_LEVEL ?? 'silent' });

export const RUNS: ResourceType = { group: 'vault.service.dev', version: 'v1', plural: 'runs', kind: 'Run' };

export interface RunObject {
  apiVersion: string;
  kind: string;
  metadata: {
    name: string;
    namespace: string;
    uid: string;
    resourceVersion: string;
    generation?: number;
    finalizers?: string[];
    labels?: Record<string, string>;
    managedFields?: Array<{ manager: string; operation: string; subresource?: string; fieldsV1?: unknown }>;
  };
  spec: Record<string, unknown>;
  status?: Record<string, unknown>;
}

export function adminClient(): KubeClient {
  return kubeClient(kubeAccess('admin'));
}

/** A fresh namespace per test file: other test files create Runs on the same API server. */
export async function freshNamespace(client: KubeClient, prefix: string): Promise<string> {
  const name = uniqueName(prefix);
  await client.request({ method: 'POST', path: '/api/v1/namespaces', body: { metadata: { name } } });
  return name;
}

export function runBody(name: string, labels: Record<string, string> = {}): Record<string, unknown> {
  return {
    apiVersion: 'vault.service.dev/v1',
    kind: 'Run',
    metadata: { name, labels },
    spec: { steps: [{ id: 'summarise', model: { name: 'm', provider: 'p', version: '1' } }] },
  };
}

export async function createRun(
  client: KubeClient,
  ns: string,
  name: string,
  labels: Record<string, string> = {},
): Promise<RunObject> {
  return client.request<RunObject>({
    method: 'POST',
    path: `/apis/vault.service.dev/v1/namespaces/${ns}/runs`,
    body: runBody(name, labels),
  });
}

export async function getRun(client: KubeClient, ns: string, name: string): Promise<RunObject> {
  return client.request<RunObject>({
    method: 'GET',
    path: `/apis/vault.service.dev/v1/namespaces/${ns}/runs/${name}`,
  });
}

export async function deleteRun(client: KubeClient, ns: string, name: string): Promise<void> {
  await client.request({
    method: 'DELETE',
    path: `/apis/vault.service.dev/v1/namespaces/${ns}/runs/${name}`,
  });
}

export async function labelRun(
  client: KubeClient,
  ns: string,
  name: string,
  labels: Record<string, string>,
): Promise<RunObject> {
  return client.request<RunObject>({
    method: 'PATCH',
    path: `/apis/vault.service.dev/v1/namespaces/${ns}/runs/${name}`,
    contentType: 'application/merge-patch+json',
    body: { metadata: { labels } },
  });
}

export async function waitFor(
  cond: () => boolean | Promise<boolean>,
  ms = 30_000,
  what = 'condition',
): Promise<void> {
  const end = Date.now() + ms;
  while (!(await cond())) {
    if (Date.now() > end) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 25));
  }
}

export function metric(text: string, name: string, labels: string): number {
  const line = text.split('\n').find((l) => l.startsWith(`${name}{${labels}}`));
  return line === undefined ? 0 : Number(line.split(' ').pop());
}
