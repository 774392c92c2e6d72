import { createHash, hash, type Hash, type X509Certificate } from 'node:crypto';
import { buildManifest } from '../c2pa/index.ts';
import { encodeKeySet, type LogKey } from '../cose/key.ts';
import type { Signer } from '../signing/index.ts';
import type { Rfc3161SignedTimestamp } from '../timestamp/sigstore.ts';
import type { DsseEnvelope } from '../vault/index.ts';
import {
  EXPORT_FORMAT,
  Paths,
  TAR_MEDIA_TYPE,
  uuidFromDigest,
  type BundleIndex,
  type IndexEntry,
  type SegmentIndex,
} from './layout.ts';
import { ExportError } from './errors.ts';
import { dsseJson, intotoLine, viewJson } from './json.ts';
import { sigstoreBundleJson } from './sigstore.ts';
import { Spool, type SpoolOptions } from './spool.ts';
import { BLOCK, END_OF_ARCHIVE, writeTarHeader } from './tar.ts';

/**
 * The export bundle writer (layout: docs/export.md; choices: docs/adr/0009-export-bundle.md). Pure
 * apart from the sources it is given: records arrive in segments (one keyset batch each), and the
 * archive leaves as a stream of chunks, so memory holds one segment whatever the size of the
 * selection. The `.intoto.jsonl`, which follows every record but whose header needs its size, is
 * collected on the way in a spool (memory up to a bound, then a temp file: spool.ts), so the records
 * are read once. The same inputs give the same bytes: fixed headers (tar.ts), fixed entry order,
 * canonical serialisations, and a bundle manifest signed deterministically (RFC 6979 / Ed25519)
 * with labels and time derived from the content; how the bytes are chunked changes none of them.
 * Its cost per record is measured by bench/export.ts (docs/bench.md).
 */

/** The key material of a record's signer, as the bundle ships it. */
export interface ItemSigner {
  /** `cert_chain_ref`, or the key id for a bare key. */
  readonly ref: string;
  readonly keyId: string;
  /** Chain PEM (leaf first, then intermediates) or a PUBLIC KEY PEM. */
  readonly pem: string;
  /** The leaf, when `pem` is a chain. */
  readonly certificate?: X509Certificate;
}

export interface ExportItem {
  readonly id: string;
  readonly createdAt: Date;
  readonly namespace: string;
  /** The stored DSSE envelope. */
  readonly envelope: DsseEnvelope;
  /**
   * The API body of the record (GET /v1/attestations/{id}), written as envelope.json; a function
   * is called once, when that entry is written (so a segment's views are never all in memory).
   */
  readonly view: object | (() => object);
  /** Null when the vault has no material for the record's key (verify reports it). */
  readonly signer: ItemSigner | null;
  /** The record's RFC 3161 time-stamp (its Sigstore bundle carries it), when taken. */
  readonly timestamp?: Rfc3161SignedTimestamp;
  /** Published SCITT: the signed statement and its receipt. */
  readonly scitt?: { readonly statement: Buffer; readonly receipt: Buffer };
  /** Its c2sp.org/tlog-proof in the vault log (src/witness/proofs.ts), when a checkpoint covers it. */
  readonly tlogProof?: string;
  /** For the AIBOM record: the artifact it is about, as stored. */
  readonly aibom?: {
    readonly runId: string;
    /** Its object key (what the audit row names). */
    readonly objectKey: string;
    readonly bytes: Buffer;
    readonly manifest: Buffer;
    readonly metadata: object;
    readonly manifestDigest: string | null;
    /** The attestation ids its manifest links. */
    readonly attestationIds: readonly string[];
  };
  /** For the record of a standard view of an AIBOM: the view's bytes (the JCS of its predicate). */
  readonly aibomView?: { readonly runId: string; readonly name: string; readonly bytes: Buffer };
}

export interface ExportSegment {
  readonly items: readonly ExportItem[];
  /** SCITT jobs enqueued for these items by this export. */
  readonly scittEnqueued: readonly { attestation_id: string; job_id: string }[];
}

export interface SegmentReport {
  readonly segment: number;
  /** The segment's records, of every namespace in it (audit rows name each namespace's own). */
  readonly items: readonly ExportItem[];
}

export interface FinalReport {
  readonly attestations: number;
  /** `sha256:<hex>` of index.json. */
  readonly indexDigest: string;
  /** `sha256:<hex>` of the bundle's own C2PA manifest store. */
  readonly manifestDigest: string;
  readonly manifestLabel: string;
  /** Bytes of the archive, end blocks included. */
  readonly bytes: number;
}

/** Default {@link BundleInput.chunkSize}: few large socket writes, little memory per export. */
export const DEFAULT_CHUNK_SIZE = 1024 * 1024;

export interface BundleInput {
  readonly segments: AsyncIterable<ExportSegment>;
  /**
   * Where the `.intoto.jsonl` is collected until it is written (spool.ts): bytes kept in memory
   * before it spills to a temp file (default 8 MiB), and the directory the temp file's own
   * directory is made in (default `os.tmpdir()`), which needs about the size of the `.intoto.jsonl`.
   */
  readonly spool?: SpoolOptions;
  /** The keys of the transparency log(s) whose receipts may appear, with a chain when they have one. */
  readonly logKeys: readonly { readonly key: LogKey; readonly chainPem?: string }[];
  /**
   * The vault log's checkpoint the records' tlog-proofs lead to, and the note keys of that log
   * (newest first); absent when no checkpoint is signed yet.
   */
  readonly tlog?: {
    readonly vkeys: readonly string[];
    readonly checkpoint: { origin: string; tree_size: number; cosigned_by: string[] };
  };
  readonly service: Record<string, unknown>;
  readonly selection: Record<string, unknown>;
  /** Signs the bundle manifest; must be deterministic (KeySigner.deterministic()) for reproducible bytes. */
  readonly signer: Signer;
  readonly claimGenerator: string;
  /** Called before a segment's bytes are released (the audit log is written ahead of the data). */
  readonly beforeSegment?: (report: SegmentReport) => Promise<void>;
  /** Called before the last entry (the bundle manifest) is released. */
  readonly beforeEnd?: (report: FinalReport) => Promise<void>;
  /** Size of the chunks the archive is written into and released in; default 1 MiB. */
  readonly chunkSize?: number;
}

export class BundleError extends ExportError {
  constructor(message: string) {
    super('BUNDLE_INVALID', message);
  }
}

/** Content bytes plus the zeros that pad them to a whole block. */
function padded(size: number): number {
  return size + ((BLOCK - (size % BLOCK)) % BLOCK);
}

/**
 * The archive as it is written. Entries go straight into chunks of `chunkSize` bytes (header,
 * content and padding in place: no buffer per entry, no concatenation); an entry's SHA-256 is taken
 * from the chunk right after its bytes are written, and a chunk is hashed into the archive prefix
 * once, when it is closed: every byte is hashed twice (its entry's digest, the prefix the bundle
 * manifest signs), which the format requires, and copied once. Closed chunks wait in `ready`
 * until the writer releases them; contents larger than a chunk are passed on as they are.
 */
class Archive {
  private chunk: Buffer;
  private used = 0;
  private ready: Buffer[] = [];
  /** Bytes in closed chunks (released or ready). */
  private closed = 0;
  readonly prefix: Hash = createHash('sha256');
  entries: IndexEntry[] = [];
  /** The entry being streamed (the `.intoto.jsonl`): its digest so far, from `from` in the chunk. */
  private streamed: { path: string; size: number; written: number; hash: Hash; from: number } | null = null;

  private readonly chunkSize: number;

  constructor(chunkSize: number) {
    if (!Number.isSafeInteger(chunkSize) || chunkSize < BLOCK) {
      throw new RangeError(`chunkSize must be at least ${BLOCK} bytes`);
    }
    this.chunkSize = chunkSize;
    this.chunk = Buffer.allocUnsafeSlow(chunkSize);
  }

  /** Bytes written so far. */
  get total(): number {
    return this.closed + this.used;
  }

  get hasReady(): boolean {
    return this.ready.length > 0;
  }

  private room(): number {
    return this.chunk.length - this.used;
  }

  /** Closes the current chunk (it is hashed into the prefix and becomes ready) and starts another. */
  close(): void {
    if (this.used === 0) return;
    const done = this.chunk.subarray(0, this.used);
    if (this.streamed !== null) {
      this.streamed.hash.update(done.subarray(this.streamed.from));
      this.streamed.from = 0;
    }
    this.prefix.update(done);
    this.ready.push(done);
    this.closed += done.length;
    this.chunk = Buffer.allocUnsafeSlow(this.chunkSize);
    this.used = 0;
  }

  /** Bytes the archive does not copy (a content larger than a chunk), after the current chunk. */
  private pass(bytes: Buffer): void {
    this.close();
    this.prefix.update(bytes);
    this.ready.push(bytes);
    this.closed += bytes.length;
  }

  private zeros(n: number): void {
    while (n > 0) {
      if (this.room() === 0) this.close();
      const k = Math.min(n, this.room());
      this.chunk.fill(0, this.used, this.used + k);
      this.used += k;
      n -= k;
    }
  }

  private header(path: string, size: number): void {
    if (this.room() < BLOCK) this.close();
    writeTarHeader(this.chunk, this.used, path, size);
    this.used += BLOCK;
  }

  private record(path: string, size: number, sha256: string): IndexEntry {
    const entry = { path, size, sha256 };
    this.entries.push(entry);
    return entry;
  }

  addBytes(path: string, content: Buffer): IndexEntry {
    const size = content.length;
    const whole = BLOCK + padded(size);
    if (whole > this.room() && whole <= this.chunkSize) this.close();
    if (whole <= this.room()) {
      writeTarHeader(this.chunk, this.used, path, size);
      content.copy(this.chunk, this.used + BLOCK);
      this.used += BLOCK + size;
      this.zeros(padded(size) - size);
    } else {
      this.header(path, size);
      this.pass(content);
      this.zeros(padded(size) - size);
    }
    return this.record(path, size, hash('sha256', content));
  }

  /** An entry of text (JSON, PEM) in UTF-8, with a final newline when asked. */
  addText(path: string, text: string, newline = false): IndexEntry {
    const extra = newline ? 1 : 0;
    // At most 3 UTF-8 bytes per UTF-16 unit: the exact length only when that bound does not fit.
    if (2 * BLOCK + 3 * text.length + extra > this.room()) {
      const exact = BLOCK + padded(Buffer.byteLength(text, 'utf8') + extra);
      if (exact > this.chunkSize) {
        return this.addBytes(path, Buffer.from(newline ? `${text}\n` : text, 'utf8'));
      }
      if (exact > this.room()) this.close();
    }
    const start = this.used + BLOCK;
    let size = this.chunk.write(text, start, 'utf8');
    if (newline) this.chunk[start + size++] = 0x0a;
    writeTarHeader(this.chunk, this.used, path, size);
    const entry = this.record(path, size, hash('sha256', this.chunk.subarray(start, start + size)));
    this.used = start + size;
    this.zeros(padded(size) - size);
    return entry;
  }

  /** Starts an entry of `size` bytes whose content arrives piece by piece ({@link streamBytes}). */
  beginStream(path: string, size: number): void {
    this.header(path, size);
    this.streamed = { path, size, written: 0, hash: createHash('sha256'), from: this.used };
  }

  /**
   * The next piece of the streamed entry, copied (the caller may reuse `bytes`). The bytes are
   * split wherever a chunk ends; the entry's digest follows them across chunks (`close`).
   */
  streamBytes(bytes: Buffer): void {
    const s = this.streamed!;
    for (let at = 0; at < bytes.length;) {
      if (this.room() === 0) this.close();
      const k = Math.min(this.room(), bytes.length - at);
      bytes.copy(this.chunk, this.used, at, at + k);
      this.used += k;
      at += k;
    }
    s.written += bytes.length;
  }

  /** Ends the streamed entry; throws BundleError when it is not the size its header announced. */
  endStream(): IndexEntry {
    const s = this.streamed!;
    this.streamed = null;
    s.hash.update(this.chunk.subarray(s.from, this.used));
    if (s.written !== s.size) {
      throw new BundleError(`${s.path}: ${s.written} bytes written, ${s.size} announced`);
    }
    this.zeros(padded(s.size) - s.size);
    return this.record(s.path, s.size, s.hash.digest('hex'));
  }

  addEnd(): void {
    this.zeros(END_OF_ARCHIVE.length);
  }

  /** The closed chunks, in order, to be released. */
  takeReady(): Buffer[] {
    const out = this.ready;
    this.ready = [];
    return out;
  }

  takeEntries(): IndexEntry[] {
    const out = this.entries;
    this.entries = [];
    return out;
  }
}

/**
 * Streams the bundle. The spool's temp file, if it came to one, is removed however the stream ends
 * (last byte, failure, or the consumer stopping early).
 */
export async function* writeBundle(input: BundleInput): AsyncGenerator<Buffer, void, undefined> {
  const spool = new Spool(input.spool);
  try {
    yield* bundleBytes(input, spool);
  } finally {
    await spool.dispose();
  }
}

/**
 * One record's entries, in bundle order: its signer's PEM the first time that signer is met, the
 * API view of its envelope, its Sigstore bundle, its SCITT statement and receipt, its tlog proof,
 * its run's AIBOM and a view of it. Returns the envelope's JSON texts for the `.intoto.jsonl` line.
 */
function addItem(
  out: Archive,
  item: ExportItem,
  shipped: Set<string>,
  counts: { receipts: number; tlogProofs: number; runs: number },
): ReturnType<typeof dsseJson> {
  const s = item.signer;
  if (s !== null && !shipped.has(s.ref)) {
    shipped.add(s.ref);
    out.addText(s.certificate !== undefined ? Paths.cert(s.ref) : Paths.key(s.ref), s.pem);
  }
  // The envelope's JSON texts, shared by the three entries that carry it (json.ts).
  const dsse = dsseJson(item.envelope);
  const view: object = typeof item.view === 'function' ? (item.view as () => object)() : item.view;
  out.addText(Paths.envelope(item.id), viewJson(view, item.envelope, dsse), true);
  if (s !== null) {
    // A public-key hint (the key id), not the certificate: cosign verifies a certificate bundle
    // only with a Fulcio-style identity (a SAN and an OIDC issuer), which service signers do not
    // have; with the hint, `--key` takes the key the key-distribution endpoint serves (ADR 0009).
    const times = item.timestamp !== undefined ? [item.timestamp] : [];
    out.addText(
      Paths.sigstore(item.id),
      sigstoreBundleJson(item.envelope, { keyId: s.keyId }, times, dsse),
      true,
    );
  }
  if (item.scitt !== undefined) {
    out.addBytes(Paths.statement(item.id), item.scitt.statement);
    out.addBytes(Paths.receipt(item.id), item.scitt.receipt);
    counts.receipts++;
  }
  if (item.tlogProof !== undefined) {
    out.addText(Paths.tlogProof(item.id), item.tlogProof);
    counts.tlogProofs++;
  }
  if (item.aibom !== undefined) {
    const a = item.aibom;
    out.addBytes(Paths.aibom(a.runId), a.bytes);
    out.addBytes(Paths.aibomManifest(a.runId), a.manifest);
    out.addText(Paths.aibomMetadata(a.runId), JSON.stringify(a.metadata), true);
    counts.runs++;
  }
  if (item.aibomView !== undefined) {
    out.addBytes(Paths.aibomView(item.aibomView.runId, item.aibomView.name), item.aibomView.bytes);
  }
  return dsse;
}

async function* bundleBytes(input: BundleInput, spool: Spool): AsyncGenerator<Buffer, void, undefined> {
  const out = new Archive(input.chunkSize ?? DEFAULT_CHUNK_SIZE);
  // Write-ahead: the audit rows of a segment are being written while its bytes are prepared, and
  // no byte of it is released before they are (`release` waits for them).
  let audited: Promise<void> | undefined;
  const release = async function* (): AsyncGenerator<Buffer> {
    if (audited !== undefined) {
      await audited;
      audited = undefined;
    }
    for (const c of out.takeReady()) yield c;
  };

  // Log keys first: a verifier holds them before the first receipt.
  out.addBytes(Paths.logKeys, encodeKeySet(input.logKeys.map((k) => k.key)));
  for (const k of input.logKeys) {
    if (k.chainPem !== undefined) out.addText(Paths.logCert(k.key.kid.toString('hex')), k.chainPem);
  }
  if (input.tlog !== undefined && input.tlog.vkeys.length > 0) {
    out.addText(Paths.tlogKeys, input.tlog.vkeys.join('\n'), true);
  }

  const shipped = new Set<string>();
  const segments: BundleIndex['segments'] = [];
  const counts = { receipts: 0, tlogProofs: 0, runs: 0 };
  let count = 0;
  let enqueued = 0;
  let firstId: string | undefined;
  let last: ExportItem | undefined;

  for await (const segment of input.segments) {
    if (segment.items.length === 0) continue;
    const n = segments.length + 1;
    if (audited !== undefined) await audited; // one segment's rows after the other's
    if (input.beforeSegment !== undefined) {
      audited = input.beforeSegment({ segment: n, items: segment.items });
      // Awaited before the segment's first byte leaves; a failure then ends the stream.
      audited.catch(() => undefined);
    }
    for (const item of segment.items) {
      const dsse = addItem(out, item, shipped, counts);
      spool.write(intotoLine(item.envelope, dsse));
      if (spool.overLimit) await spool.spill();
      firstId ??= item.id;
      last = item;
      count++;
      if (out.hasReady) yield* release();
    }
    enqueued += segment.scittEnqueued.length;
    const index: SegmentIndex = {
      segment: n,
      entries: out.takeEntries(),
      scitt_enqueued: [...segment.scittEnqueued],
    };
    const entry = out.addText(Paths.segment(n), JSON.stringify(index), true);
    out.takeEntries();
    segments.push({ ...entry, attestations: segment.items.length });
  }
  if (last === undefined || firstId === undefined) throw new BundleError('the selection is empty');

  // Every envelope, one per line, as the records went by.
  out.beginStream(Paths.intotoJsonl, spool.size);
  for await (const piece of spool.read()) {
    out.streamBytes(piece);
    if (out.hasReady) yield* release();
  }
  const tail: IndexEntry[] = [out.endStream()];
  out.takeEntries();

  const index: BundleIndex = {
    format: EXPORT_FORMAT,
    service: input.service,
    selection: input.selection,
    attestations: count,
    runs: counts.runs,
    receipts: counts.receipts,
    ...(input.tlog !== undefined
      ? { tlog_proofs: counts.tlogProofs, tlog_checkpoint: input.tlog.checkpoint }
      : {}),
    first_id: firstId,
    last_id: last.id,
    segments,
    entries: tail,
    scitt_enqueued: enqueued,
  };
  const indexEntry = out.addText(Paths.index, JSON.stringify(index), true);
  out.takeEntries();
  out.close();
  yield* release();

  // The bundle manifest: over every byte before its own header; labels and time from the content.
  const prefixDigest = out.prefix.copy().digest();
  const indexDigest = Buffer.from(indexEntry.sha256, 'hex');
  const manifest = buildManifest({
    asset: Buffer.alloc(0),
    assetSha256: prefixDigest,
    mimeType: TAR_MEDIA_TYPE,
    title: `aibom-vault-export-${indexDigest.toString('hex').slice(0, 16)}.tar`,
    signer: input.signer,
    attestationIds: [],
    runId: `urn:aibom-vault:export:sha256:${indexDigest.toString('hex')}`,
    claimGenerator: input.claimGenerator,
    instanceId: `xmp:iid:${uuidFromDigest(prefixDigest)}`,
    manifestLabel: `urn:uuid:${uuidFromDigest(indexDigest)}`,
    time: last.createdAt,
  });
  const total = out.total + BLOCK + padded(manifest.store.length) + END_OF_ARCHIVE.length;
  await input.beforeEnd?.({
    attestations: count,
    indexDigest: `sha256:${indexDigest.toString('hex')}`,
    manifestDigest: manifest.digest,
    manifestLabel: manifest.manifestLabel,
    bytes: total,
  });
  out.addBytes(Paths.manifest, manifest.store);
  out.addEnd();
  out.close();
  yield* release();
}
