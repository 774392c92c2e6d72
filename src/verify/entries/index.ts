import type { EntryHandler } from '../entry.ts';
import { aibomEntry } from './aibom.ts';
import { aibomViewEntry } from './aibom-view.ts';
import { envelopeEntry } from './envelope.ts';
import { indexEntry } from './index-json.ts';
import { intotoJsonlEntry } from './intoto-jsonl.ts';
import { bareKeyEntry, logCertEntry, logKeysEntry, signerCertEntry } from './keys.ts';
import { manifestEntry } from './manifest.ts';
import { segmentEntry } from './segment.ts';
import { sigstoreEntry } from './sigstore.ts';
import { tlogKeysEntry, tlogProofEntry } from './tlog.ts';
import { receiptEntry, statementEntry } from './transparency.ts';

/**
 * The entry types of an export bundle, one handler each (docs/export.md lists the layout). The
 * order is the order of their end-of-archive checks and of their checks when a record closes, so
 * the problems of a bundle come out in a stable order; patterns never overlap, so it does not
 * decide which handler an entry goes to. A path no handler owns is UNEXPECTED_ENTRY.
 */
export const ENTRY_HANDLERS: readonly EntryHandler[] = [
  manifestEntry,
  indexEntry,
  intotoJsonlEntry,
  segmentEntry,
  logKeysEntry,
  logCertEntry,
  signerCertEntry,
  bareKeyEntry,
  envelopeEntry,
  sigstoreEntry,
  statementEntry,
  receiptEntry,
  tlogKeysEntry,
  tlogProofEntry,
  aibomEntry,
  // After the AIBOM handler: a closing AIBOM record is verified before its views rely on it.
  aibomViewEntry,
];
