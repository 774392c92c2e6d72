import type { EntryHandler } from '../entry.ts';
import { ARCHIVE, type BundleProblem, type BundleState } from '../state.ts';
import { TlogBundleCheck } from '../tlog.ts';
import { ownerRecord } from './sigstore.ts';

/**
 * The witnessed-log entries (docs/transparency.md "Witnessed logs"): `tlog/vault.vkeys`, the vault
 * log's note keys as the exporter names them (first in the archive), and per record
 * `attestations/<id>/vault.tlog-proof`, its c2sp.org/tlog-proof to a checkpoint of the vault log
 * with the witnesses' cosignatures. The checks themselves are TlogBundleCheck's (../tlog.ts): the
 * caller's witness policy (`options.tlog`) decides how many cosignatures a checkpoint needs, and
 * with a policy a record that closes without a proof fails (TLOG_PROOF_MISSING).
 */

/**
 * The bundle's TlogBundleCheck, made from the caller's options once; undefined when the caller's
 * keys do not parse (reported once, at the start: there is nothing to check proofs against).
 */
function tlogCheckOf(state: BundleState): TlogBundleCheck | undefined {
  return state.slot(tlogProofEntry, () => {
    try {
      return new TlogBundleCheck(state.options.tlog);
    } catch (err) {
      state.fail(ARCHIVE, 'TLOG_KEY_INVALID', (err as Error).message);
      return undefined;
    }
  });
}

function report(state: BundleState, problems: readonly BundleProblem[]): void {
  for (const p of problems) state.fail(p.entry, p.code, p.message);
}

export const tlogKeysEntry: EntryHandler = {
  name: 'vault log note keys',
  pattern: /^tlog\/vault\.vkeys$/,
  onEntry(state, entry) {
    const check = tlogCheckOf(state);
    if (check !== undefined) report(state, check.keys(entry.path, entry.content));
  },
};

export const tlogProofEntry: EntryHandler = {
  name: 'tlog-proof',
  pattern: /^attestations\/([0-9a-f-]{36})\/vault\.tlog-proof$/,
  start(state) {
    tlogCheckOf(state);
    state.onRecordClose((s, r) => {
      const check = tlogCheckOf(s);
      if (check !== undefined) report(s, check.closed(r.id, r.seen.has('vault.tlog-proof')));
    });
  },
  onEntry(state, entry) {
    const r = ownerRecord(state, entry.match[1]!, entry.path, 'vault.tlog-proof');
    const check = tlogCheckOf(state);
    if (r === undefined || check === undefined) return;
    report(state, check.proof(entry.path, r.record, entry.content));
    const { proofs, checkpoints } = check.summary();
    state.tlogProofs = proofs;
    state.tlogCheckpoints = checkpoints;
  },
};
