import type { SegmentIndex } from '../../export/layout.ts';
import type { EntryHandler } from '../entry.ts';
import { compareEntries } from './listing.ts';

/**
 * `index/NNNNNN.json`: after every segment of records, the entries written since the segment
 * before (each with its digest and size, nothing else), numbered from 1 in order. index.json then
 * lists the segment index itself with the segment's record count.
 */
export const segmentEntry: EntryHandler = {
  name: 'segment index',
  pattern: /^index\/(\d{6})\.json$/,
  listedIn: 'none',
  onEntry(state, entry) {
    state.closeRecord();
    const n = Number(entry.match[1]);
    const computed = state.segmentEntries;
    state.segmentEntries = [];
    let listed: SegmentIndex | undefined;
    try {
      listed = JSON.parse(entry.content.toString('utf8')) as SegmentIndex;
    } catch {
      listed = undefined;
    }
    if (!Array.isArray(listed?.entries)) {
      state.fail(entry.path, 'MALFORMED', 'not a segment index');
      listed = undefined;
    }
    if (listed !== undefined) {
      if (listed.segment !== n || n !== state.segments.length + 1)
        state.fail(entry.path, 'MALFORMED', `out of order (segment ${listed.segment})`);
      compareEntries(state, listed.entries, computed, entry.path);
    }
    state.segments.push({
      path: entry.path,
      size: entry.size,
      sha256: entry.sha256,
      attestations: state.segmentRecords,
    });
    state.segmentRecords = 0;
  },
};
