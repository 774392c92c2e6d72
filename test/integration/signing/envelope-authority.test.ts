/**
 * Whose key signed a namespace's envelopes is decided once, where the key is chosen
 * (namespaceSigners), not guessed afterwards. The service signer here renews right after its first
 * use, the window in which a recorder that compared the envelope signer with the service signer it
 * had seen a moment before took the renewed service key for the tenant's own key: it filed the
 * service's certificate under the tenant's namespace in the key store and made the tenant's
 * namespace the root authority of the capability chains.
 */
import { CustomObjectsApi } from '@kubernetes/client-node';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { generateDevPki } from '../../../hack/dev-pki.ts';
import { driveRun } from '../../../hack/sample-pipeline.ts';
import type { RunningController } from '../../../src/controller/manager.ts';
import { startTestController } from '../../helpers/controller.ts';
import type { Run } from '../../../src/crd/run.ts';
import { signerFromPem, type KeySigner } from '../../../src/signing/index.ts';
import { namespaceSigners } from '../../../src/signing/namespace-signers.ts';
import { createVaultPool, openVault, type Vault } from '../../../src/vault/index.ts';
import { createNamespace } from '../../helpers/rbac.ts';
import { freshDatabase, kubeConfig, uniqueName } from '../../helpers/stack.ts';
import { waitFor } from '../../helpers/wait.ts';

const ns = uniqueName('authority');
const group = 'vault.service.dev';
let url: string;
let vault: Vault;
let controller: RunningController;
let before: KeySigner;
let renewed: KeySigner;

beforeAll(async () => {
  url = await freshDatabase('authority');
  vault = await openVault(createVaultPool(url));
  before = signerFromPem(await generateDevPki());
  renewed = signerFromPem(await generateDevPki());
  // The service signer's Secret is renewed right after the first time it is read.
  let reads = 0;
  const service = (): KeySigner => (reads++ === 0 ? before : renewed);
  await createNamespace(ns);
  controller = startTestController({
    vault,
    runtimeSigner: service,
    // The tenant has no key of its own: every envelope is the service's.
    envelopeSigner: namespaceSigners(service, () => Promise.resolve(undefined)),
    leasePrefix: 'authority',
    watchNamespace: ns,
  });
});

afterAll(async () => {
  await controller?.stop();
  await vault?.close();
});

describe('the envelope signer says whose key it is', () => {
  it('files a service key renewed mid-recording under the service, never under the tenant', async () => {
    const crs = kubeConfig('admin').makeApiClient(CustomObjectsApi);
    await crs.createNamespacedCustomObject({
      group,
      version: 'v1',
      namespace: ns,
      plural: 'runs',
      body: {
        apiVersion: `${group}/v1`,
        kind: 'Run',
        metadata: { name: 'renewed', namespace: ns },
        spec: {
          steps: [
            {
              id: 'ask',
              model: { name: 'm', provider: 'p', version: '1' },
              capabilities: [{ scope: 'kb:read', grantedBy: 'team:support' }],
            },
          ],
        },
      },
    });
    await driveRun(kubeConfig('admin'), ns, 'renewed');
    await waitFor('the AIBOM', async () => {
      const run = (await crs.getNamespacedCustomObject({
        group,
        version: 'v1',
        namespace: ns,
        plural: 'runs',
        name: 'renewed',
      })) as Run;
      return run.status?.conditions?.some((c) => c.type === 'AIBOMReady' && c.status === 'True')
        ? run
        : undefined;
    });

    // The key store: both service keys, under the service ('' namespace); none under the tenant.
    const db = new pg.Client({ connectionString: url });
    await db.connect();
    let rows: { key_id: string; namespace: string; role: string }[];
    try {
      ({ rows } = await db.query<{ key_id: string; namespace: string; role: string }>(
        "SELECT key_id, namespace, role FROM signer_certificates WHERE role = 'signer' ORDER BY key_id",
      ));
    } finally {
      await db.end();
    }
    expect(rows.map((r) => r.key_id)).toContain(renewed.keyId);
    expect(rows.filter((r) => r.namespace !== '')).toEqual([]);

    // The capability chain's root: the service, and the key that signed the record.
    const page = await vault.attestations.query({ namespaces: [ns], kind: 'capability' }, { limit: 10 });
    expect(page.items).toHaveLength(1);
    const statement = JSON.parse(Buffer.from(page.items[0]!.envelope.payload, 'base64').toString('utf8')) as {
      predicate: { root: { authority: string; keyId: string } };
    };
    expect(statement.predicate.root).toMatchObject({
      authority: 'service',
      keyId: page.items[0]!.signature.key_id,
    });
  }, 180_000);
});
