/**
 * The verifier: everything `service-ctl verify` and the web UI check offline, in one room.
 *
 * - bundle.ts: an export bundle, entry by entry (verifyBundle), over a BundleState (state.ts)
 *   with one handler per entry type (entries/).
 *
 * Adding an entry type to the bundle verifier (a witness cosignature, a CycloneDX or SPDX view,
 * ...) is one file: write `entries/<type>.ts` exporting an EntryHandler (entry.ts: the path
 * pattern it owns, where the indexes list it, its checks when the entry is read, when its record
 * closes and at the end), keep what only it needs in `state.slot(handler, init)`, and add it to
 * ENTRY_HANDLERS in entries/index.ts. The reader, the state and the other handlers stay as they
 * are. Test it alone on a fresh `new BundleState(options)` (test/unit/verify/).
 */
export { verifyBundle } from './bundle.ts';
export type { Entry, EntryHandler } from './entry.ts';
export { ENTRY_HANDLERS } from './entries/index.ts';
export { MAX_JSONL_LINE } from './entries/intoto-jsonl.ts';
export {
  ARCHIVE,
  BundleState,
  type BundleProblem,
  type OpenRecord,
  type VerifyBundleOptions,
  type VerifyBundleResult,
} from './state.ts';
