import type { KeyObject, X509Certificate } from 'node:crypto';
import type { Statement, Trust } from '../attest/index.ts';
import type { LogKey } from '../cose/key.ts';
import type { BundleIndex, IndexEntry } from '../export/layout.ts';
import type { SignerMaterial } from '../export/sigstore.ts';
import { hexOf } from '../export/layout.ts';
import { keyIdOf, type ScopedCertificate } from '../signing/index.ts';
import type { DsseEnvelope } from '../vault/index.ts';
import type { TlogVerifyOptions } from './tlog.ts';

/**
 * The state of one bundle verification: what the entries read so far established (trusted signer
 * chains and log keys, the record being read, what the indexes must list), the problems found and
 * the counts reported. Entry handlers (entries/) read and change it; nothing else is shared
 * between them. One object per call of verifyBundle, so handlers can be tested on a fresh one.
 */

export interface BundleProblem {
  /** Path of the entry the problem is about (`(archive)` for the archive structure). */
  readonly entry: string;
  readonly code: string;
  readonly message: string;
}

export interface VerifyBundleOptions {
  /** CA certificates signer chains must lead to (the service's ca.crt, from the trust bundle). */
  readonly trustAnchors: readonly X509Certificate[];
  /** Log keys trusted from outside (e.g. the trust bundle); log keys with a chain to an anchor are trusted anyway. */
  readonly logKeys?: readonly LogKey[];
  /**
   * Log keys of the deployment's own (local, dry-run) log, from outside (the trust bundle's): a
   * record that claims a remote SCITT publication with a receipt under one of these (or under a
   * key of the bundle's own `scitt/log-keys.cbor`, which names the exporter's local log) fails.
   */
  readonly localLogKeys?: readonly LogKey[];
  /** Bare public keys trusted from outside (customer keys without certificates). */
  readonly publicKeys?: readonly KeyObject[];
  /** Time certificates are checked at; default now. */
  readonly at?: Date;
  /**
   * Roots of trusted time-stamping authorities: records, AIBOM manifests and signatures
   * time-stamped by one are judged at the time-stamp's time (they verify after the signer
   * certificate expired).
   */
  readonly tsaTrustAnchors?: readonly X509Certificate[];
  /**
   * Every signer the service used, with its first use and scope (the trust bundle of `service-ctl
   * keys fetch`): a record signed with a key that had been rotated away is KEY_ROTATED, one signed
   * by a tenant's customer key for another namespace than that key's is UNTRUSTED_KEY.
   */
  readonly signerHistory?: readonly ScopedCertificate[];
  /**
   * The records' tlog-proofs (entries/tlog.ts, tlog.ts): the caller's witness policy and vault log
   * note keys. With a policy, every record needs a proof whose checkpoint the quorum cosigned.
   */
  readonly tlog?: TlogVerifyOptions;
}

export interface VerifyBundleResult {
  readonly ok: boolean;
  readonly problems: BundleProblem[];
  readonly attestations: number;
  /** Records whose certificates were judged at a trusted RFC 3161 time-stamp's time. */
  readonly timestamped: number;
  readonly receipts: number;
  readonly runs: number;
  readonly entries: number;
  /**
   * One line per verified capability chain: who approved which step under which scope. Only for a
   * bundle that verified: a chain read from an archive that failed vouches for nothing (its record
   * may have been swapped in from another archive, or its neighbours changed), so it is counted
   * in `withheldChains` instead (docs/export.md).
   */
  readonly chains: readonly string[];
  /** Chains whose own checks passed in a bundle that did not verify: not listed in `chains`. */
  readonly withheldChains: number;
  /** Records whose tlog-proofs verified, and the checkpoints they lead to (entries/tlog.ts). */
  readonly tlog: { readonly proofs: number; readonly checkpoints: readonly string[] };
  readonly index?: BundleIndex;
}

/** The attestation record being read: its envelope.json opened it, the next record closes it. */
export interface OpenRecord {
  readonly id: string;
  readonly path: string;
  readonly record: Record<string, unknown>;
  readonly envelope: DsseEnvelope | undefined;
  readonly material: SignerMaterial | undefined;
  /** The record's time-stamp, as its Sigstore bundle must carry it. */
  readonly timestamps: { signedTimestamp: string }[];
  readonly statement: Statement | undefined;
  /** The trust its envelope verified under (undefined: it did not). */
  readonly trust: Trust | undefined;
  /** Its `transparency` entry when published (statement and receipt as the record carries them). */
  readonly published: { statement: Buffer; receipt: Buffer } | undefined;
  /** File names of its directory read so far (`envelope.json`, `sigstore.json`, ...). */
  readonly seen: Set<string>;
  /** Its AIBOM, blob, manifest and metadata, for an `aibom` record (filled by the run entries). */
  readonly aibom: { bytes?: Buffer; manifest?: Buffer; metadata?: Buffer } | undefined;
  /** statement.cose as read (the receipt is checked against it). */
  statementBytes?: Buffer;
}

/** An entry of the current segment, or of the tail after the last segment, as its index lists it. */
export type ListedEntry = IndexEntry;

export const ARCHIVE = '(archive)';

/** What a record closing means to a handler (a Sigstore bundle or receipt that never came, ...). */
export type RecordCloser = (state: BundleState, record: OpenRecord) => void;

export class BundleState {
  readonly options: VerifyBundleOptions;
  readonly at: Date;
  readonly anchors: readonly X509Certificate[];
  readonly problems: BundleProblem[] = [];

  // Counts reported in the result.
  attestations = 0;
  timestamped = 0;
  receipts = 0;
  runs = 0;
  entries = 0;
  /** Records whose tlog-proof verified, and the checkpoints they lead to (entries/tlog.ts). */
  tlogProofs = 0;
  tlogCheckpoints: readonly string[] = [];
  /** Lines of the capability chains that verified on their own (listed only if the bundle does). */
  readonly chainLines: string[] = [];

  // Keys: signer chains by cert_chain_ref hex (only those leading to the anchors, valid now or at
  // another time: each record is judged at its own), bare keys given as trusted, log keys.
  readonly signerChains = new Map<string, X509Certificate[]>();
  readonly trustedKeys: ReadonlyMap<string, KeyObject>;
  /** Log keys receipts may be signed with: the caller's, plus bundle keys whose chain is trusted. */
  logKeys: LogKey[];
  /** The keys of the bundle's `scitt/log-keys.cbor`: the exporting deployment's own log. */
  bundleLogKeys: LogKey[] = [];
  private readonly chainKeyIds = new Map<string, string>();

  // Records: the one being read, and each record's digest in archive order (the .intoto.jsonl
  // must repeat them line by line).
  open: OpenRecord | undefined;
  readonly digests: string[] = [];
  private readonly closers: RecordCloser[] = [];

  // Layout: what the next segment index and index.json must list.
  segmentEntries: ListedEntry[] = [];
  readonly segments: (ListedEntry & { attestations: number })[] = [];
  segmentRecords = 0;
  readonly tail: ListedEntry[] = [];
  index: BundleIndex | undefined;
  /** SHA-256 (hex) of index.json as read: the bundle manifest must be signed over it. */
  indexSha: string | undefined;
  /** SHA-256 of every archive byte before bundle.c2pa's header (its data hash). */
  prefixDigest: Buffer | undefined;
  manifestSeen = false;
  afterManifest = false;

  /** Asynchronous checks of the entry just read, awaited before the next one (memory stays flat). */
  private readonly pending: Promise<void>[] = [];
  /** Each handler's own state for this bundle, keyed by the handler (see slot). */
  private readonly slots = new Map<object, unknown>();

  constructor(options: VerifyBundleOptions) {
    this.options = options;
    this.at = options.at ?? new Date();
    this.anchors = options.trustAnchors;
    this.trustedKeys = new Map((options.publicKeys ?? []).map((k) => [hexOf(keyIdOf(k)), k]));
    this.logKeys = [...(options.logKeys ?? [])];
  }

  fail(entry: string, code: string, message: string): void {
    this.problems.push({ entry, code, message });
  }

  /** The TSA roots as `Trust` takes them (absent when the caller gave none). */
  get tsa(): { tsaTrustAnchors?: readonly X509Certificate[] } {
    const t = this.options.tsaTrustAnchors;
    return t !== undefined ? { tsaTrustAnchors: t } : {};
  }

  /** The key id of a signer chain's leaf, computed once per chain (it exports the key). */
  chainKeyId(ref: string, chain: readonly X509Certificate[]): string {
    let id = this.chainKeyIds.get(ref);
    if (id === undefined) this.chainKeyIds.set(ref, (id = keyIdOf(chain[0]!.publicKey)));
    return id;
  }

  /**
   * A handler's own state for this bundle (a line counter, ...), made by `init` on first use: a
   * new entry type keeps what only it needs here, without a field on this class.
   */
  slot<T>(owner: object, init: () => T): T {
    if (!this.slots.has(owner)) this.slots.set(owner, init());
    return this.slots.get(owner) as T;
  }

  /** Registers what a handler checks when a record closes (in registration order). */
  onRecordClose(closer: RecordCloser): void {
    this.closers.push(closer);
  }

  /** Closes the open record, if any: every closer checks what it expected of it. */
  closeRecord(): void {
    const r = this.open;
    if (r === undefined) return;
    this.open = undefined;
    for (const close of this.closers) close(this, r);
  }

  /** Opens a record (closing the one before is the caller's: see closeRecord). */
  openRecord(record: OpenRecord): void {
    this.open = record;
  }

  /** An asynchronous check of the current entry; verifyBundle awaits it before the next entry. */
  defer(check: Promise<void>): void {
    this.pending.push(check);
  }

  /** Waits for the deferred checks of the entry just read. */
  async settle(): Promise<void> {
    if (this.pending.length > 0) await Promise.all(this.pending.splice(0));
  }

  result(withIndex: boolean): VerifyBundleResult {
    const ok = this.problems.length === 0;
    return {
      ok,
      problems: this.problems,
      attestations: this.attestations,
      timestamped: this.timestamped,
      receipts: this.receipts,
      runs: this.runs,
      entries: this.entries,
      chains: ok ? this.chainLines : [],
      withheldChains: ok ? 0 : this.chainLines.length,
      tlog: { proofs: this.tlogProofs, checkpoints: this.tlogCheckpoints },
      ...(withIndex && this.index !== undefined ? { index: this.index } : {}),
    };
  }
}
