import { envelopeDigest } from '../../attest/index.ts';
import { Paths } from '../../export/layout.ts';
import { LineSplitter } from '../../export/lines.ts';
import type { DsseEnvelope } from '../../vault/index.ts';
import type { EntryHandler } from '../entry.ts';
import type { BundleState } from '../state.ts';

/**
 * Longest line of `attestations.intoto.jsonl` (16 MiB). A line is one DSSE envelope, whose payload
 * is one statement about one Run, step or AIBOM: a Run is a Kubernetes object (etcd refuses
 * requests over 1.5 MiB), so a real line is at most a few MiB. A longer one is refused as soon as
 * it grows past this, naming the entry.
 */
export const MAX_JSONL_LINE = 16 * 1024 * 1024;

/** Mismatching lines named one by one; the rest are counted in one problem at the end. */
const NAMED_MISMATCHES = 5;

/**
 * `attestations.intoto.jsonl`, after the last segment: line n is the DSSE envelope of the n-th
 * record of the archive (its digest equals the record's). Streamed: lines are checked as they
 * complete, in time linear in the entry's size and memory bounded by MAX_JSONL_LINE.
 */
class JsonlLines {
  lines = 0;
  mismatches = 0;
  readonly splitter: LineSplitter;
  private readonly state: BundleState;

  constructor(state: BundleState) {
    this.state = state;
    this.splitter = new LineSplitter(MAX_JSONL_LINE, (line) => this.check(line.toString('utf8')));
  }

  private check(line: string): void {
    const n = this.lines++;
    let digest: string | undefined;
    try {
      digest = envelopeDigest(JSON.parse(line) as DsseEnvelope);
    } catch {
      digest = undefined;
    }
    const expected = this.state.digests[n];
    if ((digest === undefined || digest !== expected) && this.mismatches++ < NAMED_MISMATCHES) {
      this.state.fail(
        Paths.intotoJsonl,
        'RECORD_MISMATCH',
        `line ${n + 1} is not the envelope of attestation #${n + 1} (${expected ?? 'none'})`,
      );
    }
  }
}

export const intotoJsonlEntry: EntryHandler = {
  name: 'in-toto JSON lines',
  pattern: /^attestations\.intoto\.jsonl$/,
  listedIn: 'index',
  streamed: true,
  onChunk(state, chunk) {
    state.slot(intotoJsonlEntry, () => new JsonlLines(state)).splitter.push(chunk);
  },
  onEntry(state, entry) {
    const j = state.slot(intotoJsonlEntry, () => new JsonlLines(state));
    if (j.splitter.unfinished > 0)
      state.fail(entry.path, 'MALFORMED', 'the last line does not end with a newline');
    if (j.lines !== state.digests.length) {
      state.fail(entry.path, 'RECORD_MISMATCH', `${j.lines} lines for ${state.digests.length} attestations`);
    }
    state.closeRecord();
  },
  end(state) {
    const j = state.slot(intotoJsonlEntry, () => new JsonlLines(state));
    if (j.mismatches > NAMED_MISMATCHES) {
      state.fail(
        Paths.intotoJsonl,
        'RECORD_MISMATCH',
        `${j.mismatches - NAMED_MISMATCHES} more lines differ`,
      );
    }
  },
};
