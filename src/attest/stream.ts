import { createHash, type Hash } from 'node:crypto';
import { BaseError } from '../errors.ts';

/**
 * The NDJSON record stream of `POST /v1/attestations/query` (docs/api.md, "NDJSON streams"): one
 * record per line, then exactly one trailer line
 *
 *   {"trailer":{"count":<records>,"digest":"sha256:<hex>"}}
 *
 * where `digest` is SHA-256 over the UTF-8 bytes of every record line before it, newlines included.
 * Each line is valid JSON, so a stream cut at a line boundary looks complete line by line; only the
 * trailer tells it from a complete one. The writer (the sidecar) and the readers (service-ctl) share
 * this module.
 */

export const TRAILER_KEY = 'trailer';

export interface StreamTrailer {
  readonly count: number;
  readonly digest: string;
}

export type StreamErrorCode =
  /** The stream ended without a trailer: it was cut. */
  | 'STREAM_TRUNCATED'
  /** The trailer's count or digest does not match the lines before it. */
  | 'STREAM_MISMATCH'
  /** A line is not JSON, is empty, or follows the trailer. */
  | 'STREAM_MALFORMED';

export class StreamError extends BaseError<StreamErrorCode> {}

/** The writer's side: feed it the record lines as sent, then write `trailer()` last. */
export class StreamDigest {
  readonly #hash: Hash = createHash('sha256');
  #count = 0;

  /** `text` is one or more complete record lines (each ending in `\n`); `records` how many. */
  add(text: string, records: number): void {
    this.#hash.update(text, 'utf8');
    this.#count += records;
  }

  /** The trailer line (ends in `\n`). Call once, after the last record line. */
  trailer(): string {
    const trailer: StreamTrailer = { count: this.#count, digest: `sha256:${this.#hash.digest('hex')}` };
    return `${JSON.stringify({ [TRAILER_KEY]: trailer })}\n`;
  }
}

function isTrailer(value: unknown): value is { trailer: StreamTrailer } {
  if (typeof value !== 'object' || value === null || Array.isArray(value)) return false;
  const keys = Object.keys(value);
  if (keys.length !== 1 || keys[0] !== TRAILER_KEY) return false;
  const t = (value as { trailer: unknown }).trailer as Partial<StreamTrailer> | null;
  return (
    typeof t === 'object' &&
    t !== null &&
    Number.isSafeInteger(t.count) &&
    typeof t.digest === 'string' &&
    /^sha256:[0-9a-f]{64}$/.test(t.digest)
  );
}

/**
 * The reader's side, line by line (constant memory): `line()` for every line without its newline,
 * then `end()`, which throws unless a trailer matching the lines ended the stream.
 */
export class StreamReader {
  readonly #hash: Hash = createHash('sha256');
  #count = 0;
  #trailer: StreamTrailer | undefined;

  /** The record on this line, or undefined for the trailer. Throws StreamError. */
  line(text: string): unknown {
    if (this.#trailer !== undefined) {
      throw new StreamError('STREAM_MALFORMED', `line ${this.#count + 2}: data after the trailer`);
    }
    let value: unknown;
    try {
      value = JSON.parse(text);
    } catch (cause) {
      throw new StreamError('STREAM_MALFORMED', `line ${this.#count + 1}: not JSON`, { cause });
    }
    if (isTrailer(value)) {
      this.#trailer = value.trailer;
      return undefined;
    }
    this.#hash.update(`${text}\n`, 'utf8');
    this.#count += 1;
    return value;
  }

  /** The trailer, once it matched every line before it. */
  end(): StreamTrailer {
    const t = this.#trailer;
    if (t === undefined) {
      throw new StreamError(
        'STREAM_TRUNCATED',
        `the stream ends after ${this.#count} record(s) without its trailer line: it was cut`,
      );
    }
    if (t.count !== this.#count) {
      throw new StreamError(
        'STREAM_MISMATCH',
        `the trailer counts ${t.count} records, the stream has ${this.#count}`,
      );
    }
    const digest = `sha256:${this.#hash.digest('hex')}`;
    if (t.digest !== digest) {
      throw new StreamError('STREAM_MISMATCH', 'the trailer digest does not match the record lines');
    }
    return t;
  }
}

/** A whole stream held in memory: its records, once the trailer matched. Throws StreamError. */
export function readStream(text: string): unknown[] {
  const lines = text.split('\n');
  // The trailer ends in a newline; a missing final newline is tolerated (editors strip it).
  if (lines.at(-1) === '') lines.pop();
  const reader = new StreamReader();
  const records: unknown[] = [];
  for (const l of lines) {
    if (l.trim() === '') throw new StreamError('STREAM_MALFORMED', 'empty line in the stream');
    const value = reader.line(l);
    if (value !== undefined) records.push(value);
  }
  reader.end();
  return records;
}
