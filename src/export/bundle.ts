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
import { sigstoreBundle } from './sigstore.ts';
import { END_OF_ARCHIVE, tarHeader, tarPadding } from './tar.ts';

/**
 * The export bundle writer (layout: docs/export.md; choices: docs/adr/0009-export-bundle.md). Pure
 * apart from the sources it is given: records arrive in segments (one keyset batch each), and the
 * archive leaves as a stream of chunks, so memory holds one segment whatever the size of the
 * selection. The same inputs give the same bytes: fixed headers (tar.ts), fixed entry order,
 * canonical serialisations, and a bundle manifest signed deterministically (RFC 6979 / Ed25519)
 * with labels and time derived from the content.
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
  /** The API body of the record (GET /v1/attestations/{id}), written as envelope.json. */
  readonly view: object;
  /** Null when the vault has no material for the record's key (verify reports it). */
  readonly signer: ItemSigner | null;
  /** The record's RFC 3161 time-stamp (its Sigstore bundle carries it), when taken. */
  readonly timestamp?: Rfc3161SignedTimestamp;
  /** Published SCITT: the signed statement and its receipt. */
  readonly scitt?: { readonly statement: Buffer; readonly receipt: Buffer };
  /** For the AIBOM record: the artifact it is about, as stored. */
  readonly aibom?: {
    readonly runId: string;
    readonly bytes: Buffer;
    readonly manifest: Buffer;
    readonly metadata: object;
    readonly manifestDigest: string | null;
  };
}

export interface ExportSegment {
  readonly items: readonly ExportItem[];
  /** SCITT jobs enqueued for these items by this export. */
  readonly scittEnqueued: readonly { attestation_id: string; job_id: string }[];
}

export interface SegmentReport {
  readonly segment: number;
  readonly items: readonly ExportItem[];
  /** Digests of the C2PA manifests of the artifacts in the segment. */
  readonly manifestDigests: readonly string[];
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

export interface BundleInput {
  readonly segments: AsyncIterable<ExportSegment>;
  /** The same records' envelopes again, in the same order (the `.intoto.jsonl` pass). */
  readonly envelopes: () => AsyncIterable<DsseEnvelope>;
  /** The keys of the transparency log(s) whose receipts may appear, with a chain when they have one. */
  readonly logKeys: readonly { readonly key: LogKey; readonly chainPem?: string }[];
  readonly service: Record<string, unknown>;
  readonly selection: Record<string, unknown>;
  /** Signs the bundle manifest; must be deterministic (KeySigner.deterministic()) for reproducible bytes. */
  readonly signer: Signer;
  readonly claimGenerator: string;
  /** Called before a segment's bytes are released (the audit log is written ahead of the data). */
  readonly beforeSegment?: (report: SegmentReport) => Promise<void>;
  /** Called before the last entry (the bundle manifest) is released. */
  readonly beforeEnd?: (report: FinalReport) => Promise<void>;
  /** Bytes gathered before a chunk is yielded; default 256 KiB. */
  readonly chunkSize?: number;
}

/** A line of the `.intoto.jsonl`: the DSSE envelope exactly as stored (its digest is the record's). */
export function intotoLine(envelope: DsseEnvelope): string {
  return `${JSON.stringify({
    payload: envelope.payload,
    payloadType: envelope.payloadType,
    signatures: envelope.signatures.map((s) => ({ keyid: s.keyid, sig: s.sig })),
  })}\n`;
}

/** Compact JSON plus a newline: how every JSON entry of a bundle is written. */
export function jsonEntry(value: unknown): Buffer {
  return Buffer.from(`${JSON.stringify(value)}\n`, 'utf8');
}

export class BundleError extends Error {}

/** Collects entries into chunks and keeps the two running digests (entry, archive prefix). */
class Archive {
  private parts: Buffer[] = [];
  private pending = 0;
  readonly prefix: Hash = createHash('sha256');
  total = 0;
  entries: IndexEntry[] = [];

  add(path: string, content: Buffer): void {
    this.push(tarHeader(path, content.length));
    this.push(content);
    this.push(tarPadding(content.length));
    this.entries.push({ path, size: content.length, sha256: hash('sha256', content) });
  }

  push(bytes: Buffer): void {
    if (bytes.length === 0) return;
    this.parts.push(bytes);
    this.pending += bytes.length;
  }

  get buffered(): number {
    return this.pending;
  }

  /** The gathered bytes, hashed into the prefix. */
  drain(): Buffer | null {
    if (this.pending === 0) return null;
    const chunk = this.parts.length === 1 ? this.parts[0]! : Buffer.concat(this.parts, this.pending);
    this.parts = [];
    this.pending = 0;
    this.prefix.update(chunk);
    this.total += chunk.length;
    return chunk;
  }

  takeEntries(): IndexEntry[] {
    const out = this.entries;
    this.entries = [];
    return out;
  }
}

/** Streams the bundle. Throws BundleError if the sources disagree between passes. */
export async function* writeBundle(input: BundleInput): AsyncGenerator<Buffer, void, undefined> {
  const chunkSize = input.chunkSize ?? 256 * 1024;
  const out = new Archive();
  const flushIfFull = function* (): Generator<Buffer> {
    if (out.buffered >= chunkSize) {
      const c = out.drain();
      if (c) yield c;
    }
  };

  // Log keys first: a verifier holds them before the first receipt.
  out.add(Paths.logKeys, encodeKeySet(input.logKeys.map((k) => k.key)));
  for (const k of input.logKeys) {
    if (k.chainPem !== undefined) out.add(Paths.logCert(k.key.kid.toString('hex')), Buffer.from(k.chainPem));
  }

  const shipped = new Set<string>();
  const segments: BundleIndex['segments'] = [];
  let count = 0;
  let runs = 0;
  let receipts = 0;
  let enqueued = 0;
  let jsonlSize = 0;
  let firstId: string | undefined;
  let last: ExportItem | undefined;

  for await (const segment of input.segments) {
    if (segment.items.length === 0) continue;
    const n = segments.length + 1;
    const manifestDigests: string[] = [];
    for (const item of segment.items) {
      const s = item.signer;
      if (s !== null && !shipped.has(s.ref)) {
        shipped.add(s.ref);
        out.add(s.certificate !== undefined ? Paths.cert(s.ref) : Paths.key(s.ref), Buffer.from(s.pem));
      }
      out.add(Paths.envelope(item.id), jsonEntry(item.view));
      if (s !== null) {
        // A public-key hint (the key id), not the certificate: cosign verifies a certificate bundle
        // only with a Fulcio-style identity (a SAN and an OIDC issuer), which service signers do not
        // have; with the hint, `--key` takes the key the key-distribution endpoint serves (ADR 0009).
        const times = item.timestamp !== undefined ? [item.timestamp] : [];
        out.add(Paths.sigstore(item.id), jsonEntry(sigstoreBundle(item.envelope, { keyId: s.keyId }, times)));
      }
      if (item.scitt !== undefined) {
        out.add(Paths.statement(item.id), item.scitt.statement);
        out.add(Paths.receipt(item.id), item.scitt.receipt);
        receipts++;
      }
      if (item.aibom !== undefined) {
        const a = item.aibom;
        out.add(Paths.aibom(a.runId), a.bytes);
        out.add(Paths.aibomManifest(a.runId), a.manifest);
        out.add(Paths.aibomMetadata(a.runId), jsonEntry(a.metadata));
        if (a.manifestDigest !== null) manifestDigests.push(a.manifestDigest);
        runs++;
      }
      jsonlSize += Buffer.byteLength(intotoLine(item.envelope));
      firstId ??= item.id;
      last = item;
      count++;
      yield* flushIfFull();
    }
    enqueued += segment.scittEnqueued.length;
    const index: SegmentIndex = {
      segment: n,
      entries: out.takeEntries(),
      scitt_enqueued: [...segment.scittEnqueued],
    };
    const body = jsonEntry(index);
    out.add(Paths.segment(n), body);
    out.takeEntries();
    segments.push({
      path: Paths.segment(n),
      size: body.length,
      sha256: hash('sha256', body),
      attestations: segment.items.length,
    });
    // Write-ahead: what this segment lets out is in the audit log before it leaves.
    await input.beforeSegment?.({ segment: n, items: segment.items, manifestDigests });
    const c = out.drain();
    if (c) yield c;
  }
  if (last === undefined || firstId === undefined) throw new BundleError('the selection is empty');

  // Second pass: every envelope, one per line. Its size was summed on the first pass; records are
  // immutable and the passes share `until`, so a difference is a bug, never a partial file.
  out.push(tarHeader(Paths.intotoJsonl, jsonlSize));
  const jsonlHash = createHash('sha256');
  let written = 0;
  let lines: string[] = [];
  let linesBytes = 0;
  const flushLines = (): void => {
    const b = Buffer.from(lines.join(''), 'utf8');
    jsonlHash.update(b);
    out.push(b);
    written += b.length;
    lines = [];
    linesBytes = 0;
  };
  for await (const envelope of input.envelopes()) {
    const line = intotoLine(envelope);
    lines.push(line);
    linesBytes += line.length;
    if (linesBytes >= chunkSize) {
      flushLines();
      yield* flushIfFull();
    }
  }
  flushLines();
  if (written !== jsonlSize) {
    throw new BundleError(`the envelope pass wrote ${written} bytes, the record pass counted ${jsonlSize}`);
  }
  out.push(tarPadding(jsonlSize));
  const tail: IndexEntry[] = [{ path: Paths.intotoJsonl, size: jsonlSize, sha256: jsonlHash.digest('hex') }];

  const index: BundleIndex = {
    format: EXPORT_FORMAT,
    service: input.service,
    selection: input.selection,
    attestations: count,
    runs,
    receipts,
    first_id: firstId,
    last_id: last.id,
    segments,
    entries: tail,
    scitt_enqueued: enqueued,
  };
  const indexBody = jsonEntry(index);
  out.add(Paths.index, indexBody);
  out.takeEntries();
  {
    const c = out.drain();
    if (c) yield c;
  }

  // The bundle manifest: over every byte before its own header; labels and time from the content.
  const prefixDigest = out.prefix.copy().digest();
  const indexDigest = hash('sha256', indexBody, 'buffer');
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
  const total =
    out.total +
    512 +
    manifest.store.length +
    tarPadding(manifest.store.length).length +
    END_OF_ARCHIVE.length;
  await input.beforeEnd?.({
    attestations: count,
    indexDigest: `sha256:${indexDigest.toString('hex')}`,
    manifestDigest: manifest.digest,
    manifestLabel: manifest.manifestLabel,
    bytes: total,
  });
  out.push(tarHeader(Paths.manifest, manifest.store.length));
  out.push(manifest.store);
  out.push(tarPadding(manifest.store.length));
  out.push(END_OF_ARCHIVE);
  const c = out.drain();
  if (c) yield c;
}
