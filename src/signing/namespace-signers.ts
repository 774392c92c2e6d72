import type { KeySigner, Signer } from './index.ts';

/**
 * The envelope signer of a namespace: its own key when it has a customer-signer Secret, else the
 * service signer as it is at this moment (both follow their Secrets: src/signing/watch.ts). A
 * broken customer Secret is an error (SigningError from `customer`), never a silent fallback to the
 * service key.
 */
export function namespaceSigners(
  service: () => KeySigner,
  customer: (namespace: string) => Promise<KeySigner | undefined>,
): (namespace: string) => Promise<Signer> {
  return async (namespace) => (await customer(namespace)) ?? service();
}
