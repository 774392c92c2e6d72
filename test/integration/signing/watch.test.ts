import { CoreV1Api } from '@kubernetes/client-node';
import { pino } from 'pino';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { kubeClient } from '../../../src/kube/index.ts';
import { SigningError, signerFromPem, type KeySigner } from '../../../src/signing/index.ts';
import { watchCustomerSigners, watchSignerSecret } from '../../../src/signing/watch.ts';
import { generateDevPki, toSecretData, type DevPki } from '../../helpers/pki.ts';
import { kubeConfig, kubeAccess, uniqueName } from '../../helpers/stack.ts';
import { waitFor } from '../../helpers/wait.ts';

/**
 * Signers that follow their kubernetes.io/tls Secrets on the real API server, as the identity the
 * in-process tests use (bound to the controller's roles, plus list/watch of `operator-test-signer`
 * by name): a renewal is picked up without a restart, a broken renewal never replaces a working
 * signer, and RBAC refuses to let the watch see any other Secret.
 */
const logger = pino({ level: 'silent' });
const core = () => kubeConfig('admin').makeApiClient(CoreV1Api);
const client = () => kubeClient(kubeAccess('aibom-vault'));
const SIGNER = 'operator-test-signer';
const CUSTOMER = 'aibom-vault-customer-signer';

const keyIdOf = (pki: DevPki): string => signerFromPem(pki).keyId;

async function putSecret(namespace: string, name: string, data: Record<string, string>): Promise<void> {
  const body = { metadata: { name }, type: 'kubernetes.io/tls', data };
  try {
    await core().replaceNamespacedSecret({ namespace, name, body });
  } catch {
    await core().createNamespacedSecret({ namespace, body });
  }
}

let namespace: string;
beforeAll(async () => {
  namespace = uniqueName('signer-watch');
  await core().createNamespace({ body: { metadata: { name: namespace } } });
});
afterAll(async () => {
  await core().deleteNamespace({ name: namespace });
});

describe('watchSignerSecret', () => {
  it('loads the Secret, follows a renewal to a new key, keeps the last good signer through bad or deleted Secrets', async () => {
    const [first, second] = await Promise.all([generateDevPki(), generateDevPki()]);
    await putSecret(namespace, SIGNER, toSecretData(first));
    const watched = watchSignerSecret({ client: client(), namespace, name: SIGNER, logger });
    try {
      await watched.ready();
      expect(watched.current().keyId).toBe(keyIdOf(first));
      const rotations: [KeySigner, KeySigner][] = [];
      watched.onRotate((next, previous) => rotations.push([next, previous]));

      await putSecret(namespace, SIGNER, toSecretData(second));
      await waitFor('the renewed key', () =>
        Promise.resolve(watched.current().keyId === keyIdOf(second) ? true : undefined),
      );
      expect(rotations.map(([n, p]) => [n.keyId, p.keyId])).toEqual([[keyIdOf(second), keyIdOf(first)]]);
      // Both CAs stay anchors: what the first one signed still has to verify.
      expect(watched.caCertificates().map((c) => c.subject)).toHaveLength(2);

      // A renewal that is not usable (the key of another certificate) is refused, with its code.
      await putSecret(namespace, SIGNER, {
        ...toSecretData(second),
        'tls.key': toSecretData(first)['tls.key'],
      });
      await waitFor('the refused renewal', () => Promise.resolve(watched.lastError()));
      expect(watched.lastError()?.code).toBe('KEY_CERT_MISMATCH');
      expect(watched.current().keyId).toBe(keyIdOf(second));

      await core().deleteNamespacedSecret({ namespace, name: SIGNER });
      await new Promise((r) => setTimeout(r, 500));
      expect(watched.current().keyId).toBe(keyIdOf(second));
      expect(rotations).toHaveLength(1);
    } finally {
      await watched.stop();
    }
  });

  it('a Secret the identity may not read by name is never seen (RBAC), and ready() says so', async () => {
    const name = 'db-password';
    await putSecret(namespace, name, toSecretData(await generateDevPki()));
    const watched = watchSignerSecret({ client: client(), namespace, name, logger });
    try {
      const err: unknown = await watched.ready(3_000).then(
        () => undefined,
        (e: unknown) => e,
      );
      expect(err).toBeInstanceOf(SigningError);
      expect((err as SigningError).code).toBe('MISSING_MATERIAL');
      expect(() => watched.current()).toThrow(SigningError);
    } finally {
      await watched.stop();
    }
  });
});

describe('watchCustomerSigners', () => {
  it("gives each namespace its own key, follows a renewal, and refuses a broken one (never the service's)", async () => {
    const other = uniqueName('signer-watch-none');
    await core().createNamespace({ body: { metadata: { name: other } } });
    const [first, second] = await Promise.all([generateDevPki(), generateDevPki()]);
    await putSecret(namespace, CUSTOMER, toSecretData(first));
    const customers = watchCustomerSigners({ client: client(), name: CUSTOMER, logger });
    try {
      expect((await customers.signerOf(namespace))?.keyId).toBe(keyIdOf(first));
      expect(await customers.signerOf(other)).toBeUndefined();

      await putSecret(namespace, CUSTOMER, toSecretData(second));
      await waitFor('the renewed customer key', async () =>
        (await customers.signerOf(namespace))?.keyId === keyIdOf(second) ? true : undefined,
      );

      await putSecret(namespace, CUSTOMER, { ...toSecretData(second), 'tls.crt': 'bm90IGEgY2VydA==' });
      const err = await waitFor('the broken customer Secret', async () =>
        customers.signerOf(namespace).then(
          () => undefined,
          (e: unknown) => e,
        ),
      );
      expect(err).toBeInstanceOf(SigningError);
      expect((err as SigningError).code).toBe('MALFORMED_CERTIFICATE');
    } finally {
      await customers.stop();
      await core().deleteNamespace({ name: other });
    }
  });
});
