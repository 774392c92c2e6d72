import type { LogKey } from '../cose/key.ts';
import { rememberSigner } from './keys.ts';
import type { KeySigner } from '../signing/index.ts';
import type { Transparency } from '../transparency/setup.ts';
import type { Vault } from '../vault/index.ts';

/**
 * The service's own keys as exports and the key-distribution endpoint need them: the log keys
 * (with the log signer's chain) and a one-time record of the service signer and log signer in the
 * key store, before anything they signed leaves or a verifier asks for them.
 */
export function exportKeys(deps: {
  readonly vault: Vault;
  readonly signer?: KeySigner | (() => KeySigner);
  readonly transparency?: Transparency;
}): {
  logKeys: () => Promise<{ key: LogKey; chainPem?: string }[]>;
  ensureServiceKeys: () => Promise<void>;
} {
  const t = deps.transparency;
  const chain = t?.logSigner.certificateChain;
  const chainPem = chain !== undefined ? chain.map((c) => c.toString()).join('') : undefined;
  return {
    logKeys: () =>
      Promise.resolve(
        (t?.log.keys ?? []).map((key) => ({
          key,
          ...(chainPem !== undefined && key.kid.toString('hex') === t!.logSigner.keyId.slice(7)
            ? { chainPem }
            : {}),
        })),
      ),
    ensureServiceKeys: async () => {
      const signer = typeof deps.signer === 'function' ? deps.signer() : deps.signer;
      if (signer !== undefined)
        await rememberSigner(deps.vault.signers, signer, { namespace: '', role: 'signer' });
      if (t !== undefined)
        await rememberSigner(deps.vault.signers, t.logSigner, { namespace: '', role: 'log' });
    },
  };
}
