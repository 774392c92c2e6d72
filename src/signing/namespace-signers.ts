import type { KeySigner, Signer } from './index.ts';

/**
 * The signer of a namespace's envelopes, and whose key it is: `service` (the service signer) or
 * `namespace` (the tenant's own key). The choice is made here, once, with the key: a caller that
 * told them apart afterwards (by comparing with the service signer it saw a moment earlier) could
 * take a service key renewed in between for the tenant's and file it under the tenant.
 */
export interface EnvelopeSigner {
  readonly signer: Signer;
  readonly authority: 'service' | 'namespace';
}

/**
 * The envelope signer of a namespace: its own key when it has a customer-signer Secret, else the
 * service signer as it is at this moment (both follow their Secrets: src/signing/watch.ts). A
 * broken customer Secret is an error (SigningError from `customer`), never a silent fallback to the
 * service key.
 */
export function namespaceSigners(
  service: () => KeySigner,
  customer: (namespace: string) => Promise<KeySigner | undefined>,
): (namespace: string) => Promise<EnvelopeSigner> {
  return async (namespace) => {
    const own = await customer(namespace);
    return own !== undefined
      ? { signer: own, authority: 'namespace' }
      : { signer: service(), authority: 'service' };
  };
}
