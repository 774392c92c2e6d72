/**
 * Which certificate a record was signed with, years later: records carry `key_id` and
 * `cert_chain_ref`; the service keeps every certificate it signed with (vault
 * `signer_certificates`). Pure: the history is an argument.
 */

/** One certificate of a signer's history (structurally the vault's SignerCertificate). */
export interface KnownCertificate {
  /** `sha256:` of the leaf DER: what records carry as `cert_chain_ref`. */
  readonly certRef: string;
  readonly keyId: string;
  /** When the service first signed with it: the order of rotations. */
  readonly firstUsedAt: Date;
}

export type KeyResolution<C extends KnownCertificate> =
  | { ok: true; certificate: C }
  | {
      ok: false;
      /**
       * UNKNOWN_CERTIFICATE: no certificate with that reference was ever used by this signer.
       * KEY_MISMATCH: the reference names a certificate of another key than the record's `key_id`.
       * KEY_ROTATED: the key had been rotated away (a certificate of another key replaced it)
       * before the record was signed, grace included.
       */
      code: 'UNKNOWN_CERTIFICATE' | 'KEY_MISMATCH' | 'KEY_ROTATED';
      message: string;
    };

/**
 * How long after a rotation the previous key's signatures are still accepted: replicas pick up the
 * renewed Secret through their watches a few seconds apart, and a reconcile that started before
 * the rotation finishes with the signer it began with (so one AIBOM never mixes keys).
 */
export const ROTATION_GRACE_MS = 5 * 60_000;

/**
 * Resolves a record's signer in `history` (one signer's certificates, any order): the certificate
 * `certChainRef` names, if it certifies `keyId` and its key was still the signer's at `signedAt`.
 * A renewal that keeps the key (cert-manager `rotationPolicy: Never`) is not a rotation away.
 */
export function resolveSignerCertificate<C extends KnownCertificate>(
  history: readonly C[],
  record: { readonly keyId: string; readonly certChainRef: string },
  signedAt: Date,
  graceMs: number = ROTATION_GRACE_MS,
): KeyResolution<C> {
  const certificate = history.find((c) => c.certRef === record.certChainRef);
  if (certificate === undefined) {
    return {
      ok: false,
      code: 'UNKNOWN_CERTIFICATE',
      message: `certificate ${record.certChainRef} is not one this signer has used`,
    };
  }
  if (certificate.keyId !== record.keyId) {
    return {
      ok: false,
      code: 'KEY_MISMATCH',
      message: `certificate ${record.certChainRef} certifies key ${certificate.keyId}, not ${record.keyId}`,
    };
  }
  const replacedBy = history
    .filter((c) => c.keyId !== record.keyId && c.firstUsedAt.getTime() > certificate.firstUsedAt.getTime())
    .sort((a, b) => a.firstUsedAt.getTime() - b.firstUsedAt.getTime())[0];
  if (replacedBy !== undefined && signedAt.getTime() > replacedBy.firstUsedAt.getTime() + graceMs) {
    return {
      ok: false,
      code: 'KEY_ROTATED',
      message:
        `key ${record.keyId} was rotated away at ${replacedBy.firstUsedAt.toISOString()} ` +
        `(replaced by ${replacedBy.keyId}); the record was signed at ${signedAt.toISOString()}`,
    };
  }
  return { ok: true, certificate };
}

/** One entry of a whole key store (every signer of every scope, as the trust bundle lists them). */
export interface ScopedCertificate extends KnownCertificate {
  /** '' for the service's own keys; a tenant namespace for its customer-supplied key. */
  readonly namespace: string;
  readonly role: 'signer' | 'log';
}

/**
 * {@link resolveSignerCertificate} over a whole key store: the history that decides a rotation is
 * the one of the scope the named certificate belongs to (the service's keys, or one tenant's), so a
 * tenant's first use of its own key never counts as the service's key being rotated away.
 */
export function resolveInKeyStore<C extends ScopedCertificate>(
  store: readonly C[],
  record: { readonly keyId: string; readonly certChainRef: string },
  signedAt: Date,
  graceMs: number = ROTATION_GRACE_MS,
): KeyResolution<C> {
  const signers = store.filter((c) => c.role === 'signer');
  const named = signers.find((c) => c.certRef === record.certChainRef);
  const scope = named === undefined ? signers : signers.filter((c) => c.namespace === named.namespace);
  return resolveSignerCertificate(scope, record, signedAt, graceMs);
}

/**
 * When a record was signed, as far as a verifier can tell: its vault time (`created_at`, which the
 * vault's hash chain and checkpoints cover, not the signature), never later than a trusted RFC 3161
 * time-stamp, which proves the signature existed then. A time-stamp alone is no lower bound (it may
 * have been taken late, during a TSA outage), so it only ever moves the time earlier.
 */
export function signedAtOf(createdAt: Date, timestamp?: Date): Date {
  return timestamp !== undefined && timestamp.getTime() < createdAt.getTime() ? timestamp : createdAt;
}
