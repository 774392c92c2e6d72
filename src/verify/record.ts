import type { X509Certificate } from 'node:crypto';
import { verifyRecord, type Trust, type VerificationResult } from '../attest/index.ts';
import { bundleVerifier, type TrustBundle } from '../attest/trust-bundle.ts';
import { verifyCapabilities } from '../capability/verify.ts';
import type { LogKey } from '../cose/key.ts';
import { receiptProblems } from './receipt.ts';

/**
 * One record as the API serves it, offline: the verdict of `service-ctl verify <record|id>` and of
 * the web UI's verification column, made by this one function for both (issue 22 item 11: the UI
 * once rebuilt trust resolution without the TSA roots and disagreed with the CLI).
 *
 * The trust is either a trust bundle (GET /v1/keys, `keys fetch`): each record verified with the
 * chain its `cert_chain_ref` names, its RFC 3161 time-stamp against the bundle's TSA roots (or
 * those given), rotation and the signer's scope (src/attest/trust-bundle.ts); or one key or chain
 * given for every record. On top, as asked: the SCITT receipt (with log keys, and whether its
 * claim of a remote publication is true) and the capability chains and tokens
 * (src/capability/verify.ts).
 */

export type RecordTrustSource =
  | { readonly bundle: TrustBundle; readonly tsaTrustAnchors?: readonly X509Certificate[] }
  | { readonly trust: Trust };

export interface RecordChecks {
  /** The receipt is part of the verdict, checked under these log keys (`--log-keys`). */
  readonly logKeys?: readonly LogKey[];
  /** The deployment's own log keys (the trust bundle's): a "published" receipt under one fails. */
  readonly localLogKeys?: readonly LogKey[];
  /** Capability chains and tokens (default true). */
  readonly capabilities?: boolean;
}

export interface RecordVerdict {
  /** The record verified, with every check asked for. */
  readonly ok: boolean;
  /** Signature, time-stamp, trust; its problems include the receipt's and the chains'. */
  readonly result: VerificationResult;
  /** One line per verified capability chain; empty unless `ok` (a failed record vouches for nothing). */
  readonly chains: readonly string[];
}

/** A verifier of many records under one trust source (a bundle's chains are parsed once each). */
export function recordVerifier(
  source: RecordTrustSource,
  checks: RecordChecks = {},
): (record: unknown) => Promise<RecordVerdict> {
  const bundled =
    'bundle' in source
      ? bundleVerifier(source.bundle, source.tsaTrustAnchors ?? source.bundle.tsaAnchors)
      : undefined;
  return async (record) => {
    const { result, trust } =
      bundled !== undefined
        ? bundled(record)
        : {
            result: verifyRecord(record, (source as { trust: Trust }).trust),
            trust: (source as { trust: Trust }).trust,
          };
    if (checks.logKeys !== undefined) {
      const problems = receiptProblems(
        record as Record<string, unknown>,
        checks.logKeys,
        checks.localLogKeys,
      );
      for (const p of problems) result.problems.push({ code: p.code as never, message: p.message });
      if (problems.length > 0) result.ok = false;
    }
    let chains: readonly string[] = [];
    if (checks.capabilities !== false && trust !== undefined) {
      const caps = await verifyCapabilities(record, trust);
      for (const p of caps.problems) result.problems.push({ code: p.code as never, message: p.message });
      if (!caps.ok) result.ok = false;
      chains = caps.lines;
    }
    return { ok: result.ok, result, chains: result.ok ? chains : [] };
  };
}
