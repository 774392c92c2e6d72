import { createHash, hash, type KeyObject, type X509Certificate } from 'node:crypto';
import { envelopeDigest, verifyRecord, type Statement, type Trust } from '../attest/index.ts';
import { rotationProblem, scopeProblemIn } from '../attest/trust-bundle.ts';
import { verifyAibomArtifact } from '../aibom/verify.ts';
import { verifyManifest } from '../c2pa/index.ts';
import { decodeKeySet, type LogKey } from '../cose/key.ts';
import {
  certificateRef,
  keyIdOf,
  parseCertificates,
  validateChain,
  type ScopedCertificate,
} from '../signing/index.ts';
import { verifyReceipt } from '../transparency/receipt.ts';
import { verifySignedStatement } from '../transparency/statement.ts';
import type { DsseEnvelope } from '../vault/index.ts';
import { verifyCapabilities } from '../capability/verify.ts';
import {
  EXPORT_FORMAT,
  hexOf,
  Paths,
  type BundleIndex,
  type IndexEntry,
  type SegmentIndex,
} from './layout.ts';
import { sigstoreBundleProblems, type SignerMaterial } from './sigstore.ts';
import { TlogBundleCheck, type TlogVerifyOptions } from './tlog-check.ts';
import { LineSplitter, LineTooLongError } from './lines.ts';
import { readTar, tarHeader, TarEntryTooLargeError, TarHeaderError, type ParsedHeader } from './tar.ts';

/**
 * Offline verification of an export bundle (workflow steps b–e of the spec on every entry), reading
 * the archive once as a stream. Trust comes from outside the bundle only: the CA certificates the
 * caller gives (and, optionally, log keys and bare public keys it trusts). Certificates and keys
 * inside the bundle are used only once they chain to those anchors; the bundle can never vouch for
 * itself. Every problem names the entry it is about, so one changed byte anywhere is reported
 * against the entry that holds it (content: its index digest; header or padding: rebuilt and
 * compared; index.json: the bundle manifest names its digest; bundle.c2pa: its own signature).
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
   * The records' tlog-proofs (src/export/tlog-check.ts): the caller's witness policy and vault log
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
  /** One line per verified capability chain: who approved which step under which scope. */
  readonly chains: readonly string[];
  /** Records whose tlog-proofs verified, and the checkpoints they lead to. */
  readonly tlog: { readonly proofs: number; readonly checkpoints: readonly string[] };
  readonly index?: BundleIndex;
}

const ARCHIVE = '(archive)';
/**
 * Longest line of `attestations.intoto.jsonl` (16 MiB). A line is one DSSE envelope, whose payload
 * is one statement about one Run, step or AIBOM: a Run is a Kubernetes object (etcd refuses
 * requests over 1.5 MiB), so a real line is at most a few MiB. A longer one is refused as soon as
 * it grows past this, naming the entry.
 */
export const MAX_JSONL_LINE = 16 * 1024 * 1024;
const ENVELOPE =
  /^attestations\/([0-9a-f-]{36})\/(envelope\.json|sigstore\.json|statement\.cose|receipt\.cose|vault\.tlog-proof)$/;
const RUN = /^runs\/([0-9a-f-]{36})\/(aibom\.json|aibom\.c2pa|aibom\.meta\.json)$/;
const CERT = /^certs\/([0-9a-f]{64})\.pem$/;
const KEY = /^keys\/([0-9a-f]{64})\.pem$/;
const LOG_CERT = /^scitt\/log-certs\/([0-9a-f]{64})\.pem$/;
const SEGMENT = /^index\/(\d{6})\.json$/;

interface OpenRecord {
  readonly id: string;
  readonly path: string;
  readonly record: Record<string, unknown>;
  readonly envelope: DsseEnvelope | undefined;
  readonly material: SignerMaterial | undefined;
  /** The record's time-stamp, as its Sigstore bundle must carry it. */
  readonly timestamps: { signedTimestamp: string }[];
  readonly statement: Statement | undefined;
  readonly published: { statement: Buffer; receipt: Buffer } | undefined;
  seen: Set<string>;
  aibom: { bytes?: Buffer; manifest?: Buffer; metadata?: Buffer; metadataPath?: string } | undefined;
  statementBytes?: Buffer;
}

function parseJson(content: Buffer): unknown {
  return JSON.parse(content.toString('utf8')) as unknown;
}

function isObject(v: unknown): v is Record<string, unknown> {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}

/** Verifies a bundle read from `source` (the tar bytes, already decompressed). */
export async function verifyBundle(
  source: AsyncIterable<Uint8Array>,
  options: VerifyBundleOptions,
): Promise<VerifyBundleResult> {
  const at = options.at ?? new Date();
  const anchors = options.trustAnchors;
  const problems: BundleProblem[] = [];
  const fail = (entry: string, code: string, message: string): void => {
    problems.push({ entry, code, message });
  };
  const tlog = new TlogBundleCheck(options.tlog);

  const prefix = createHash('sha256');
  let prefixDigest: Buffer | undefined;
  let segmentEntries: IndexEntry[] = [];
  const segments: (IndexEntry & { attestations: number })[] = [];
  let segmentRecords = 0;
  const tail: IndexEntry[] = [];
  let entriesSeen = 0;

  /**
   * Signer chains by cert_chain_ref hex: only those that lead to the anchors (valid now, or at some
   * other time: each record's chain is judged at its own time, a trusted time-stamp's or now).
   */
  const chains = new Map<string, X509Certificate[]>();
  const trustedKeys = new Map((options.publicKeys ?? []).map((k) => [hexOf(keyIdOf(k)), k]));
  let logKeys: LogKey[] = [...(options.logKeys ?? [])];
  let bundleLogKeys: LogKey[] = [];

  const digests: string[] = [];
  /** Capability checks of the entry just read (awaited before the next one: memory stays flat). */
  const pending: Promise<void>[] = [];
  /** Who approved which step under which scope, one line per verified chain. */
  const chainLines: string[] = [];
  let attestations = 0;
  let timestamped = 0;
  let receipts = 0;
  let runs = 0;
  let open: OpenRecord | undefined;
  let index: BundleIndex | undefined;
  let indexSha: string | undefined;
  let manifestSeen = false;
  let afterManifest = false;

  let jsonlLine = 0;
  let jsonlMismatches = 0;
  const jsonlHash = createHash('sha256');
  const checkLine = (line: string): void => {
    const n = jsonlLine++;
    let digest: string | undefined;
    try {
      digest = envelopeDigest(JSON.parse(line) as DsseEnvelope);
    } catch {
      digest = undefined;
    }
    if (digest === undefined || digest !== digests[n]) {
      if (jsonlMismatches++ < 5) {
        fail(
          Paths.intotoJsonl,
          'RECORD_MISMATCH',
          `line ${n + 1} is not the envelope of attestation #${n + 1} (${digests[n] ?? 'none'})`,
        );
      }
    }
  };

  // The .intoto.jsonl arrives in chunks: lines are checked as they complete (linear in its size).
  const jsonl = new LineSplitter(MAX_JSONL_LINE, (line) => checkLine(line.toString('utf8')));

  const closeRecord = (): void => {
    const r = open;
    if (r === undefined) return;
    open = undefined;
    if (r.material !== undefined && !r.seen.has('sigstore.json')) {
      fail(Paths.sigstore(r.id), 'MISSING', 'the Sigstore bundle of this attestation is missing');
    }
    problems.push(...tlog.closed(r.id, r.seen.has('vault.tlog-proof')));
    if (r.published !== undefined) {
      for (const f of ['statement.cose', 'receipt.cose'])
        if (!r.seen.has(f))
          fail(`attestations/${r.id}/${f}`, 'MISSING', 'the record is published but this file is missing');
    }
    if (r.record.kind === 'aibom') {
      const a = r.aibom ?? {};
      const run = typeof r.record.run_id === 'string' ? r.record.run_id : '?';
      if (a.bytes === undefined || a.manifest === undefined || a.metadata === undefined) {
        fail(
          Paths.aibom(run),
          'MISSING',
          'the AIBOM record is exported without its blob, manifest and metadata',
        );
      } else {
        checkAibom(r, run, a.bytes, a.manifest, a.metadata);
      }
    }
  };

  const checkAibom = (
    r: OpenRecord,
    run: string,
    bytes: Buffer,
    manifest: Buffer,
    metaBytes: Buffer,
  ): void => {
    let metadata: unknown;
    try {
      metadata = parseJson(metaBytes);
    } catch {
      fail(Paths.aibomMetadata(run), 'MALFORMED', 'not JSON');
      return;
    }
    const result = verifyAibomArtifact({ bytes, manifest, metadata }, anchors, options.tsaTrustAnchors ?? []);
    const pathOf = {
      bom: Paths.aibom(run),
      manifest: Paths.aibomManifest(run),
      metadata: Paths.aibomMetadata(run),
    };
    for (const p of result.problems) fail(pathOf[p.part], p.code, p.message);
    // The AIBOM attestation is about exactly these bytes.
    const subject = r.statement?.subject[0]?.digest.sha256;
    if (subject !== undefined && subject !== hash('sha256', bytes)) {
      fail(
        Paths.aibom(run),
        'DIGEST_MISMATCH',
        `not the AIBOM attestation ${r.id}'s subject (sha256:${subject})`,
      );
    }
    runs++;
  };

  // The key id of each chain's leaf, computed once per chain (not per record: it exports the key).
  const chainKeyIds = new Map<string, string>();
  const chainKeyId = (ref: string, chain: readonly X509Certificate[]): string => {
    let id = chainKeyIds.get(ref);
    if (id === undefined) chainKeyIds.set(ref, (id = keyIdOf(chain[0]!.publicKey)));
    return id;
  };
  const signerOf = (
    record: Record<string, unknown>,
    path: string,
  ): { trust?: Trust; material?: SignerMaterial } => {
    const sig = isObject(record.signature) ? record.signature : {};
    const ref = typeof sig.cert_chain_ref === 'string' ? sig.cert_chain_ref : undefined;
    const keyId = typeof sig.key_id === 'string' ? sig.key_id : undefined;
    if (ref !== undefined) {
      const chain = chains.get(hexOf(ref));
      if (chain === undefined) {
        fail(
          path,
          'UNTRUSTED_KEY',
          `the bundle does not carry the certificate chain ${ref} before this record`,
        );
        return {};
      }
      return {
        trust: {
          certificateChain: chain,
          trustAnchors: anchors,
          at,
          ...(options.tsaTrustAnchors !== undefined ? { tsaTrustAnchors: options.tsaTrustAnchors } : {}),
        },
        material: { keyId: chainKeyId(ref, chain) },
      };
    }
    if (keyId !== undefined) {
      const key = trustedKeys.get(hexOf(keyId));
      if (key === undefined) {
        fail(path, 'UNTRUSTED_KEY', `signed by a bare key ${keyId} that was not given as trusted (--key)`);
        return { material: { keyId } };
      }
      return {
        trust: {
          publicKeys: [key],
          ...(options.tsaTrustAnchors !== undefined ? { tsaTrustAnchors: options.tsaTrustAnchors } : {}),
        },
        material: { keyId },
      };
    }
    fail(path, 'MALFORMED', 'the record has no signature metadata');
    return {};
  };

  /**
   * With the signer history (the rules `verify --trust-bundle` applies to single records): the
   * certificate the record names must be one the service used for that key, not rotated away
   * before the record was signed, and a tenant's customer key must sign that tenant's namespace.
   */
  const checkHistory = (
    record: Record<string, unknown>,
    path: string,
    statement: unknown,
    stamped: Date | undefined,
  ): void => {
    const history = options.signerHistory;
    if (history === undefined) return;
    for (const p of [rotationProblem(record, history, stamped), scopeProblemIn(history, record, statement)])
      if (p !== undefined) fail(path, p.code, p.message);
  };

  const onEnvelope = (id: string, path: string, content: Buffer): void => {
    closeRecord();
    attestations++;
    segmentRecords++;
    let record: Record<string, unknown>;
    try {
      const parsed = parseJson(content);
      if (!isObject(parsed)) throw new Error('not an object');
      record = parsed;
    } catch {
      fail(path, 'MALFORMED', 'not a JSON record');
      digests.push('');
      open = {
        id,
        path,
        record: {},
        envelope: undefined,
        material: undefined,
        timestamps: [],
        statement: undefined,
        published: undefined,
        seen: new Set(['envelope.json']),
        aibom: undefined,
      };
      return;
    }
    if (record.id !== id) fail(path, 'RECORD_MISMATCH', `the record's id is ${String(record.id)}, not ${id}`);
    digests.push(typeof record.digest === 'string' ? record.digest : '');
    const { trust, material } = signerOf(record, path);
    let statement: Statement | undefined;
    if (trust !== undefined) {
      const result = verifyRecord(record, trust);
      for (const p of result.problems) fail(path, p.code, p.message);
      statement = result.statement;
      if (result.timestamp?.trusted === true) timestamped++;
      checkHistory(
        record,
        path,
        result.statement,
        result.timestamp?.trusted === true ? result.timestamp.time : undefined,
      );
    } else {
      // Still parse the statement for the checks below (not trusted: the record already failed).
      try {
        const env = record.envelope as DsseEnvelope;
        statement = JSON.parse(Buffer.from(env.payload, 'base64').toString('utf8')) as Statement;
      } catch {
        statement = undefined;
      }
    }
    // Workflow step (d): capability chains and their tokens, under the same trusted key as the
    // envelope (src/capability/verify.ts). Asynchronous: awaited before the next entry is read.
    if (trust !== undefined && (record.kind === 'capability' || record.kind === 'step')) {
      const checked = record;
      pending.push(
        verifyCapabilities(checked, trust).then((report) => {
          for (const p of report.problems) fail(path, p.code, p.message);
          for (const line of report.lines) chainLines.push(line);
        }),
      );
    }
    const t = isObject(record.transparency) ? record.transparency : undefined;
    const published =
      t?.status === 'published' && typeof t.statement === 'string' && typeof t.receipt === 'string'
        ? { statement: Buffer.from(t.statement, 'base64'), receipt: Buffer.from(t.receipt, 'base64') }
        : undefined;
    const sig = isObject(record.signature) ? record.signature : {};
    const ts = isObject(sig.timestamp) ? sig.timestamp : {};
    open = {
      id,
      path,
      record,
      envelope: isObject(record.envelope) ? (record.envelope as unknown as DsseEnvelope) : undefined,
      material,
      timestamps: typeof ts.signed_timestamp === 'string' ? [{ signedTimestamp: ts.signed_timestamp }] : [],
      statement,
      published,
      seen: new Set(['envelope.json']),
      aibom: record.kind === 'aibom' ? {} : undefined,
    };
  };

  const onRecordFile = (id: string, file: string, path: string, content: Buffer): void => {
    const r = open;
    if (r === undefined || r.id !== id) {
      fail(path, 'UNEXPECTED_ENTRY', 'not next to its attestation record');
      return;
    }
    r.seen.add(file);
    if (file === 'sigstore.json') {
      if (r.envelope === undefined || r.material === undefined) {
        fail(path, 'UNTRUSTED_KEY', 'no trusted signer to compare the Sigstore bundle with');
        return;
      }
      let bundle: unknown;
      try {
        bundle = parseJson(content);
      } catch {
        fail(path, 'MALFORMED', 'not JSON');
        return;
      }
      for (const m of sigstoreBundleProblems(bundle, r.envelope, r.material, r.timestamps))
        fail(path, 'SIGSTORE_BUNDLE_MISMATCH', m);
      return;
    }
    if (file === 'vault.tlog-proof') {
      problems.push(...tlog.proof(path, r.record, content));
      return;
    }
    if (r.published === undefined) {
      fail(path, 'UNEXPECTED_ENTRY', 'the record has no published receipt');
      return;
    }
    if (file === 'statement.cose') {
      r.statementBytes = content;
      if (!content.equals(r.published.statement)) {
        fail(path, 'RECORD_MISMATCH', "not the signed statement of the record's transparency entry");
      }
      try {
        const s = verifySignedStatement(content, { trustAnchors: anchors, at });
        if (s.subject !== id)
          fail(path, 'STATEMENT_MISMATCH', `the statement is about ${s.subject}, not ${id}`);
        if (`sha256:${s.payload.toString('hex')}` !== r.record.digest) {
          fail(path, 'STATEMENT_MISMATCH', "the statement's payload is not the envelope digest");
        }
      } catch (err) {
        fail(path, (err as { code?: string }).code ?? 'STATEMENT_INVALID', (err as Error).message);
      }
      return;
    }
    // receipt.cose
    receipts++;
    if (!content.equals(r.published.receipt)) {
      fail(path, 'RECORD_MISMATCH', "not the receipt of the record's transparency entry");
    }
    const statement = r.statementBytes ?? r.published.statement;
    if (logKeys.length === 0) {
      fail(path, 'UNKNOWN_LOG_KEY', 'no log key chains to the trust anchor and none was given (--log-keys)');
      return;
    }
    const v = verifyReceipt({ receipt: content, statement, logKey: logKeys });
    if (!v.ok) fail(path, v.code, v.message);
  };

  const onRunFile = (run: string, file: string, path: string, content: Buffer): void => {
    const r = open;
    if (r?.aibom === undefined || r.record.run_id !== run) {
      fail(path, 'UNEXPECTED_ENTRY', 'not next to the AIBOM attestation of its run');
      return;
    }
    if (file === 'aibom.json') r.aibom.bytes = content;
    else if (file === 'aibom.c2pa') r.aibom.manifest = content;
    else r.aibom.metadata = content;
  };

  const onChain = (
    hex: string,
    path: string,
    content: Buffer,
    role: 'signer' | 'log',
  ): X509Certificate[] | undefined => {
    let chain: X509Certificate[];
    try {
      chain = parseCertificates(content.toString('utf8'), path);
    } catch (err) {
      fail(path, 'MALFORMED', (err as Error).message);
      return undefined;
    }
    const leaf = chain[0]!;
    const named = role === 'signer' ? hexOf(certificateRef(leaf)) : hexOf(keyIdOf(leaf.publicKey));
    if (named !== hex) fail(path, 'RECORD_MISMATCH', `the leaf does not match the file name (${named})`);
    const valid = validateChain(chain, anchors, at);
    // A signer chain outside its validity now is kept: each record signed with it is judged at
    // its own time (a trusted time-stamp's), and fails there when it has none.
    const timed = !valid.ok && (valid.failure === 'EXPIRED' || valid.failure === 'NOT_YET_VALID');
    if (!valid.ok && !(timed && role === 'signer')) {
      fail(path, 'UNTRUSTED_KEY', `${valid.message}`);
      return undefined;
    }
    return chain;
  };

  const onSegment = (n: number, path: string, content: Buffer): void => {
    closeRecord();
    const computed = segmentEntries;
    segmentEntries = [];
    let listed: SegmentIndex;
    try {
      listed = parseJson(content) as SegmentIndex;
      if (!Array.isArray(listed.entries)) throw new Error('no entries');
    } catch {
      fail(path, 'MALFORMED', 'not a segment index');
      return;
    }
    if (listed.segment !== n || n !== segments.length + 1)
      fail(path, 'MALFORMED', `out of order (segment ${listed.segment})`);
    compareEntries(listed.entries, computed, path);
  };

  /** Every entry written must be listed with its digest and size, and nothing else. */
  const compareEntries = (
    listed: readonly IndexEntry[],
    computed: readonly IndexEntry[],
    where: string,
  ): void => {
    const byPath = new Map(listed.map((e) => [e.path, e]));
    for (const e of computed) {
      const l = byPath.get(e.path);
      byPath.delete(e.path);
      if (l === undefined) fail(e.path, 'NOT_IN_INDEX', `not listed in ${where}`);
      else if (l.sha256 !== e.sha256 || l.size !== e.size) {
        fail(e.path, 'DIGEST_MISMATCH', `content does not match its SHA-256 in ${where} (is ${e.sha256})`);
      }
    }
    for (const path of byPath.keys()) fail(path, 'MISSING', `listed in ${where} but not in the archive`);
  };

  const onIndex = (content: Buffer): void => {
    closeRecord();
    indexSha = hash('sha256', content);
    try {
      index = parseJson(content) as BundleIndex;
    } catch {
      fail(Paths.index, 'MALFORMED', 'not JSON');
      return;
    }
    if (index.format !== EXPORT_FORMAT)
      fail(Paths.index, 'MALFORMED', 'format is not ' + String(EXPORT_FORMAT));
    if (segmentEntries.length > 0) {
      for (const e of segmentEntries) fail(e.path, 'NOT_IN_INDEX', 'after the last segment index');
    }
    const listedSegments = Array.isArray(index.segments) ? index.segments : [];
    const byPath = new Map(listedSegments.map((s) => [s.path, s]));
    for (const s of segments) {
      const l = byPath.get(s.path);
      byPath.delete(s.path);
      if (l === undefined) fail(s.path, 'NOT_IN_INDEX', 'not listed in index.json');
      else if (l.sha256 !== s.sha256 || l.size !== s.size) {
        fail(s.path, 'DIGEST_MISMATCH', 'content does not match its SHA-256 in index.json');
      } else if (l.attestations !== s.attestations) {
        fail(
          s.path,
          'RECORD_MISMATCH',
          `index.json says ${l.attestations} attestations, the segment has ${s.attestations}`,
        );
      }
    }
    for (const path of byPath.keys()) fail(path, 'MISSING', 'listed in index.json but not in the archive');
    compareEntries(Array.isArray(index.entries) ? index.entries : [], tail, Paths.index);
    if (index.attestations !== attestations) {
      fail(
        Paths.index,
        'RECORD_MISMATCH',
        `says ${index.attestations} attestations, the archive holds ${attestations}`,
      );
    }
  };

  const onManifest = (content: Buffer): void => {
    manifestSeen = true;
    if (prefixDigest === undefined) return;
    let result: ReturnType<typeof verifyManifest>;
    try {
      result = verifyManifest({
        store: content,
        asset: Buffer.alloc(0),
        assetSha256: prefixDigest,
        trustAnchors: anchors,
        at,
      });
    } catch (err) {
      fail(Paths.manifest, 'MALFORMED_MANIFEST', (err as Error).message);
      return;
    }
    const mismatch = result.problems.some((p) => p.code === 'DATA_HASH_MISMATCH');
    for (const p of result.problems) {
      if (p.code === 'DATA_HASH_MISMATCH') continue;
      fail(Paths.manifest, `C2PA_${p.code}`, p.message);
    }
    const signedIndex = result.runId;
    const signatureOk = !result.problems.some(
      (p) => p.code === 'SIGNATURE_INVALID' || p.code === 'UNTRUSTED_SIGNER',
    );
    if (
      signatureOk &&
      indexSha !== undefined &&
      signedIndex !== `urn:aibom-vault:export:sha256:${indexSha}`
    ) {
      fail(Paths.index, 'DIGEST_MISMATCH', 'index.json is not the index the bundle manifest was signed over');
    } else if (mismatch) {
      // Every entry and header was checked on its own; name the bytes that nothing else covers.
      const others = problems.length > 0;
      fail(
        others ? Paths.manifest : ARCHIVE,
        'C2PA_DATA_HASH_MISMATCH',
        others
          ? 'the archive bytes before the manifest changed (see the entries above)'
          : 'the archive bytes before the manifest do not match its data hash',
      );
    }
  };

  let result: Awaited<ReturnType<typeof readTar>>;
  try {
    result = await readTar(source, {
      onHeader(header: ParsedHeader, raw: Buffer) {
        if (header.path === Paths.manifest) prefixDigest = prefix.copy().digest();
        // A header that is not exactly what the writer makes for this path and size was changed.
        let canonical: Buffer | undefined;
        try {
          canonical = tarHeader(header.path, header.size);
        } catch {
          canonical = undefined;
        }
        if (canonical === undefined || !canonical.equals(raw)) {
          fail(header.path, 'TAR_HEADER_CHANGED', 'the tar header is not the one the exporter writes');
        }
      },
      onBytes(bytes) {
        if (prefixDigest === undefined) prefix.update(bytes);
      },
      stream: (h) => h.path === Paths.intotoJsonl,
      onChunk(_h, chunk) {
        jsonlHash.update(chunk);
        jsonl.push(chunk);
      },
      async onEntry(header, content, padding) {
        try {
          handleEntry(header, content, padding);
        } catch (err) {
          // Damaged content can make a parser throw (a certificate that does not decode, ...).
          fail(header.path, 'MALFORMED', (err as Error).message);
        }
        if (pending.length > 0) await Promise.all(pending.splice(0));
      },
    });
  } catch (err) {
    const entry =
      err instanceof TarHeaderError || err instanceof TarEntryTooLargeError
        ? err.path
        : err instanceof LineTooLongError
          ? Paths.intotoJsonl
          : ARCHIVE;
    const message =
      err instanceof LineTooLongError ? `${err.message}: not one DSSE envelope` : (err as Error).message;
    fail(entry, 'MALFORMED_ARCHIVE', message);
    return {
      ok: false,
      problems,
      attestations,
      timestamped,
      receipts,
      runs,
      entries: entriesSeen,
      chains: chainLines,
      tlog: tlog.summary(),
    };
  }
  function handleEntry(header: ParsedHeader, content: Buffer, padding: Buffer): void {
    entriesSeen++;
    const path = header.path;
    if (afterManifest) fail(path, 'UNEXPECTED_ENTRY', 'after the bundle manifest');
    if (header.type !== '0')
      fail(path, 'TAR_HEADER_CHANGED', `entry type ${header.type} is not a regular file`);
    if (!padding.every((b) => b === 0))
      fail(path, 'TAR_PADDING_CHANGED', 'non-zero bytes in the padding after the entry');
    const digest = path === Paths.intotoJsonl ? jsonlHash.digest('hex') : hash('sha256', content);
    const entry: IndexEntry = { path, size: header.size, sha256: digest };
    let m: RegExpExecArray | null;
    if (path === Paths.intotoJsonl) {
      if (jsonl.unfinished > 0) fail(path, 'MALFORMED', 'the last line does not end with a newline');
      if (jsonlLine !== digests.length) {
        fail(path, 'RECORD_MISMATCH', `${jsonlLine} lines for ${digests.length} attestations`);
      }
      closeRecord();
      tail.push(entry);
    } else if (path === Paths.index) {
      onIndex(content);
    } else if (path === Paths.manifest) {
      onManifest(content);
      afterManifest = true;
    } else {
      if ((m = SEGMENT.exec(path)) !== null) {
        onSegment(Number(m[1]), path, content);
        segments.push({ ...entry, attestations: segmentRecords });
        segmentRecords = 0;
        return;
      }
      segmentEntries.push(entry);
      if (path === Paths.logKeys) {
        try {
          bundleLogKeys = decodeKeySet(content);
        } catch (err) {
          fail(path, 'MALFORMED', (err as Error).message);
        }
      } else if ((m = LOG_CERT.exec(path)) !== null) {
        const chain = onChain(m[1]!, path, content, 'log');
        const kid = m[1]!;
        const key = bundleLogKeys.find((k) => k.kid.toString('hex') === kid);
        if (chain !== undefined && key !== undefined && !logKeys.some((k) => k.kid.equals(key.kid))) {
          logKeys = [...logKeys, key];
        } else if (key === undefined) {
          fail(path, 'RECORD_MISMATCH', `no key ${kid} in ${Paths.logKeys}`);
        }
      } else if ((m = CERT.exec(path)) !== null) {
        const chain = onChain(m[1]!, path, content, 'signer');
        if (chain !== undefined) chains.set(m[1]!, chain);
      } else if (path === Paths.tlogKeys) {
        problems.push(...tlog.keys(path, content));
      } else if (KEY.test(path)) {
        // A bare key in the bundle is informational: only keys given by the caller are trusted.
      } else if ((m = ENVELOPE.exec(path)) !== null) {
        if (m[2] === 'envelope.json') onEnvelope(m[1]!, path, content);
        else onRecordFile(m[1]!, m[2]!, path, content);
      } else if ((m = RUN.exec(path)) !== null) {
        onRunFile(m[1]!, m[2]!, path, content);
      } else {
        fail(path, 'UNEXPECTED_ENTRY', 'not part of the export layout');
      }
    }
  }
  if (result.trailing !== undefined) fail(ARCHIVE, 'MALFORMED_ARCHIVE', result.trailing);
  if (!manifestSeen) fail(Paths.manifest, 'MISSING', 'the bundle has no manifest of its own');
  if (index === undefined) fail(Paths.index, 'MISSING', 'the bundle has no index');
  if (jsonlMismatches > 5)
    fail(Paths.intotoJsonl, 'RECORD_MISMATCH', `${jsonlMismatches - 5} more lines differ`);
  return {
    ok: problems.length === 0,
    problems,
    attestations,
    timestamped,
    receipts,
    runs,
    entries: entriesSeen,
    chains: chainLines,
    tlog: tlog.summary(),
    ...(index !== undefined ? { index } : {}),
  };
}
