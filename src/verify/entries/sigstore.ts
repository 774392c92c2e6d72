import { Paths } from '../../export/layout.ts';
import { sigstoreBundleProblems } from '../../export/sigstore.ts';
import type { EntryHandler } from '../entry.ts';
import type { BundleState, OpenRecord } from '../state.ts';

/**
 * `attestations/<id>/sigstore.json`: the record's envelope as a Sigstore bundle v0.3 (what cosign
 * verifies), right after its envelope.json. It must hold the same envelope, name the same signer,
 * and carry the record's RFC 3161 time-stamp. Every record with a signer has one.
 */

/** The record the entry belongs to, or undefined after reporting that it is out of place. */
export function ownerRecord(
  state: BundleState,
  id: string,
  path: string,
  file: string,
): OpenRecord | undefined {
  const r = state.open;
  if (r === undefined || r.id !== id) {
    state.fail(path, 'UNEXPECTED_ENTRY', 'not next to its attestation record');
    return undefined;
  }
  r.seen.add(file);
  return r;
}

export const sigstoreEntry: EntryHandler = {
  name: 'Sigstore bundle',
  pattern: /^attestations\/([0-9a-f-]{36})\/sigstore\.json$/,
  start(state) {
    state.onRecordClose((s, r) => {
      if (r.material !== undefined && !r.seen.has('sigstore.json'))
        s.fail(Paths.sigstore(r.id), 'MISSING', 'the Sigstore bundle of this attestation is missing');
    });
  },
  onEntry(state, entry) {
    const r = ownerRecord(state, entry.match[1]!, entry.path, 'sigstore.json');
    if (r === undefined) return;
    if (r.envelope === undefined || r.material === undefined) {
      state.fail(entry.path, 'UNTRUSTED_KEY', 'no trusted signer to compare the Sigstore bundle with');
      return;
    }
    let bundle: unknown;
    try {
      bundle = JSON.parse(entry.content.toString('utf8')) as unknown;
    } catch {
      state.fail(entry.path, 'MALFORMED', 'not JSON');
      return;
    }
    for (const m of sigstoreBundleProblems(bundle, r.envelope, r.material, r.timestamps))
      state.fail(entry.path, 'SIGSTORE_BUNDLE_MISMATCH', m);
  },
};
