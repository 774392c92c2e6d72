import { ExportError } from './errors.ts';

/**
 * Splits a byte stream into `\n`-terminated lines in time linear in its length: each chunk is
 * searched once, from where the previous line ended, and an unfinished line is kept as the list of
 * its pieces (joined once, when its newline comes), never re-joined or re-searched per chunk. A
 * line longer than `maxLine` bytes is refused as soon as it grows past it, so memory stays below
 * `maxLine` plus one chunk whatever the input. Splitting bytes, not text, is safe for UTF-8: the
 * byte 0x0A never occurs inside a multi-byte sequence.
 */
export class LineTooLongError extends ExportError {
  /** 1-based number of the line. */
  readonly line: number;
  constructor(line: number, maxLine: number) {
    super('LINE_TOO_LONG', `line ${line} is longer than ${maxLine} bytes`);
    this.line = line;
  }
}

export class LineSplitter {
  private parts: Buffer[] = [];
  private pending = 0;
  private lines = 0;
  private readonly maxLine: number;
  private readonly onLine: (line: Buffer) => void;

  constructor(maxLine: number, onLine: (line: Buffer) => void) {
    this.maxLine = maxLine;
    this.onLine = onLine;
  }

  /** Feeds a chunk: every line it completes goes to `onLine`, in order. Throws LineTooLongError. */
  push(chunk: Buffer): void {
    let start = 0;
    for (let nl = chunk.indexOf(0x0a); nl !== -1; nl = chunk.indexOf(0x0a, start)) {
      const piece = chunk.subarray(start, nl);
      this.grow(piece.length);
      const line = this.parts.length === 0 ? piece : Buffer.concat([...this.parts, piece], this.pending);
      this.parts = [];
      this.pending = 0;
      this.lines++;
      this.onLine(line);
      start = nl + 1;
    }
    if (start < chunk.length) {
      const rest = chunk.subarray(start);
      this.grow(rest.length);
      this.parts.push(rest);
    }
  }

  /** Bytes of a line not (yet) ended by a newline. */
  get unfinished(): number {
    return this.pending;
  }

  private grow(n: number): void {
    this.pending += n;
    if (this.pending > this.maxLine) throw new LineTooLongError(this.lines + 1, this.maxLine);
  }
}
