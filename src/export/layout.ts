/**
 * Paths and fixed documents of an export bundle (docs/export.md is the reference; the writer
 * and the verifier both take their names from here, so they cannot disagree).
 */

/** `format` of index.json; a verifier refuses other values. */
export const EXPORT_FORMAT = 'aibom-vault-export/v1';

/** Media types of the route's two forms. */
export const TAR_MEDIA_TYPE = 'application/x-tar';
export const TAR_GZIP_MEDIA_TYPE = 'application/gzip';

/** Attestations per segment: each segment is followed by its own index entry (bounded memory). */
export const SEGMENT_SIZE = 1000;

export const Paths = {
  logKeys: 'scitt/log-keys.cbor',
  /** Certificate chain of a log key (when it has one), by the hex of its COSE kid. */
  logCert: (kidHex: string) => `scitt/log-certs/${kidHex}.pem`,
  /** A signer's chain (leaf first, then intermediates), by the hex of its `cert_chain_ref`. */
  cert: (certRef: string) => `certs/${hexOf(certRef)}.pem`,
  /** A signer without a certificate: its public key, by the hex of its key id. */
  key: (keyId: string) => `keys/${hexOf(keyId)}.pem`,
  envelope: (id: string) => `attestations/${id}/envelope.json`,
  sigstore: (id: string) => `attestations/${id}/sigstore.json`,
  statement: (id: string) => `attestations/${id}/statement.cose`,
  receipt: (id: string) => `attestations/${id}/receipt.cose`,
  /** The record's c2sp.org/tlog-proof in the vault log: inclusion in a (witnessed) checkpoint. */
  tlogProof: (id: string) => `attestations/${id}/vault.tlog-proof`,
  /** The vault log's note verifier keys (c2sp.org/signed-note vkeys), one per line, newest first. */
  tlogKeys: 'tlog/vault.vkeys',
  aibom: (runId: string) => `runs/${runId}/aibom.json`,
  aibomManifest: (runId: string) => `runs/${runId}/aibom.c2pa`,
  aibomMetadata: (runId: string) => `runs/${runId}/aibom.meta.json`,
  /** A standard view of the AIBOM (`aibom.cdx-1.7.json`, `aibom.spdx-3.0.1.json`): its bytes. */
  aibomView: (runId: string, name: string) => `runs/${runId}/${name}`,
  segment: (n: number) => `index/${String(n).padStart(6, '0')}.json`,
  intotoJsonl: 'attestations.intoto.jsonl',
  index: 'index.json',
  /** Last entry: the C2PA manifest over every byte of the archive before its header. */
  manifest: 'bundle.c2pa',
} as const;

/** `sha256:<hex>` → `<hex>` (file names carry the hex only). */
export function hexOf(ref: string): string {
  return ref.startsWith('sha256:') ? ref.slice(7) : ref;
}

/** One file of the bundle as an index lists it. */
export interface IndexEntry {
  path: string;
  size: number;
  /** Lower-case hex of the content's SHA-256. */
  sha256: string;
}

/** `index/NNNNNN.json`: the entries written since the previous segment index, in archive order. */
export interface SegmentIndex {
  segment: number;
  entries: IndexEntry[];
  /** SCITT jobs this export enqueued for the segment's records (`scitt: true`). */
  scitt_enqueued: { attestation_id: string; job_id: string }[];
}

/** `index.json`. */
export interface BundleIndex {
  format: typeof EXPORT_FORMAT;
  /** Who made the bundle: the service, its version, its signer and its transparency log. */
  service: Record<string, unknown>;
  /** What was asked and what it resolved to (see docs/export.md). */
  selection: Record<string, unknown>;
  attestations: number;
  runs: number;
  receipts: number;
  /** Records carrying a tlog-proof (`vault.tlog-proof`), and the checkpoint they lead to. */
  tlog_proofs?: number;
  tlog_checkpoint?: { origin: string; tree_size: number; cosigned_by: string[] } | null;
  first_id: string;
  last_id: string;
  segments: (IndexEntry & { attestations: number })[];
  /** Entries after the last segment index (the `.intoto.jsonl`). */
  entries: IndexEntry[];
  scitt_enqueued: number;
}

/** A UUID (v4 layout) from the first 16 bytes of a digest: reproducible labels for the bundle manifest. */
export function uuidFromDigest(digest: Buffer): string {
  const b = Buffer.from(digest.subarray(0, 16));
  b[6] = (b[6]! & 0x0f) | 0x40;
  b[8] = (b[8]! & 0x3f) | 0x80;
  const h = b.toString('hex');
  return `${h.slice(0, 8)}-${h.slice(8, 12)}-${h.slice(12, 16)}-${h.slice(16, 20)}-${h.slice(20)}`;
}
