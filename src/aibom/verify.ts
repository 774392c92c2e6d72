import type { X509Certificate } from 'node:crypto';
import { verifyManifest } from '../c2pa/index.ts';
import { algorithmOf, validateChain, verifyWith } from '../signing/index.ts';
import { TimestampError, verifyTimestamp } from '../timestamp/index.ts';
import type { Aibom } from './types.ts';
import { verifyViews, type ViewPart } from './views/verify.ts';
import type { ViewFormat } from './views/format.ts';
import { aibomDigest, summarize } from './serialize.ts';

/**
 * Which stored part of an AIBOM a problem is about (the blob, its C2PA sidecar, its metadata
 * record, one of its standard views).
 */
export type AibomPart = 'bom' | 'manifest' | 'metadata' | 'view';

export interface AibomProblem {
  readonly part: AibomPart;
  readonly code: string;
  readonly message: string;
}

interface AibomMeta {
  kind?: unknown;
  run_id?: unknown;
  status?: unknown;
  trust_subjects?: unknown;
  summary?: unknown;
  c2pa_manifest?: { attestation_ids?: unknown };
  digest?: string;
  attestation_ids?: string[];
  views?: unknown;
  signature?: {
    algorithm?: string;
    key_id?: string;
    signature?: string;
    timestamp?: { time?: string; tsa?: string; signed_timestamp?: string };
  };
}

/**
 * The runtime signature's RFC 3161 time-stamp (metadata `signature.timestamp`): with TSA trust
 * anchors, it must be over the signature bytes, from a TSA chaining to one, and the signer's chain
 * must have been valid at its time. Without any, the rule of the records (src/attest/verify.ts,
 * docs/timestamps.md) applies: the time-stamp is not checked and the chain is judged now (the C2PA
 * manifest's check, above, has done that). Returns the line to print, or pushes the problem.
 */
function checkSignatureTimestamp(
  stated: { time?: string; tsa?: string },
  signedTimestamp: string,
  signature: Buffer,
  chain: readonly X509Certificate[],
  anchors: readonly X509Certificate[],
  tsaAnchors: readonly X509Certificate[],
  problems: AibomProblem[],
): string | undefined {
  if (tsaAnchors.length === 0) {
    return `timestamp  ${stated.time ?? '?'} by ${stated.tsa ?? '?'}: not checked (no TSA trust anchor was given); certificates checked now`;
  }
  try {
    const t = verifyTimestamp(Buffer.from(signedTimestamp, 'base64'), {
      data: signature,
      trustAnchors: tsaAnchors,
    });
    // The stated time and TSA are unsigned copies of the token's: they must say the same.
    if (
      (stated.time !== undefined && Date.parse(stated.time) !== t.genTime.getTime()) ||
      (stated.tsa !== undefined && stated.tsa !== t.tsa)
    ) {
      problems.push({
        part: 'metadata',
        code: 'METADATA_MISMATCH',
        message: `signature.timestamp states ${stated.time ?? '?'} by ${stated.tsa ?? '?'}, its token says ${t.genTime.toISOString()} by ${t.tsa}`,
      });
      return undefined;
    }
    const valid = validateChain(chain, anchors, t.genTime);
    if (!valid.ok) {
      problems.push({
        part: 'metadata',
        code: 'OUTSIDE_VALIDITY',
        message: `the runtime signature was time-stamped at ${t.genTime.toISOString()}: ${valid.message}`,
      });
      return undefined;
    }
    return `timestamp  ${t.genTime.toISOString()} by ${t.tsa} (RFC 3161, over the runtime signature); certificates valid then`;
  } catch (err) {
    if (!(err instanceof TimestampError)) throw err;
    problems.push({
      part: 'metadata',
      code: `TIMESTAMP_${err.code}`,
      message: `runtime signature time-stamp: ${err.message}`,
    });
    return undefined;
  }
}

/**
 * Offline check of one AIBOM as stored (blob, `.c2pa` sidecar, metadata record), against CA
 * certificates the caller trusts: the digest, the C2PA manifest (bound to these bytes, chained to
 * an anchor), the runtime trust signature (by the manifest's signer), and the same attestation ids
 * in BOM, metadata and manifest. Certificates are judged at the time of a trusted RFC 3161
 * time-stamp (from a TSA chaining to `tsaTrustAnchors`) when the manifest and the signature carry
 * one, so an AIBOM verifies after its signer certificate expired; otherwise now. Used by
 * `service-ctl verify --aibom DIR` and by the export verifier. Pure; never throws for bad input.
 */
export function verifyAibomArtifact(
  parts: {
    bytes: Buffer;
    manifest: Buffer;
    metadata: unknown;
    /**
     * The standard views at hand (docs/aibom.md): given, every view the metadata lists is checked
     * (views/verify.ts), its record against the AIBOM's signer; absent, views are not looked at.
     */
    views?: readonly ViewPart[];
    /** Record id → digest of the records at hand, and the views recomputed from them (bundles). */
    records?: ReadonlyMap<string, string>;
    recomputed?: ReadonlyMap<ViewFormat, Buffer>;
  },
  trustAnchors: readonly X509Certificate[],
  tsaTrustAnchors: readonly X509Certificate[] = [],
): { lines: string[]; problems: AibomProblem[] } {
  const problems: AibomProblem[] = [];
  const lines: string[] = [];
  const meta = (
    typeof parts.metadata === 'object' && parts.metadata !== null ? parts.metadata : {}
  ) as AibomMeta;
  let bom: Partial<Aibom> = {};
  try {
    bom = JSON.parse(parts.bytes.toString('utf8')) as Aibom;
  } catch {
    problems.push({ part: 'bom', code: 'MALFORMED_AIBOM', message: 'the AIBOM is not JSON' });
  }
  const digest = aibomDigest(parts.bytes);
  if (digest !== meta.digest) {
    problems.push({
      part: 'bom',
      code: 'DIGEST_MISMATCH',
      message: `the AIBOM is ${digest}, its metadata says ${String(meta.digest)}`,
    });
  } else lines.push(`digest     ${digest}`);
  let c2pa: ReturnType<typeof verifyManifest> | undefined;
  try {
    c2pa = verifyManifest({ store: parts.manifest, asset: parts.bytes, trustAnchors, tsaTrustAnchors });
  } catch (err) {
    problems.push({ part: 'manifest', code: 'MALFORMED_MANIFEST', message: (err as Error).message });
  }
  if (c2pa !== undefined && !c2pa.ok) {
    for (const p of c2pa.problems)
      problems.push({ part: 'manifest', code: `C2PA_${p.code}`, message: p.message });
  } else if (c2pa !== undefined) {
    const at = c2pa.checkedAt?.toISOString() ?? '?';
    const ts = c2pa.timestamp;
    const when =
      ts?.trusted === true
        ? `certificates checked at ${at}, the time of its RFC 3161 time-stamp by ${ts.tsa ?? 'a trusted TSA'}`
        : ts !== undefined
          ? `certificates checked now, ${at}: its time-stamp is not trusted here (${ts.reason ?? ''})`
          : `certificates checked now, ${at}: the manifest has no time-stamp`;
    lines.push(`c2pa       ${c2pa.manifestLabel} signed by ${c2pa.signer} (trusted; ${when})`);
  }
  const sig = meta.signature;
  const keyAlgorithm = c2pa?.signerCertificate ? algorithmOf(c2pa.signerCertificate.publicKey) : undefined;
  if (!sig?.signature || !c2pa?.signerCertificate) {
    problems.push({
      part: 'metadata',
      code: 'SIGNATURE_MISSING',
      message: 'no runtime signature or no trusted signer certificate',
    });
  } else if (keyAlgorithm === undefined || sig.algorithm !== keyAlgorithm) {
    // The stated algorithm is unsigned: it must be the one the signer's key makes, not just any
    // string the verifier then ignores.
    problems.push({
      part: 'metadata',
      code: 'METADATA_MISMATCH',
      message: `signature.algorithm ${JSON.stringify(sig.algorithm ?? null)} is not what the signer's key makes (${String(keyAlgorithm)})`,
    });
  } else if (sig.key_id !== c2pa.signerKeyId) {
    problems.push({
      part: 'metadata',
      code: 'UNTRUSTED_KEY',
      message: `AIBOM signed by ${sig.key_id}, manifest signer is ${c2pa.signerKeyId}`,
    });
  } else if (
    !verifyWith(
      keyAlgorithm,
      c2pa.signerCertificate.publicKey,
      parts.bytes,
      Buffer.from(sig.signature, 'base64'),
    )
  ) {
    problems.push({
      part: 'metadata',
      code: 'SIGNATURE_INVALID',
      message: 'the runtime trust signature does not verify',
    });
  } else {
    lines.push(`signature  ${sig.algorithm} ${sig.key_id}`);
    const signed = sig.timestamp?.signed_timestamp;
    if (signed !== undefined) {
      const line = checkSignatureTimestamp(
        sig.timestamp ?? {},
        signed,
        Buffer.from(sig.signature, 'base64'),
        c2pa.chain ?? [c2pa.signerCertificate],
        trustAnchors,
        tsaTrustAnchors,
        problems,
      );
      if (line !== undefined) lines.push(line);
    }
  }
  problems.push(...restatementProblems(meta, bom));
  if (parts.views !== undefined && bom.metadata !== undefined && bom.trust !== undefined) {
    const signer = c2pa?.ok === true ? c2pa.signerCertificate : undefined;
    const checked = verifyViews({
      bom: bom as Aibom,
      aibomDigest: digest,
      views: meta.views,
      parts: parts.views,
      trust:
        signer !== undefined
          ? { certificateChain: c2pa?.chain ?? [signer], trustAnchors, tsaTrustAnchors }
          : undefined,
      ...(parts.records !== undefined ? { records: parts.records } : {}),
      ...(parts.recomputed !== undefined ? { recomputed: parts.recomputed } : {}),
    });
    lines.push(...checked.lines);
    problems.push(...checked.problems);
  }
  const ids = JSON.stringify(bom.trust?.attestation_ids ?? []);
  if (
    ids !== JSON.stringify(meta.attestation_ids ?? []) ||
    (c2pa?.ok === true && ids !== JSON.stringify(c2pa.attestationIds ?? []))
  ) {
    problems.push({
      part: 'metadata',
      code: 'ATTESTATION_IDS_MISMATCH',
      message: 'the BOM, its metadata and its C2PA manifest list different attestations',
    });
  } else {
    lines.push(
      `attests    ${(bom.trust?.attestation_ids ?? []).length} attestation ids, identical in BOM, metadata and C2PA`,
    );
  }
  return { lines, problems };
}

/**
 * The metadata record restates parts of the BOM (kind, run, status, subjects, summary, the
 * manifest's ids) without signing them: a reader of the record must be able to rely on each, so
 * each must equal what the signed bytes say. One problem per field that differs.
 */
function restatementProblems(meta: AibomMeta, bom: Partial<Aibom>): AibomProblem[] {
  if (bom.metadata === undefined || bom.trust === undefined || bom.components === undefined) return [];
  const expected: [string, unknown, unknown][] = [
    ['kind', meta.kind, 'aibom'],
    ['run_id', meta.run_id, bom.metadata.run_id],
    ['status', meta.status, bom.metadata.status],
    ['trust_subjects', meta.trust_subjects, bom.trust.subjects],
    ['summary', meta.summary, summarize(bom as Aibom)],
    ['c2pa_manifest.attestation_ids', meta.c2pa_manifest?.attestation_ids, bom.trust.attestation_ids],
  ];
  return expected
    .filter(([, stated, signed]) => canonical(stated) !== canonical(signed))
    .map(([field]) => ({
      part: 'metadata' as const,
      code: 'METADATA_MISMATCH',
      message: `metadata ${field} is not what the signed AIBOM says`,
    }));
}

/** JSON with object keys sorted: the comparison ignores key order, nothing else. */
function canonical(v: unknown): string {
  return JSON.stringify(v, (_k, x: unknown) =>
    x !== null && typeof x === 'object' && !Array.isArray(x)
      ? Object.fromEntries(Object.entries(x as Record<string, unknown>).sort(([a], [b]) => (a < b ? -1 : 1)))
      : x,
  );
}
