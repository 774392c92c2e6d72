import { createHash, hash, type Hash } from 'node:crypto';
import { Paths } from '../export/layout.ts';
import { LineTooLongError } from '../export/lines.ts';
import {
  readTar,
  tarHeader,
  TarEntryTooLargeError,
  TarHeaderError,
  type ParsedHeader,
  type TarReadResult,
} from '../export/tar.ts';
import type { Entry, EntryHandler } from './entry.ts';
import { ENTRY_HANDLERS } from './entries/index.ts';
import { ARCHIVE, BundleState, type VerifyBundleOptions, type VerifyBundleResult } from './state.ts';

/**
 * Offline verification of an export bundle (workflow steps b–e of the spec on every entry), reading
 * the archive once as a stream. Trust comes from outside the bundle only: the CA certificates the
 * caller gives (and, optionally, log keys and bare public keys it trusts). Certificates and keys
 * inside the bundle are used only once they chain to those anchors; the bundle can never vouch for
 * itself. Every problem names the entry it is about, so one changed byte anywhere is reported
 * against the entry that holds it (content: its index digest; header or padding: rebuilt and
 * compared; index.json: the bundle manifest names its digest; bundle.c2pa: its own signature).
 *
 * This file is the reader: it checks what every entry shares (its tar header is the one the
 * exporter writes, regular file, zero padding, nothing after the manifest), hashes the archive
 * prefix the manifest signs, records where the entry must be listed, and hands the entry to the
 * handler of its type (entries/). The handlers share nothing but the BundleState.
 */

/** The handler owning `path` and the captures of its pattern. */
function handlerOf(
  handlers: readonly EntryHandler[],
  path: string,
): { handler: EntryHandler; match: RegExpExecArray } | undefined {
  for (const handler of handlers) {
    const match = handler.pattern.exec(path);
    if (match !== null) return { handler, match };
  }
  return undefined;
}

/** A header that is not exactly what the writer makes for this path and size was changed. */
function checkHeader(state: BundleState, header: ParsedHeader, raw: Buffer): void {
  let canonical: Buffer | undefined;
  try {
    canonical = tarHeader(header.path, header.size);
  } catch {
    canonical = undefined;
  }
  if (canonical === undefined || !canonical.equals(raw)) {
    state.fail(header.path, 'TAR_HEADER_CHANGED', 'the tar header is not the one the exporter writes');
  }
}

/** One entry, after its content and padding: the shared checks, then its handler's. */
function readEntry(
  state: BundleState,
  handlers: readonly EntryHandler[],
  header: ParsedHeader,
  content: Buffer,
  padding: Buffer,
  streamedDigest: string | undefined,
): void {
  state.entries++;
  const path = header.path;
  if (state.afterManifest) state.fail(path, 'UNEXPECTED_ENTRY', 'after the bundle manifest');
  if (header.type !== '0')
    state.fail(path, 'TAR_HEADER_CHANGED', `entry type ${header.type} is not a regular file`);
  if (!padding.every((b) => b === 0))
    state.fail(path, 'TAR_PADDING_CHANGED', 'non-zero bytes in the padding after the entry');
  const sha256 = streamedDigest ?? hash('sha256', content);
  const found = handlerOf(handlers, path);
  const listedIn = found?.handler.listedIn ?? 'segment';
  const listed = { path, size: header.size, sha256 };
  if (listedIn === 'segment') state.segmentEntries.push(listed);
  else if (listedIn === 'index') state.tail.push(listed);
  if (found === undefined) {
    state.fail(path, 'UNEXPECTED_ENTRY', 'not part of the export layout');
    return;
  }
  const entry: Entry = { path, size: header.size, sha256, content, match: found.match };
  found.handler.onEntry(state, entry);
}

/** Where a read that stopped is reported: the entry it names, else the archive. */
function stopped(state: BundleState, err: unknown): void {
  const entry =
    err instanceof TarHeaderError || err instanceof TarEntryTooLargeError
      ? err.path
      : err instanceof LineTooLongError
        ? Paths.intotoJsonl
        : ARCHIVE;
  const message =
    err instanceof LineTooLongError ? `${err.message}: not one DSSE envelope` : (err as Error).message;
  state.fail(entry, 'MALFORMED_ARCHIVE', message);
}

/** Verifies a bundle read from `source` (the tar bytes, already decompressed). */
export async function verifyBundle(
  source: AsyncIterable<Uint8Array>,
  options: VerifyBundleOptions,
  handlers: readonly EntryHandler[] = ENTRY_HANDLERS,
): Promise<VerifyBundleResult> {
  const state = new BundleState(options);
  for (const h of handlers) h.start?.(state);
  const prefix = createHash('sha256');
  /** The handler and running hash of the entry being streamed. */
  let streaming: { handler: EntryHandler; hash: Hash } | undefined;
  let read: TarReadResult;
  try {
    read = await readTar(source, {
      onHeader(header, raw) {
        if (header.path === Paths.manifest) state.prefixDigest = prefix.copy().digest();
        checkHeader(state, header, raw);
      },
      onBytes(bytes) {
        if (state.prefixDigest === undefined) prefix.update(bytes);
      },
      stream(header) {
        const handler = handlerOf(handlers, header.path)?.handler;
        streaming = handler?.streamed === true ? { handler, hash: createHash('sha256') } : undefined;
        return streaming !== undefined;
      },
      onChunk(_header, chunk) {
        streaming!.hash.update(chunk);
        streaming!.handler.onChunk?.(state, chunk);
      },
      async onEntry(header, content, padding) {
        const digest = streaming?.hash.digest('hex');
        streaming = undefined;
        try {
          readEntry(state, handlers, header, content, padding, digest);
        } catch (err) {
          // Damaged content can make a parser throw (a certificate that does not decode, ...).
          state.fail(header.path, 'MALFORMED', (err as Error).message);
        }
        await state.settle();
      },
    });
  } catch (err) {
    stopped(state, err);
    return state.result(false);
  }
  if (read.trailing !== undefined) state.fail(ARCHIVE, 'MALFORMED_ARCHIVE', read.trailing);
  for (const h of handlers) h.end?.(state);
  return state.result(true);
}
