import type { KeySigner, Signer } from '../signing/index.ts';
import { certificateRef } from '../signing/index.ts';
import type { NewSignerCertificate, SignerCertificateRepository, SignerScope } from '../vault/index.ts';

/** The history row of a signer's certificate; undefined for a signer without one (a bare key). */
export function signerCertificateOf(signer: Signer, owner: SignerScope): NewSignerCertificate | undefined {
  const chain = signer.certificateChain;
  const leaf = chain?.[0];
  if (chain === undefined || leaf === undefined) return undefined;
  const cas = (signer as Partial<KeySigner>).caCertificates ?? [];
  return {
    certChainRef: certificateRef(leaf),
    keyId: signer.keyId,
    owner,
    algorithm: signer.algorithm,
    chainPem: chain.map((c) => c.toString()).join(''),
    caPem: cas.map((c) => c.toString()).join(''),
    notBefore: leaf.validFromDate,
    notAfter: leaf.validToDate,
  };
}

/**
 * Makes sure the certificate a record is about to be signed with is in the vault's signer history
 * before the record commits, so every `cert_chain_ref` of the vault resolves. One insert per
 * certificate per process (remembered after it succeeded); a failure is the caller's
 * VaultUnavailable, and the record is not written.
 */
export function signerHistory(
  repo: Pick<SignerCertificateRepository, 'record'> | undefined,
): (signer: Signer, owner: SignerScope) => Promise<void> {
  const known = new Set<string>();
  return async (signer, owner) => {
    if (repo === undefined) return;
    const row = signerCertificateOf(signer, owner);
    if (row === undefined) return;
    const key = `${owner.scope}/${owner.scope === 'customer' ? owner.namespace : ''}/${row.certChainRef}`;
    if (known.has(key)) return;
    await repo.record(row);
    known.add(key);
  };
}
