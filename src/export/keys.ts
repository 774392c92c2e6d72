import type { X509Certificate } from 'node:crypto';
import { certificateRef, type KeySigner, type Signer } from '../signing/index.ts';
import type { NewSignerCertificate, SignerCertificateRepository } from '../vault/index.ts';

/**
 * Key distribution: what the vault remembers of every key that signs (signer_certificates), so
 * that `cert_chain_ref` and key ids of any record, current or past, resolve to certificates.
 */

/** The store's entry for a signer: its chain (leaf first) or its bare public key. */
export function signerEntry(
  signer: Signer & { caCertificates?: readonly X509Certificate[] },
  scope: { namespace: string; role: 'signer' | 'log' },
): NewSignerCertificate {
  const chain = signer.certificateChain ?? [];
  const leaf = chain[0];
  const pem = (certs: readonly X509Certificate[]) => certs.map((c) => c.toString()).join('');
  return {
    certRef: leaf !== undefined ? certificateRef(leaf) : signer.keyId,
    keyId: signer.keyId,
    namespace: scope.namespace,
    role: scope.role,
    chainPem:
      leaf !== undefined ? pem(chain) : (signer.publicKey.export({ type: 'spki', format: 'pem' }) as string),
    caPem: pem(signer.caCertificates ?? []),
    notBefore: leaf?.validFromDate ?? null,
    notAfter: leaf?.validToDate ?? null,
  };
}

let remembered = new WeakMap<Signer, Map<string, Promise<void>>>();

/**
 * Forgets which signers were recorded: the next record of each records it again (`ON CONFLICT DO
 * NOTHING`). After the database lost acknowledged writes (docs/failover.md) a certificate this
 * process recorded may be gone with them.
 */
export function forgetRememberedSigners(): void {
  remembered = new WeakMap();
}

/**
 * Records `signer` once per process and scope (the table is insert-once anyway; this saves the
 * round trip on every signature). A failed write is forgotten, so the next use retries it.
 */
export function rememberSigner(
  repo: Pick<SignerCertificateRepository, 'record'>,
  signer: Signer | KeySigner,
  scope: { namespace: string; role: 'signer' | 'log' },
): Promise<void> {
  let scopes = remembered.get(signer);
  if (scopes === undefined) remembered.set(signer, (scopes = new Map<string, Promise<void>>()));
  const key = `${scope.namespace}\n${scope.role}`;
  let done = scopes.get(key);
  if (done === undefined) {
    done = repo.record(signerEntry(signer, scope)).catch((err: unknown) => {
      scopes.delete(key);
      throw err;
    });
    scopes.set(key, done);
  }
  return done;
}
