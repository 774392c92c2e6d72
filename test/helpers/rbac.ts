import { CoreV1Api, RbacAuthorizationV1Api } from '@kubernetes/client-node';
import { kubeConfig } from './stack.ts';

export async function createNamespace(name: string): Promise<void> {
  await kubeConfig('admin')
    .makeApiClient(CoreV1Api)
    .createNamespace({ body: { metadata: { name } } });
}

/** Binds a stack user to one of the ClusterRoles of manifests/rbac.yaml in one namespace. */
export async function bindUser(user: string, clusterRole: string, namespace: string): Promise<void> {
  await kubeConfig('admin')
    .makeApiClient(RbacAuthorizationV1Api)
    .createNamespacedRoleBinding({
      namespace,
      body: {
        metadata: { name: `${user}-${clusterRole}` },
        roleRef: { apiGroup: 'rbac.authorization.k8s.io', kind: 'ClusterRole', name: clusterRole },
        subjects: [{ apiGroup: 'rbac.authorization.k8s.io', kind: 'User', name: user }],
      },
    });
}
