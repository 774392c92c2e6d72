import { hash } from 'node:crypto';
import { EXPORT_FORMAT, Paths, type BundleIndex } from '../../export/layout.ts';
import type { EntryHandler } from '../entry.ts';
import type { BundleState } from '../state.ts';
import { compareEntries } from './listing.ts';

/**
 * `index.json`, after the `.intoto.jsonl`: the format, every segment index with its digest and
 * record count, the entries after the last segment, and the number of records. Nothing may come
 * between the last segment index and the tail but what index.json lists.
 */
function checkSegments(state: BundleState, index: BundleIndex): void {
  const listed = Array.isArray(index.segments) ? index.segments : [];
  const byPath = new Map(listed.map((s) => [s.path, s]));
  for (const s of state.segments) {
    const l = byPath.get(s.path);
    byPath.delete(s.path);
    if (l === undefined) state.fail(s.path, 'NOT_IN_INDEX', 'not listed in index.json');
    else if (l.sha256 !== s.sha256 || l.size !== s.size) {
      state.fail(s.path, 'DIGEST_MISMATCH', 'content does not match its SHA-256 in index.json');
    } else if (l.attestations !== s.attestations) {
      state.fail(
        s.path,
        'RECORD_MISMATCH',
        `index.json says ${l.attestations} attestations, the segment has ${s.attestations}`,
      );
    }
  }
  for (const path of byPath.keys())
    state.fail(path, 'MISSING', 'listed in index.json but not in the archive');
}

export const indexEntry: EntryHandler = {
  name: 'bundle index',
  pattern: /^index\.json$/,
  listedIn: 'none',
  onEntry(state, entry) {
    state.closeRecord();
    state.indexSha = hash('sha256', entry.content);
    let index: BundleIndex;
    try {
      index = JSON.parse(entry.content.toString('utf8')) as BundleIndex;
    } catch {
      state.fail(Paths.index, 'MALFORMED', 'not JSON');
      return;
    }
    state.index = index;
    if (index.format !== EXPORT_FORMAT)
      state.fail(Paths.index, 'MALFORMED', 'format is not ' + String(EXPORT_FORMAT));
    for (const e of state.segmentEntries) state.fail(e.path, 'NOT_IN_INDEX', 'after the last segment index');
    checkSegments(state, index);
    compareEntries(state, Array.isArray(index.entries) ? index.entries : [], state.tail, Paths.index);
    if (index.attestations !== state.attestations) {
      state.fail(
        Paths.index,
        'RECORD_MISMATCH',
        `says ${index.attestations} attestations, the archive holds ${state.attestations}`,
      );
    }
  },
  end(state) {
    if (state.index === undefined) state.fail(Paths.index, 'MISSING', 'the bundle has no index');
  },
};
