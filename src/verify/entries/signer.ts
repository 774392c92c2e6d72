import type { Trust } from '../../attest/index.ts';
import { hexOf } from '../../export/layout.ts';
import type { SignerMaterial } from '../../export/sigstore.ts';
import type { BundleState } from '../state.ts';

const isObject = (v: unknown): v is Record<string, unknown> =>
  typeof v === 'object' && v !== null && !Array.isArray(v);

/**
 * The trust a record of the bundle is verified under: the signer chain its `cert_chain_ref` names
 * (which an earlier `certs/` entry must have brought, leading to the anchors; judged at the
 * record's time), or the bare key its `key_id` names (which the caller must have given). A record
 * naming neither, or what the bundle did not establish, fails here (UNTRUSTED_KEY, MALFORMED).
 * `material` is what its Sigstore bundle must name as the signer.
 */
export function signerOf(
  state: BundleState,
  record: Record<string, unknown>,
  path: string,
): { trust?: Trust; material?: SignerMaterial } {
  const sig = isObject(record.signature) ? record.signature : {};
  const ref = typeof sig.cert_chain_ref === 'string' ? sig.cert_chain_ref : undefined;
  const keyId = typeof sig.key_id === 'string' ? sig.key_id : undefined;
  if (ref !== undefined) {
    const chain = state.signerChains.get(hexOf(ref));
    if (chain === undefined) {
      state.fail(
        path,
        'UNTRUSTED_KEY',
        `the bundle does not carry the certificate chain ${ref} before this record`,
      );
      return {};
    }
    return {
      trust: { certificateChain: chain, trustAnchors: state.anchors, at: state.at, ...state.tsa },
      material: { keyId: state.chainKeyId(ref, chain) },
    };
  }
  if (keyId !== undefined) {
    const key = state.trustedKeys.get(hexOf(keyId));
    if (key === undefined) {
      state.fail(
        path,
        'UNTRUSTED_KEY',
        `signed by a bare key ${keyId} that was not given as trusted (--key)`,
      );
      return { material: { keyId } };
    }
    return { trust: { publicKeys: [key], ...state.tsa }, material: { keyId } };
  }
  state.fail(path, 'MALFORMED', 'the record has no signature metadata');
  return {};
}
