import { execFile } from 'node:child_process';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { CoreV1Api, RbacAuthorizationV1Api } from '@kubernetes/client-node';
import { addLogToWitness, startWitness, type Witness } from '../../../hack/stack/witness.ts';
import { stopProcess } from '../../../hack/stack/proc.ts';
import { kubeConfig, stack, uniqueName } from '../../helpers/stack.ts';

/**
 * A litewitness of the test's own (its state is the test's: a split view must not meet the stack's
 * witness), following `origins` signed by `logVkeyOf(origin)`.
 */
export async function testWitness(
  origins: readonly string[],
  logVkeyOf: (origin: string) => string,
): Promise<Witness & { stop: () => Promise<void> }> {
  const tools = stack().tools;
  const dir = join(stack().root, uniqueName('witness'));
  const w = await startWitness(dir, tools, { name: `${uniqueName('witness')}.test/w` });
  for (const o of origins) await addLogToWitness(w, tools, o, logVkeyOf(o));
  return {
    ...w,
    stop: async () => {
      for (const p of [...w.procs].reverse()) await stopProcess(p.pid);
    },
  };
}

/** Runs one of the stack's independent Go checks; never throws: exit code, stdout, stderr. */
export async function goCheck(
  tool: 'tlog-cosign-check' | 'tlog-tiles-check',
  args: readonly string[],
  input: string,
): Promise<{ code: number; stdout: string; stderr: string }> {
  const child = promisify(execFile)(stack().tools[tool], [...args], { timeout: 120_000 });
  child.child.stdin?.end(input);
  return child.then(
    (r) => ({ code: 0, stdout: r.stdout, stderr: r.stderr }),
    (e: { code?: number; stdout?: string; stderr?: string }) => ({
      code: typeof e.code === 'number' ? e.code : -1,
      stdout: e.stdout ?? '',
      stderr: e.stderr ?? '',
    }),
  );
}

/** A ServiceAccount in `ns` bound cluster-wide to `clusterRole` (manifests/rbac.yaml), and its token. */
export async function serviceAccountToken(ns: string, name: string, clusterRole: string): Promise<string> {
  const kc = kubeConfig('admin');
  await kc
    .makeApiClient(CoreV1Api)
    .createNamespacedServiceAccount({ namespace: ns, body: { metadata: { name } } });
  await kc.makeApiClient(RbacAuthorizationV1Api).createClusterRoleBinding({
    body: {
      metadata: { name: `${ns}-${name}` },
      roleRef: { apiGroup: 'rbac.authorization.k8s.io', kind: 'ClusterRole', name: clusterRole },
      subjects: [{ kind: 'ServiceAccount', name, namespace: ns }],
    },
  });
  const tr = await kc
    .makeApiClient(CoreV1Api)
    .createNamespacedServiceAccountToken({ name, namespace: ns, body: { spec: { audiences: [] } } });
  return tr.status!.token!;
}
