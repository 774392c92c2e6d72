import { verifyManifest } from '../../c2pa/index.ts';
import { Paths } from '../../export/layout.ts';
import type { EntryHandler } from '../entry.ts';
import { ARCHIVE, type BundleState } from '../state.ts';

/**
 * `bundle.c2pa`, the last entry: a C2PA manifest signed by the service over every archive byte
 * before its own header (a data hash, which the reader computed as `prefixDigest`), whose claim
 * names the digest of index.json. Its signature must chain to the anchors. A data-hash mismatch is
 * reported once, against the manifest when other problems already name the changed entries, else
 * against the archive (bytes nothing else covers: a header, the padding).
 */
const EXPORT_URN = 'urn:aibom-vault:export:sha256:';

function checkManifest(state: BundleState, content: Buffer, prefixDigest: Buffer): void {
  let result: ReturnType<typeof verifyManifest>;
  try {
    result = verifyManifest({
      store: content,
      asset: Buffer.alloc(0),
      assetSha256: prefixDigest,
      trustAnchors: state.anchors,
      at: state.at,
    });
  } catch (err) {
    state.fail(Paths.manifest, 'MALFORMED_MANIFEST', (err as Error).message);
    return;
  }
  const mismatch = result.problems.some((p) => p.code === 'DATA_HASH_MISMATCH');
  for (const p of result.problems) {
    if (p.code === 'DATA_HASH_MISMATCH') continue;
    state.fail(Paths.manifest, `C2PA_${p.code}`, p.message);
  }
  const signatureOk = !result.problems.some(
    (p) => p.code === 'SIGNATURE_INVALID' || p.code === 'UNTRUSTED_SIGNER',
  );
  if (signatureOk && state.indexSha !== undefined && result.runId !== `${EXPORT_URN}${state.indexSha}`) {
    state.fail(
      Paths.index,
      'DIGEST_MISMATCH',
      'index.json is not the index the bundle manifest was signed over',
    );
  } else if (mismatch) {
    const others = state.problems.length > 0;
    state.fail(
      others ? Paths.manifest : ARCHIVE,
      'C2PA_DATA_HASH_MISMATCH',
      others
        ? 'the archive bytes before the manifest changed (see the entries above)'
        : 'the archive bytes before the manifest do not match its data hash',
    );
  }
}

export const manifestEntry: EntryHandler = {
  name: 'bundle manifest',
  pattern: /^bundle\.c2pa$/,
  listedIn: 'none',
  onEntry(state, entry) {
    state.manifestSeen = true;
    if (state.prefixDigest !== undefined) checkManifest(state, entry.content, state.prefixDigest);
    state.afterManifest = true;
  },
  end(state) {
    if (!state.manifestSeen) state.fail(Paths.manifest, 'MISSING', 'the bundle has no manifest of its own');
  },
};
