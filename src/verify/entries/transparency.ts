import { verifyReceipt } from '../../transparency/receipt.ts';
import { verifySignedStatement } from '../../transparency/statement.ts';
import type { EntryHandler } from '../entry.ts';
import type { BundleState, OpenRecord } from '../state.ts';
import { remoteClaimProblem } from '../receipt.ts';
import { ownerRecord } from './sigstore.ts';

/**
 * `attestations/<id>/statement.cose` and `receipt.cose`, for a record published in a SCITT log
 * (workflow step e): the signed statement is the record's, by a signer chaining to the anchors,
 * about this record and signing its digest; the receipt is the record's, and proves the
 * statement's inclusion under a trusted log key, and a record that claims a remote publication
 * was not in fact appended to the exporting deployment's own log (RECEIPT_NOT_REMOTE,
 * src/verify/receipt.ts). A published record has both files.
 */

/** The record's transparency entry, or undefined after reporting that it has none. */
function publishedRecord(
  state: BundleState,
  id: string,
  path: string,
  file: string,
): (OpenRecord & { published: NonNullable<OpenRecord['published']> }) | undefined {
  const r = ownerRecord(state, id, path, file);
  if (r === undefined) return undefined;
  if (r.published === undefined) {
    state.fail(path, 'UNEXPECTED_ENTRY', 'the record has no published receipt');
    return undefined;
  }
  return r as OpenRecord & { published: NonNullable<OpenRecord['published']> };
}

const closeCheck = (state: BundleState, r: OpenRecord): void => {
  if (r.published === undefined) return;
  for (const f of ['statement.cose', 'receipt.cose'])
    if (!r.seen.has(f))
      state.fail(`attestations/${r.id}/${f}`, 'MISSING', 'the record is published but this file is missing');
};

export const statementEntry: EntryHandler = {
  name: 'signed statement',
  pattern: /^attestations\/([0-9a-f-]{36})\/statement\.cose$/,
  start(state) {
    state.onRecordClose(closeCheck);
  },
  onEntry(state, entry) {
    const id = entry.match[1]!;
    const r = publishedRecord(state, id, entry.path, 'statement.cose');
    if (r === undefined) return;
    r.statementBytes = entry.content;
    if (!entry.content.equals(r.published.statement)) {
      state.fail(
        entry.path,
        'RECORD_MISMATCH',
        "not the signed statement of the record's transparency entry",
      );
    }
    try {
      const s = verifySignedStatement(entry.content, { trustAnchors: state.anchors, at: state.at });
      if (s.subject !== id)
        state.fail(entry.path, 'STATEMENT_MISMATCH', `the statement is about ${s.subject}, not ${id}`);
      if (`sha256:${s.payload.toString('hex')}` !== r.record.digest) {
        state.fail(entry.path, 'STATEMENT_MISMATCH', "the statement's payload is not the envelope digest");
      }
    } catch (err) {
      state.fail(entry.path, (err as { code?: string }).code ?? 'STATEMENT_INVALID', (err as Error).message);
    }
  },
};

export const receiptEntry: EntryHandler = {
  name: 'receipt',
  pattern: /^attestations\/([0-9a-f-]{36})\/receipt\.cose$/,
  onEntry(state, entry) {
    const r = publishedRecord(state, entry.match[1]!, entry.path, 'receipt.cose');
    if (r === undefined) return;
    state.receipts++;
    if (!entry.content.equals(r.published.receipt)) {
      state.fail(entry.path, 'RECORD_MISMATCH', "not the receipt of the record's transparency entry");
    }
    const statement = r.statementBytes ?? r.published.statement;
    if (state.logKeys.length === 0) {
      state.fail(
        entry.path,
        'UNKNOWN_LOG_KEY',
        'no log key chains to the trust anchor and none was given (--log-keys)',
      );
    } else {
      const v = verifyReceipt({ receipt: entry.content, statement, logKey: state.logKeys });
      if (!v.ok) state.fail(entry.path, v.code, v.message);
    }
    // The bundle's own log keys are the exporting deployment's log: a receipt under one is a dry run.
    const local = [...state.bundleLogKeys, ...(state.options.localLogKeys ?? [])];
    const claim = remoteClaimProblem(r.record.transparency, statement, entry.content, local);
    if (claim !== undefined) state.fail(entry.path, claim.code, claim.message);
  },
};
