import { createPublicKey, type X509Certificate } from 'node:crypto';
import { decodeKeySet, type LogKey } from '../cose/key.ts';
import { BaseError } from '../errors.ts';
import {
  parseCertificates,
  resolveInKeyStore,
  signedAtOf,
  type ScopedCertificate,
} from '../signing/index.ts';
import type { Problem } from './errors.ts';
import { signedLabels } from './labels.ts';
import { verifyRecord, type Trust, type VerificationResult } from './verify.ts';

/**
 * The trust bundle of GET /v1/keys (`trust-bundle.json` of `service-ctl keys fetch`): the CA
 * certificates, every signer the service ever used with its first use, and the TSA roots. With it,
 * a record is verified with the certificate its `cert_chain_ref` names (records of rotated keys
 * included), its RFC 3161 time-stamp against the TSA roots, and refused when signed with a key that
 * had been rotated away before (KEY_ROTATED, src/signing/rotation.ts). `service-ctl verify
 * --trust-bundle` and the web UI's verification column both verify through src/verify/record.ts,
 * which uses bundleVerifier, so both give the same verdict on the same record.
 *
 * A signer is trusted only within its scope: the service's keys (namespace '') sign for every
 * namespace, a tenant's customer key only for its own ({@link signerScopeProblem}). Without that,
 * a tenant holding its own key could mint records, capability approvals included, that verify as
 * another tenant's.
 */

/** One signer of the bundle, as the history and the per-record trust need it. */
export interface BundleSigner extends ScopedCertificate {
  readonly chainPem: string;
  readonly caPem: string;
}

export interface TrustBundle {
  readonly anchors: readonly X509Certificate[];
  readonly signers: readonly BundleSigner[];
  /** `tsa_trust_anchors_pem`: the roots of the TSA the service uses (empty when it has none). */
  readonly tsaAnchors: readonly X509Certificate[];
  /**
   * `log_keys.cose_key_set`: the keys of the service's own (local) transparency log, current and
   * past (empty when the bundle names none). A receipt under one is a dry run, not a remote
   * publication.
   */
  readonly logKeys: readonly LogKey[];
}

interface KeyEntryJson {
  cert_chain_ref: string;
  key_id: string;
  namespace?: string;
  role?: 'signer' | 'log';
  chain_pem: string;
  ca_pem?: string;
  first_used_at: string;
}

function isObject(v: unknown): v is Record<string, unknown> {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}

/** A document that is not a usable trust bundle; the message names what is wrong. */
export class TrustBundleError extends BaseError<'TRUST_BUNDLE_INVALID'> {
  constructor(message: string, options?: { cause?: unknown }) {
    super('TRUST_BUNDLE_INVALID', message, options);
  }
}

/** A trust bundle from the JSON of GET /v1/keys; throws TrustBundleError naming what is wrong. */
export function trustBundleOf(json: unknown): TrustBundle {
  if (!isObject(json) || typeof json.trust_anchors_pem !== 'string' || !Array.isArray(json.signers)) {
    throw new TrustBundleError('not a trust bundle (trust_anchors_pem and signers expected)');
  }
  try {
    const signers = (json.signers as KeyEntryJson[]).map((e) => {
      const firstUsedAt = new Date(e.first_used_at);
      if (typeof e.cert_chain_ref !== 'string' || !Number.isFinite(firstUsedAt.getTime())) {
        throw new TrustBundleError('a signer lacks cert_chain_ref or first_used_at');
      }
      return {
        certRef: e.cert_chain_ref,
        keyId: e.key_id,
        namespace: e.namespace ?? '',
        role: e.role ?? 'signer',
        firstUsedAt,
        chainPem: e.chain_pem,
        caPem: e.ca_pem ?? '',
      } satisfies BundleSigner;
    });
    const tsaPem = typeof json.tsa_trust_anchors_pem === 'string' ? json.tsa_trust_anchors_pem : '';
    const logSet = isObject(json.log_keys) ? json.log_keys.cose_key_set : undefined;
    return {
      anchors: parseCertificates(json.trust_anchors_pem, 'trust_anchors_pem'),
      signers,
      tsaAnchors: tsaPem.includes('CERTIFICATE') ? parseCertificates(tsaPem, 'tsa_trust_anchors_pem') : [],
      logKeys: typeof logSet === 'string' && logSet !== '' ? decodeKeySet(Buffer.from(logSet, 'base64')) : [],
    };
  } catch (err) {
    throw new TrustBundleError((err as Error).message, { cause: err });
  }
}

function signatureOf(record: unknown): { keyId?: string; certRef?: string } {
  const sig = isObject(record) && isObject(record.signature) ? record.signature : {};
  return {
    ...(typeof sig.key_id === 'string' ? { keyId: sig.key_id } : {}),
    ...(typeof sig.cert_chain_ref === 'string' ? { certRef: sig.cert_chain_ref } : {}),
  };
}

/**
 * UNTRUSTED_KEY unless a signer of scope `signerNamespace` may sign `statement`: a service key
 * ('') signs for any namespace; a tenant's customer key only for the namespace signed in the
 * statement's labels (src/attest/labels.ts: the namespace a record is authenticated for, which
 * verifyRecord already binds the record's `namespace` field to, LABEL_MISMATCH). A statement
 * without signed labels names no namespace, so a customer key cannot be shown to be in scope and
 * is refused too. `statement` undefined (not parsed) is left to the other problems of the record.
 */
export function signerScopeProblem(
  signerNamespace: string,
  statement: unknown,
  signer: string,
): Problem | undefined {
  if (signerNamespace === '' || statement === undefined) return undefined;
  const signed = signedLabels(statement)?.namespace;
  if (signed === signerNamespace) return undefined;
  return {
    code: 'UNTRUSTED_KEY',
    message:
      signed === undefined
        ? `${signer} is namespace ${signerNamespace}'s customer key, and the statement signs no namespace`
        : `${signer} is namespace ${signerNamespace}'s customer key, not one for namespace ${signed}`,
  };
}

/**
 * The trust for one record: the chain its `cert_chain_ref` names in the bundle (anchored at the
 * bundle's CAs and the signer's own `ca_pem`), or the bare key its `key_id` names, with the
 * namespace that signer's scope is ('' for the service). A record naming nothing the bundle holds
 * gets UNKNOWN_CERTIFICATE.
 */
function recordTrust(
  record: unknown,
  bundle: TrustBundle,
  tsaTrustAnchors: readonly X509Certificate[],
): { trust: Trust; namespace: string; signer: string } | { problem: Problem } {
  const { keyId, certRef } = signatureOf(record);
  const signers = bundle.signers.filter((s) => s.role === 'signer');
  const tsa = tsaTrustAnchors.length > 0 ? { tsaTrustAnchors } : {};
  if (certRef !== undefined) {
    const entry = signers.find((s) => s.certRef === certRef);
    if (entry === undefined) {
      return {
        problem: {
          code: 'UNKNOWN_CERTIFICATE',
          message: `certificate ${certRef} is not in the trust bundle (fetch it again: service-ctl keys fetch)`,
        },
      };
    }
    const own = entry.caPem.includes('CERTIFICATE') ? parseCertificates(entry.caPem, 'ca_pem') : [];
    return {
      trust: {
        certificateChain: parseCertificates(entry.chainPem, entry.certRef),
        trustAnchors: [...bundle.anchors, ...own],
        ...tsa,
      },
      namespace: entry.namespace,
      signer: `certificate ${entry.certRef}`,
    };
  }
  const bare = signers.find((s) => s.keyId === keyId && !s.chainPem.includes('CERTIFICATE'));
  if (bare === undefined) {
    return {
      problem: { code: 'UNKNOWN_CERTIFICATE', message: `no key ${keyId ?? '(none)'} in the trust bundle` },
    };
  }
  return {
    trust: { publicKeys: [createPublicKey(bare.chainPem)], ...tsa },
    namespace: bare.namespace,
    signer: `key ${bare.keyId}`,
  };
}

/**
 * recordTrust for many records of one bundle: the chains and keys are parsed once per
 * `cert_chain_ref` (or bare key id), not once per record.
 */
function recordTruster(
  bundle: TrustBundle,
  tsaTrustAnchors: readonly X509Certificate[],
): (record: unknown) => ReturnType<typeof recordTrust> {
  const seen = new Map<string, ReturnType<typeof recordTrust>>();
  return (record) => {
    const { keyId, certRef } = signatureOf(record);
    const key = certRef !== undefined ? `chain ${certRef}` : `key ${keyId ?? ''}`;
    let chosen = seen.get(key);
    if (chosen === undefined) seen.set(key, (chosen = recordTrust(record, bundle, tsaTrustAnchors)));
    return chosen;
  };
}

/**
 * KEY_ROTATED (or KEY_MISMATCH) for a record whose certificate's key had been replaced, beyond
 * the grace, before the record was signed: its `created_at`, or its trusted time-stamp's time
 * when earlier (src/signing/rotation.ts `signedAtOf`). `signers` is the signer history (the trust
 * bundle's, or the one an export verifier is given).
 */
export function rotationProblem(
  record: unknown,
  signers: readonly ScopedCertificate[],
  trustedTimestamp: Date | undefined,
): Problem | undefined {
  const { keyId, certRef } = signatureOf(record);
  if (keyId === undefined || certRef === undefined) return undefined;
  const createdAt =
    isObject(record) && typeof record.created_at === 'string' ? new Date(record.created_at) : undefined;
  const signedAt =
    createdAt !== undefined && Number.isFinite(createdAt.getTime())
      ? signedAtOf(createdAt, trustedTimestamp)
      : trustedTimestamp;
  if (signedAt === undefined) return undefined;
  const r = resolveInKeyStore(signers, { keyId, certChainRef: certRef }, signedAt);
  return r.ok ? undefined : { code: r.code, message: r.message };
}

/**
 * signerScopeProblem for a record judged against a signer history: the signer is the entry its
 * `cert_chain_ref` names, else the one its `key_id` names; a signer the history does not hold is
 * rotationProblem's (UNKNOWN_CERTIFICATE), not this one's.
 */
export function scopeProblemIn(
  signers: readonly ScopedCertificate[],
  record: unknown,
  statement: unknown,
): Problem | undefined {
  const { keyId, certRef } = signatureOf(record);
  const own = signers.filter((c) => c.role === 'signer');
  const entry =
    certRef !== undefined ? own.find((c) => c.certRef === certRef) : own.find((c) => c.keyId === keyId);
  return entry === undefined
    ? undefined
    : signerScopeProblem(entry.namespace, statement, `signer ${entry.certRef}`);
}

/**
 * Verifies records against one bundle (chains and keys parsed once each): verifyRecord with the
 * trust the record's `cert_chain_ref` or key id names and the bundle's TSA roots (or
 * `tsaTrustAnchors` when given), then the rotation check at the record's signing time (its
 * trusted time-stamp's time when earlier than `created_at`). A record naming nothing the bundle
 * holds fails with UNKNOWN_CERTIFICATE, one signed by a customer key for another namespace than
 * the key's with UNTRUSTED_KEY (signerScopeProblem). Returns the trust used too (capability checks
 * reuse it).
 */
export function bundleVerifier(
  bundle: TrustBundle,
  tsaTrustAnchors: readonly X509Certificate[] = bundle.tsaAnchors,
): (record: unknown) => { result: VerificationResult; trust?: Trust } {
  const trustOf = recordTruster(bundle, tsaTrustAnchors);
  return (record) => {
    const chosen = trustOf(record);
    if ('problem' in chosen) return { result: { ok: false, problems: [chosen.problem] } };
    const result = verifyRecord(record, chosen.trust);
    const outOfScope = signerScopeProblem(chosen.namespace, result.statement, chosen.signer);
    if (outOfScope !== undefined) {
      result.problems.push(outOfScope);
      result.ok = false;
    }
    const rotated = rotationProblem(
      record,
      bundle.signers,
      result.timestamp?.trusted === true ? result.timestamp.time : undefined,
    );
    if (rotated !== undefined) {
      result.problems.push(rotated);
      result.ok = false;
    }
    return { result, trust: chosen.trust };
  };
}
