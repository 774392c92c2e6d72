import type { X509Certificate } from 'node:crypto';
import { hexOf } from '../../export/layout.ts';
import { certificateRef, keyIdOf, parseCertificates, validateChain } from '../../signing/index.ts';
import type { BundleState } from '../state.ts';

/**
 * A certificate chain file of the bundle (a signer's `certs/<ref>.pem`, a log key's
 * `scitt/log-certs/<kid>.pem`): leaf first, named by its leaf (the signer's cert_chain_ref, the
 * log key's COSE kid), and trusted only when it leads to the caller's anchors. Returns the chain
 * when it may be used, else undefined with the problem reported.
 *
 * A signer chain outside its validity now is kept: each record signed with it is judged at its own
 * time (a trusted time-stamp's), and fails there when it has none. A log key's chain must be valid
 * now.
 */
export function trustedChainFile(
  state: BundleState,
  hex: string,
  path: string,
  content: Buffer,
  role: 'signer' | 'log',
): X509Certificate[] | undefined {
  let chain: X509Certificate[];
  try {
    chain = parseCertificates(content.toString('utf8'), path);
  } catch (err) {
    state.fail(path, 'MALFORMED', (err as Error).message);
    return undefined;
  }
  const leaf = chain[0]!;
  const named = role === 'signer' ? hexOf(certificateRef(leaf)) : hexOf(keyIdOf(leaf.publicKey));
  if (named !== hex) state.fail(path, 'RECORD_MISMATCH', `the leaf does not match the file name (${named})`);
  const valid = validateChain(chain, state.anchors, state.at);
  const timed = !valid.ok && (valid.failure === 'EXPIRED' || valid.failure === 'NOT_YET_VALID');
  if (!valid.ok && !(timed && role === 'signer')) {
    state.fail(path, 'UNTRUSTED_KEY', `${valid.message}`);
    return undefined;
  }
  return chain;
}
