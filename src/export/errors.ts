import { BaseError } from '../errors.ts';

/**
 * Typed failures of the export room (BaseError, src/errors.ts): the tar writer and reader, the
 * line splitter of the `.intoto.jsonl`, the bundle writer. Callers branch on `code` (or on the
 * subclass, which fixes it); the verifier turns the reader's into problems naming the entry.
 */
export type ExportErrorCode =
  /** A path the writer refuses (not relative printable ASCII, `..`, too long for ustar). */
  | 'TAR_PATH_INVALID'
  /** A header block that does not parse. */
  | 'TAR_HEADER_INVALID'
  /** An entry whose header claims more than the reader collects. */
  | 'TAR_ENTRY_TOO_LARGE'
  /** An `.intoto.jsonl` line past its cap. */
  | 'LINE_TOO_LONG'
  /** The writer's own invariants (an entry not the size announced, an empty selection). */
  | 'BUNDLE_INVALID'
  /** Retention: a partition holds records no signed checkpoint covers yet (archive.ts). */
  | 'ARCHIVE_NOT_CHECKPOINTED'
  /** Retention: the month's SCITT or time-stamp jobs are still queued (their work would be lost). */
  | 'ARCHIVE_JOBS_QUEUED'
  /** The temp file an export's `.intoto.jsonl` spilled to was cut short or filled the disk. */
  | 'SPOOL_FAILED';

export class ExportError extends BaseError<ExportErrorCode> {}
