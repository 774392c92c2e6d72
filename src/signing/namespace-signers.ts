import type { KeySigner, Signer } from './index.ts';

/** Reads a namespace's customer-supplied signing Secret data; null when the namespace has none. */
export type SecretReader = (namespace: string) => Promise<Record<string, string> | null>;

/**
 * The envelope signer of a namespace: its own key when it created the customer-signer Secret, else
 * the service signer. Lookups are cached for `ttlMs` (a rotated customer key is picked up within
 * that time); a broken customer Secret is an error, never a silent fallback to the service key.
 */
export function namespaceSigners(
  serviceSigner: KeySigner,
  read: SecretReader,
  parse: (data: Record<string, string>) => KeySigner,
  ttlMs = 60_000,
): (namespace: string) => Promise<Signer> {
  const cache = new Map<string, { signer: Signer; expires: number }>();
  return async (namespace) => {
    const hit = cache.get(namespace);
    if (hit && hit.expires > Date.now()) return hit.signer;
    const data = await read(namespace);
    const signer = data ? parse(data) : serviceSigner;
    cache.set(namespace, { signer, expires: Date.now() + ttlMs });
    return signer;
  };
}
