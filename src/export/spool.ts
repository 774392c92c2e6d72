import { mkdtemp, open, rm, rmdir, unlink, type FileHandle } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { InvariantError } from '../errors.ts';
import { ExportError } from './errors.ts';

/** Default {@link SpoolOptions.memoryLimit}: what an export keeps in memory before it spills. */
export const DEFAULT_SPOOL_MEMORY = 8 * 1024 * 1024;
/** Default {@link SpoolOptions.blockSize}: unit of the in-memory buffers and of file reads/writes. */
export const DEFAULT_SPOOL_BLOCK = 1024 * 1024;

export interface SpoolOptions {
  /** Bytes kept in memory; beyond that, full blocks go to a temp file. Default 8 MiB. */
  readonly memoryLimit?: number;
  /** Size of the in-memory blocks and of the file writes and reads. Default 1 MiB. */
  readonly blockSize?: number;
  /** Parent of the temp directory (default `os.tmpdir()`). */
  readonly dir?: string;
}

/**
 * Bytes written once, in order, then read back once, in order: the export's `.intoto.jsonl`, built
 * during the records pass and written after it (its tar header needs its size first). Up to
 * `memoryLimit` bytes stay in memory; past that, full blocks are written to a temp file, created
 * in a directory of its own (`fs.mkdtemp` under `dir`, mode 0700; the file mode 0600) and unlinked,
 * with its directory, as soon as it is open: only the open handle reaches it, so however the process
 * ends (SIGKILL, OOM kill included) the kernel frees its space and nothing is left under `dir`.
 * {@link dispose} closes the handle (and drops the memory), and must be called however the use
 * ends (the writer calls it in a `finally`).
 *
 * Writing is synchronous (into the current block); the file is written only by {@link spill},
 * which the caller awaits when {@link overLimit} says so, one write at a time.
 */
export class Spool {
  private readonly memoryLimit: number;
  private readonly blockSize: number;
  private readonly dir: string;
  /** Full blocks in memory, not yet on file, in order. */
  private full: Buffer[] = [];
  private fullBytes = 0;
  private block: Buffer;
  private used = 0;
  private file: { readonly path: string; readonly handle: FileHandle } | null = null;
  private fileBytes = 0;
  private total = 0;
  private state: 'writing' | 'read' | 'disposed' = 'writing';

  constructor(options: SpoolOptions = {}) {
    this.memoryLimit = options.memoryLimit ?? DEFAULT_SPOOL_MEMORY;
    this.blockSize = options.blockSize ?? DEFAULT_SPOOL_BLOCK;
    if (!Number.isSafeInteger(this.blockSize) || this.blockSize < 1) {
      throw new RangeError('blockSize must be a positive integer');
    }
    if (!Number.isSafeInteger(this.memoryLimit) || this.memoryLimit < 0) {
      throw new RangeError('memoryLimit must be a non-negative integer');
    }
    this.dir = options.dir ?? tmpdir();
    this.block = Buffer.allocUnsafe(this.blockSize);
  }

  /** Bytes written so far. */
  get size(): number {
    return this.total;
  }

  /** Where the temp file was created, once the spool has spilled (for logs: it is unlinked at once). */
  get path(): string | undefined {
    return this.file?.path;
  }

  /** More bytes held in memory than allowed: {@link spill} before writing on. */
  get overLimit(): boolean {
    return this.fullBytes + this.used > this.memoryLimit && this.full.length > 0;
  }

  /** Appends `text` in UTF-8. */
  write(text: string): void {
    if (this.state !== 'writing') throw new InvariantError(`spool: write after ${this.state}`);
    // At most 3 UTF-8 bytes per UTF-16 unit: the exact length only when that bound does not fit.
    if (3 * text.length <= this.blockSize - this.used) {
      const n = this.block.write(text, this.used, 'utf8');
      this.used += n;
      this.total += n;
      return;
    }
    this.writeBytes(Buffer.from(text, 'utf8'));
  }

  /** Appends `bytes` (copied). */
  writeBytes(bytes: Buffer): void {
    if (this.state !== 'writing') throw new InvariantError(`spool: write after ${this.state}`);
    for (let at = 0; at < bytes.length;) {
      if (this.used === this.block.length) this.nextBlock();
      const k = Math.min(this.block.length - this.used, bytes.length - at);
      bytes.copy(this.block, this.used, at, at + k);
      this.used += k;
      at += k;
    }
    this.total += bytes.length;
  }

  private nextBlock(): void {
    this.full.push(this.block);
    this.fullBytes += this.block.length;
    this.block = Buffer.allocUnsafe(this.blockSize);
    this.used = 0;
  }

  /** Writes the full blocks held in memory to the temp file (created on the first call). */
  async spill(): Promise<void> {
    if (this.state !== 'writing') throw new InvariantError(`spool: spill after ${this.state}`);
    if (this.full.length === 0) return;
    const file = this.file ?? (await this.createFile());
    const blocks = this.full;
    this.full = [];
    this.fullBytes = 0;
    for (const b of blocks) {
      await writeAll(file.handle, b, this.fileBytes);
      this.fileBytes += b.length;
    }
  }

  private async createFile(): Promise<NonNullable<Spool['file']>> {
    const dir = await mkdtemp(join(this.dir, 'aibom-export-'));
    const path = join(dir, 'spool');
    let handle: FileHandle | undefined;
    try {
      handle = await open(path, 'wx+', 0o600);
      // Unlinked while open: the name is gone at once, the bytes live as long as the handle.
      await unlink(path);
      await rmdir(dir);
    } catch (err) {
      await handle?.close().catch(() => undefined);
      await rm(dir, { recursive: true, force: true });
      throw err;
    }
    const file = { path, handle };
    this.file = file;
    if (this.state === 'disposed') {
      // Disposed while the file was being created: close it too.
      await this.removeFile();
      throw new InvariantError('spool: disposed');
    }
    return file;
  }

  /**
   * Every byte written, in order, in pieces of at most `blockSize` bytes: first those on file, then
   * those in memory. Once only; nothing may be written after. A piece may be reused for the next one:
   * copy it before asking for the next.
   */
  async *read(): AsyncGenerator<Buffer, void, undefined> {
    if (this.state !== 'writing') throw new InvariantError(`spool: read after ${this.state}`);
    this.state = 'read';
    if (this.file !== null && this.fileBytes > 0) {
      const { handle } = this.file;
      const piece = Buffer.allocUnsafe(Math.min(this.blockSize, this.fileBytes));
      for (let at = 0; at < this.fileBytes;) {
        const want = Math.min(piece.length, this.fileBytes - at);
        const { bytesRead } = await handle.read(piece, 0, want, at);
        if (bytesRead === 0)
          throw new ExportError(
            'SPOOL_FAILED',
            `spool: ${this.file.path} ends at ${at} of ${this.fileBytes} bytes`,
          );
        at += bytesRead;
        yield piece.subarray(0, bytesRead);
      }
    }
    for (const b of this.full) yield b;
    if (this.used > 0) yield this.block.subarray(0, this.used);
  }

  /** Drops the bytes and closes the temp file (which has no name left: closing frees it); idempotent. */
  async dispose(): Promise<void> {
    this.state = 'disposed';
    this.full = [];
    this.fullBytes = 0;
    this.block = Buffer.alloc(0);
    this.used = 0;
    await this.removeFile();
  }

  private async removeFile(): Promise<void> {
    const file = this.file;
    if (file === null) return;
    this.file = null;
    await file.handle.close();
  }

  async [Symbol.asyncDispose](): Promise<void> {
    await this.dispose();
  }
}

/** `handle.write` until every byte of `bytes` is at `position` (a write may be short). */
async function writeAll(handle: FileHandle, bytes: Buffer, position: number): Promise<void> {
  for (let at = 0; at < bytes.length;) {
    const { bytesWritten } = await handle.write(bytes, at, bytes.length - at, position + at);
    if (bytesWritten === 0)
      throw new ExportError('SPOOL_FAILED', 'spool: the temp file accepts no more bytes');
    at += bytesWritten;
  }
}
