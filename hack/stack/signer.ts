import { mkdir, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { CoreV1Api, KubeConfig } from '@kubernetes/client-node';
import { generateDevPki, toSecretData } from '../dev-pki.ts';

/**
 * A throwaway CA → leaf signing chain for this stack, stored the way cert-manager would issue it:
 * a kubernetes.io/tls Secret in the service namespace. The CA certificate is written next to the
 * stack as the trust anchor clients verify against. Nothing here is ever committed.
 */
export async function createSignerSecret(
  root: string,
  kubeconfig: string,
  namespace = 'aibom-vault-system',
  name = 'aibom-vault-signer',
): Promise<{ trustAnchor: string }> {
  const pki = await generateDevPki();
  const kc = new KubeConfig();
  kc.loadFromFile(kubeconfig);
  await kc.makeApiClient(CoreV1Api).createNamespacedSecret({
    namespace,
    body: { metadata: { name }, type: 'kubernetes.io/tls', data: toSecretData(pki) },
  });
  await mkdir(root, { recursive: true });
  const trustAnchor = join(root, 'ca.crt');
  await writeFile(trustAnchor, pki['ca.crt']);
  return { trustAnchor };
}
