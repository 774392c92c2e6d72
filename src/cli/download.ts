import { open, rename, rm, stat, type FileHandle } from 'node:fs/promises';
import { basename, dirname, join } from 'node:path';
import { Readable } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import type { ReadableStream as WebReadableStream } from 'node:stream/web';
import { CliError } from './command.ts';

/**
 * Downloads a bundle into `output` exactly as received (the route's bytes: what the UI downloads
 * is what the CLI writes).
 *
 * Invariants:
 * - The destination is checked, and its temporary file created, before the request is made: an
 *   export the CLI could not write is never asked for (the service would build it and write an
 *   audit row for a download nobody received). A directory, a missing or unwritable parent are a
 *   one-line error up front.
 * - Bytes go to a temporary file beside `output`, renamed at the end, so a failed or interrupted
 *   transfer never leaves a half-written bundle under the requested name; the temporary file is
 *   removed on every failure, the request's own included.
 */
export async function download(
  output: string,
  url: string,
  request: () => Promise<Response>,
): Promise<{ res: Response; bytes: number }> {
  const { tmp, handle } = await prepare(output);
  let bytes = 0;
  let res: Response | undefined;
  try {
    res = await request();
    if (res.body === null) throw new CliError('the API answered without a body');
    const body = Readable.fromWeb(res.body as WebReadableStream<Uint8Array>);
    body.on('data', (c: Buffer) => (bytes += c.length));
    await pipeline(body, handle.createWriteStream());
    await rename(tmp, output);
    return { res, bytes };
  } catch (err) {
    await handle.close().catch(() => undefined);
    await rm(tmp, { force: true });
    if (err instanceof CliError || res === undefined) throw err;
    const e = err as NodeJS.ErrnoException;
    if (typeof e.syscall === 'string') {
      // The local file system (a full disk, the directory removed meanwhile), not the transfer.
      throw new CliError(`writing ${output} failed after ${bytes} bytes, nothing written: ${e.message}`);
    }
    // The server closes an export whose reader falls below the pace it declared up front.
    const pace = res.headers.get('x-export-min-rate');
    throw new CliError(
      `download from ${url} failed after ${bytes} bytes, nothing written to ${output}: ${e.message}` +
        (pace !== null
          ? ` (the server closes an export read slower than it declared in x-export-min-rate: ${pace}, i.e. bytes/s; window and idle in seconds)`
          : ''),
    );
  }
}

/** Checks `output` and creates its temporary file (exclusively: never someone else's file). */
async function prepare(output: string): Promise<{ tmp: string; handle: FileHandle }> {
  if (output.trim() === '' || output.endsWith('/'))
    throw new CliError(`--output needs a file name, not ${JSON.stringify(output)}`, 2);
  const existing = await stat(output).catch((err: NodeJS.ErrnoException) => {
    if (err.code === 'ENOENT') return null;
    throw new CliError(`cannot write ${output}: ${err.code ?? err.message}`);
  });
  if (existing?.isDirectory()) throw new CliError(`--output ${output} is a directory; name a file in it`, 2);
  const tmp = join(dirname(output), `.${basename(output)}.${process.pid}.${Date.now()}.part`);
  try {
    return { tmp, handle: await open(tmp, 'wx') };
  } catch (err) {
    const e = err as NodeJS.ErrnoException;
    throw new CliError(`cannot write ${output}: ${e.code ?? e.message} (in ${dirname(output)})`);
  }
}
