import type { IndexEntry } from '../../export/layout.ts';
import type { BundleState } from '../state.ts';

/**
 * Every entry written must be listed with its digest and size, and nothing else: `listed` is what
 * an index says, `computed` what the archive held.
 */
export function compareEntries(
  state: BundleState,
  listed: readonly IndexEntry[],
  computed: readonly IndexEntry[],
  where: string,
): void {
  const byPath = new Map(listed.map((e) => [e.path, e]));
  for (const e of computed) {
    const l = byPath.get(e.path);
    byPath.delete(e.path);
    if (l === undefined) state.fail(e.path, 'NOT_IN_INDEX', `not listed in ${where}`);
    else if (l.sha256 !== e.sha256 || l.size !== e.size) {
      state.fail(
        e.path,
        'DIGEST_MISMATCH',
        `content does not match its SHA-256 in ${where} (is ${e.sha256})`,
      );
    }
  }
  for (const path of byPath.keys()) state.fail(path, 'MISSING', `listed in ${where} but not in the archive`);
}
