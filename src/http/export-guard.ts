import type { X509Certificate } from 'node:crypto';
import type { BlobStore } from '../blob/store.ts';
import { verifyManifest } from '../c2pa/index.ts';
import { ProblemError } from './problem.ts';

export interface GuardedArtifact {
  readonly bytes: Buffer;
  /** The sidecar manifest store, when there is one. */
  readonly manifest: Buffer | null;
  readonly manifestDigest: string | null;
  readonly attestationIds: string[];
  /**
   * The time the manifest's signer certificates were judged at, and why that time:
   * `<ISO time>; rfc3161 <TSA>` (its trusted time-stamp) or `<ISO time>; now` (none).
   */
  readonly validatedAt: string;
}

/**
 * The export rule of the spec: with SERVICE_REQUIRE_SIGNED_EXPORTS=1 an artifact only leaves the
 * service with a C2PA manifest that verifies (bound to these exact bytes, signed by a chain to the
 * service's trust anchors, judged at its trusted RFC 3161 time-stamp when it has one, so an
 * AIBOM still leaves after its signer certificate expired). Otherwise the download is blocked
 * (409, Retry-After) until the signer produces one (the recorder stores the manifest with the
 * AIBOM, before the Run shows it as ready).
 */
export async function loadGuardedArtifact(
  blobs: BlobStore,
  meta: { key: string; c2pa_manifest?: { key?: string; digest?: string } },
  opts: {
    required: boolean;
    trustAnchors: readonly X509Certificate[];
    /** Roots of trusted TSAs: a manifest time-stamped by one is judged at that time, not now. */
    tsaTrustAnchors?: readonly X509Certificate[];
  },
): Promise<GuardedArtifact> {
  const bytes = await blobs.get(meta.key);
  if (!bytes) throw new ProblemError(404, 'NOT_FOUND', `object ${meta.key} is missing from the object store`);
  const manifestKey = meta.c2pa_manifest?.key;
  const manifest = manifestKey ? await blobs.get(manifestKey) : null;
  let problems: string[] = manifest ? [] : ['no C2PA manifest is stored for it'];
  let attestationIds: string[] = [];
  let validatedAt = `${new Date().toISOString()}; now`;
  if (manifest) {
    const result = verifyManifest({
      store: manifest,
      asset: bytes,
      trustAnchors: [...opts.trustAnchors],
      tsaTrustAnchors: [...(opts.tsaTrustAnchors ?? [])],
    });
    problems = result.problems.map((p) => `${p.code}: ${p.message}`);
    attestationIds = result.attestationIds ?? [];
    const ts = result.timestamp;
    // A header value: the TSA's name is printable ASCII only.
    if (ts?.trusted === true) {
      validatedAt = `${ts.time.toISOString()}; rfc3161 ${ts.tsa ?? ''}`
        .replace(/[^\x20-\x7e]/g, '?')
        .trimEnd();
    }
  }
  if (opts.required && problems.length > 0) {
    throw new ProblemError(
      409,
      'UNSIGNED_EXPORT_BLOCKED',
      `download blocked until the signer produces a valid C2PA manifest: ${problems.join('; ')}`,
      { headers: { 'retry-after': '30' } },
    );
  }
  return {
    bytes,
    manifest,
    manifestDigest: manifest ? (meta.c2pa_manifest?.digest ?? null) : null,
    attestationIds,
    validatedAt,
  };
}
