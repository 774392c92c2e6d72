import type { Signer } from './signer.ts';

/**
 * Chooses the key that signs a namespace's attestations: the namespace's customer-supplied key
 * when one is registered, otherwise the service signer. Mutable because customer keys arrive and
 * rotate with their Secrets; the watcher that reads them calls `set`/`delete`.
 */
export interface SignerRegistry {
  readonly serviceSigner: Signer;
  forNamespace(namespace: string): Signer;
  /** True when `forNamespace` returns a customer-supplied key. */
  hasCustomerKey(namespace: string): boolean;
  set(namespace: string, signer: Signer): void;
  delete(namespace: string): boolean;
}

export function createSignerRegistry(
  serviceSigner: Signer,
  customerSigners: Iterable<readonly [namespace: string, signer: Signer]> = [],
): SignerRegistry {
  const byNamespace = new Map<string, Signer>(customerSigners);
  return {
    serviceSigner,
    forNamespace: (namespace) => byNamespace.get(namespace) ?? serviceSigner,
    hasCustomerKey: (namespace) => byNamespace.has(namespace),
    set: (namespace, signer) => {
      byNamespace.set(namespace, signer);
    },
    delete: (namespace) => byNamespace.delete(namespace),
  };
}
