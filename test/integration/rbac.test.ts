import { readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { AuthorizationV1Api, CoreV1Api } from '@kubernetes/client-node';
import { beforeAll, describe, expect, it } from 'vitest';
import { SERVICE_ACCOUNTS, SYSTEM_NAMESPACE } from '../../hack/stack/kube.ts';
import { repoRoot } from '../../hack/stack/stack.ts';
import { kubeConfig, uniqueName } from '../helpers/stack.ts';

/**
 * Least privilege, asked of the real API server: for every row of the table in docs/rbac.md, a
 * SubjectAccessReview as the ServiceAccount that manifests/rbac.yaml creates (and the stack
 * applies) must answer exactly what the table says. The table is the documented contract.
 */

interface Row {
  identity: string;
  verb: string;
  group: string;
  resource: string;
  subresource?: string;
  namespace?: string;
  name?: string;
  allowed: boolean;
}

async function documentedRows(tenant: string): Promise<Row[]> {
  const doc = await readFile(join(repoRoot, 'docs/rbac.md'), 'utf8');
  const table = /<!-- rbac-table:start -->([\s\S]*?)<!-- rbac-table:end -->/.exec(doc)?.[1] ?? '';
  return table
    .split('\n')
    .filter((l) => l.startsWith('| aibom-vault'))
    .map((l) => {
      const [identity, verb, group, resource, namespace, name, allowed] = l
        .split('|')
        .slice(1, -1)
        .map((c) => c.trim());
      const [res, sub] = resource!.split('/');
      const ns = namespace === '<system>' ? SYSTEM_NAMESPACE : namespace === '<tenant>' ? tenant : namespace;
      if (!['yes', 'no'].includes(allowed!)) throw new Error(`docs/rbac.md: bad allowed column in ${l}`);
      return {
        identity: identity!,
        verb: verb!,
        group: group === '(core)' ? '' : group!,
        resource: res!,
        ...(sub ? { subresource: sub } : {}),
        ...(ns ? { namespace: ns } : {}),
        ...(name ? { name } : {}),
        allowed: allowed === 'yes',
      };
    });
}

let tenant: string;
beforeAll(async () => {
  tenant = uniqueName('rbac');
  await kubeConfig('admin')
    .makeApiClient(CoreV1Api)
    .createNamespace({ body: { metadata: { name: tenant } } });
});

describe('RBAC of the two service identities (docs/rbac.md)', () => {
  it('documents both identities, with allowed and denied rows for each', async () => {
    const rows = await documentedRows(tenant);
    expect(rows.length).toBeGreaterThanOrEqual(30);
    for (const sa of SERVICE_ACCOUNTS) {
      expect(
        rows.some((r) => r.identity === sa && r.allowed),
        sa,
      ).toBe(true);
      expect(
        rows.some((r) => r.identity === sa && !r.allowed),
        sa,
      ).toBe(true);
    }
    expect(new Set(rows.map((r) => r.identity))).toEqual(new Set(SERVICE_ACCOUNTS));
  });

  it('answers every documented (verb, resource, namespace, name) exactly as documented', async () => {
    const authz = kubeConfig('admin').makeApiClient(AuthorizationV1Api);
    const rows = await documentedRows(tenant);
    const answers = await Promise.all(
      rows.map(async (r) => {
        const review = await authz.createSubjectAccessReview({
          body: {
            spec: {
              user: `system:serviceaccount:${SYSTEM_NAMESPACE}:${r.identity}`,
              groups: [
                'system:serviceaccounts',
                `system:serviceaccounts:${SYSTEM_NAMESPACE}`,
                'system:authenticated',
              ],
              resourceAttributes: {
                verb: r.verb,
                group: r.group,
                resource: r.resource,
                ...(r.subresource ? { subresource: r.subresource } : {}),
                ...(r.namespace ? { namespace: r.namespace } : {}),
                ...(r.name ? { name: r.name } : {}),
              },
            },
          },
        });
        const where = `${r.namespace ?? '(cluster)'}${r.name ? `/${r.name}` : ''}`;
        return `${r.identity} ${r.verb} ${r.group || 'core'}/${r.resource}${r.subresource ? `/${r.subresource}` : ''} ${where}: ${review.status?.allowed === true ? 'yes' : 'no'}`;
      }),
    );
    const expected = rows.map((r, i) => answers[i]!.replace(/: (yes|no)$/, `: ${r.allowed ? 'yes' : 'no'}`));
    expect(answers).toEqual(expected);
  });

  it("the identities' own tokens are refused what the table denies (not only in reviews)", async () => {
    // The stack's controller token reads the signer Secret by name but cannot list Secrets.
    const core = kubeConfig('aibom-vault-controller').makeApiClient(CoreV1Api);
    const signer = await core.readNamespacedSecret({
      namespace: SYSTEM_NAMESPACE,
      name: 'aibom-vault-signer',
    });
    expect(signer.type).toBe('kubernetes.io/tls');
    await expect(core.listNamespacedSecret({ namespace: SYSTEM_NAMESPACE })).rejects.toMatchObject({
      code: 403,
    });
    const api = kubeConfig('aibom-vault-api').makeApiClient(CoreV1Api);
    await expect(api.listNamespacedSecret({ namespace: SYSTEM_NAMESPACE })).rejects.toMatchObject({
      code: 403,
    });
    await expect(
      api.readNamespacedSecret({ namespace: tenant, name: 'aibom-vault-customer-signer' }),
    ).rejects.toMatchObject({ code: 403 });
  });
});
