import { hash } from 'node:crypto';
import { verifyAibomArtifact } from '../../aibom/verify.ts';
import { Paths } from '../../export/layout.ts';
import type { EntryHandler } from '../entry.ts';
import type { BundleState, OpenRecord } from '../state.ts';

/**
 * `runs/<run>/aibom.json`, `aibom.c2pa`, `aibom.meta.json`: the AIBOM of a run, right after its
 * AIBOM attestation record. When that record closes, the three must all be there: the blob, its
 * C2PA manifest (signed, chaining to the anchors, time-stamped) and its metadata (signature,
 * attestation ids) verify together (src/aibom/verify.ts), and the blob is the attestation's
 * subject.
 */

function checkAibom(
  state: BundleState,
  r: OpenRecord,
  run: string,
  files: { bytes: Buffer; manifest: Buffer; metadata: Buffer },
): void {
  let metadata: unknown;
  try {
    metadata = JSON.parse(files.metadata.toString('utf8')) as unknown;
  } catch {
    state.fail(Paths.aibomMetadata(run), 'MALFORMED', 'not JSON');
    return;
  }
  const result = verifyAibomArtifact(
    { bytes: files.bytes, manifest: files.manifest, metadata },
    state.anchors,
    state.options.tsaTrustAnchors ?? [],
  );
  const pathOf = {
    bom: Paths.aibom(run),
    manifest: Paths.aibomManifest(run),
    metadata: Paths.aibomMetadata(run),
    // Not passed here: views are checked when their own records close (aibom-view.ts).
    view: Paths.aibomMetadata(run),
  };
  for (const p of result.problems) state.fail(pathOf[p.part], p.code, p.message);
  const subject = r.statement?.subject[0]?.digest.sha256;
  if (subject !== undefined && subject !== hash('sha256', files.bytes)) {
    state.fail(
      Paths.aibom(run),
      'DIGEST_MISMATCH',
      `not the AIBOM attestation ${r.id}'s subject (sha256:${subject})`,
    );
  }
  state.runs++;
}

const closeCheck = (state: BundleState, r: OpenRecord): void => {
  if (r.record.kind !== 'aibom') return;
  const a = r.aibom ?? {};
  const run = typeof r.record.run_id === 'string' ? r.record.run_id : '?';
  if (a.bytes === undefined || a.manifest === undefined || a.metadata === undefined) {
    state.fail(
      Paths.aibom(run),
      'MISSING',
      'the AIBOM record is exported without its blob, manifest and metadata',
    );
  } else {
    checkAibom(state, r, run, { bytes: a.bytes, manifest: a.manifest, metadata: a.metadata });
  }
};

export const aibomEntry: EntryHandler = {
  name: 'AIBOM',
  pattern: /^runs\/([0-9a-f-]{36})\/(aibom\.json|aibom\.c2pa|aibom\.meta\.json)$/,
  start(state) {
    state.onRecordClose(closeCheck);
  },
  onEntry(state, entry) {
    const r = state.open;
    if (r?.aibom === undefined || r.record.run_id !== entry.match[1]) {
      state.fail(entry.path, 'UNEXPECTED_ENTRY', 'not next to the AIBOM attestation of its run');
      return;
    }
    const file = entry.match[2];
    if (file === 'aibom.json') r.aibom.bytes = entry.content;
    else if (file === 'aibom.c2pa') r.aibom.manifest = entry.content;
    else r.aibom.metadata = entry.content;
  },
};
