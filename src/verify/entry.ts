import type { BundleState } from './state.ts';

/**
 * One entry type of an export bundle (docs/export.md) and what verifying it means: which paths it
 * owns, where the indexes list it, what it checks when its entry is read, when the record it
 * belongs to closes, and at the end of the archive.
 */

/** An entry as read from the archive (its header and padding already checked). */
export interface Entry {
  readonly path: string;
  readonly size: number;
  /** Lower-case hex SHA-256 of its content. */
  readonly sha256: string;
  /** The content (empty for a streamed entry: its chunks went to onChunk). */
  readonly content: Buffer;
  /** The capture groups of the handler's pattern for this path. */
  readonly match: RegExpExecArray;
}

export interface EntryHandler {
  /** Short name, for tests and comments. */
  readonly name: string;
  /** The paths it owns (anchored). Patterns of the registered handlers never overlap. */
  readonly pattern: RegExp;
  /**
   * Where an index lists the entry: the segment index that follows it (default), index.json's
   * `entries` (the entries after the last segment), or nowhere (it is an index or the manifest
   * itself, checked by its own handler).
   */
  readonly listedIn?: 'segment' | 'index' | 'none';
  /** True: the content arrives in chunks (onChunk) instead of in one buffer (unbounded size). */
  readonly streamed?: boolean;
  /** Once per bundle, before any entry: register record closers, set up its own state. */
  start?(state: BundleState): void;
  onChunk?(state: BundleState, chunk: Buffer): void;
  /** The entry's own checks. A throw is reported as MALFORMED against the entry. */
  onEntry(state: BundleState, entry: Entry): void;
  /** After the last entry (what never came: a missing manifest, index, ...). */
  end?(state: BundleState): void;
}
