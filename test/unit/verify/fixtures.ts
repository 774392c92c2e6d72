import { hash } from 'node:crypto';
import { Readable } from 'node:stream';
import { logKeyOf } from '../../../src/cose/key.ts';
import { writeBundle, type ExportItem } from '../../../src/export/bundle.ts';
import { viewFileOf } from '../../../src/export/views.ts';
import { toApiEnvelope, type ApiEnvelope } from '../../../src/http/views/envelope.ts';
import type { AibomMetadata } from '../../../src/recorder/index.ts';
import type { KeySigner } from '../../../src/signing/index.ts';
import { leafHash, MemoryTree } from '../../../src/transparency/merkle.ts';
import { entryOf, issueReceipt } from '../../../src/transparency/receipt.ts';
import { buildSignedStatement } from '../../../src/transparency/statement.ts';
import type { StoredAttestation } from '../../../src/vault/index.ts';
import {
  BundleState,
  ENTRY_HANDLERS,
  type Entry,
  type EntryHandler,
  type VerifyBundleOptions,
} from '../../../src/verify/index.ts';
import { capabilityEnvelopes } from '../../helpers/capabilities.ts';
import { tarEntries } from '../../helpers/export.ts';
import { runFixture, succeeded, world } from '../controller/fixtures.ts';

/**
 * One export bundle holding every entry type the verifier knows, made by the real writer from
 * records the real recorder and token minter produced (no stack): a capability and a step record
 * with their VC and Biscuit, a Run's step, policy, provenance and AIBOM records with the AIBOM
 * blob, its C2PA manifest and metadata, and two records published in a log (signed statement and
 * receipt). The handler tests take its entries one at a time and break them.
 */
export interface Fixture {
  readonly signer: KeySigner;
  readonly bytes: Buffer;
  readonly entries: { path: string; content: Buffer }[];
  /** The API views written as envelope.json, by id. */
  readonly views: Map<string, ApiEnvelope>;
  readonly items: ExportItem[];
  readonly logKey: ReturnType<typeof logKeyOf>;
}

function withoutRow(row: StoredAttestation & { record?: unknown }): StoredAttestation {
  const { record: _record, ...stored } = row;
  return stored;
}

/** A published transparency entry of `view` in a fresh log signed by `log` (the `local` backend). */
function publish(
  view: ApiEnvelope,
  signer: KeySigner,
  log: KeySigner,
  tree: MemoryTree,
  claim: { backend: 'local' | 'scrapi'; mode: 'dry_run' | 'published' },
): { statement: Buffer; receipt: Buffer; view: ApiEnvelope } {
  const statement = buildSignedStatement({
    attestationId: view.id,
    envelope: view.envelope,
    digest: view.digest,
    signer,
    caCertificates: signer.caCertificates,
  }).bytes;
  const index = tree.size;
  tree.appendLeafHash(leafHash(entryOf(statement)));
  const receipt = issueReceipt({
    signer: log,
    issuer: 'https://scitt.example',
    subject: view.id,
    proof: { treeSize: tree.size, leafIndex: index, path: tree.inclusionProof(index, tree.size) },
    root: tree.root(tree.size),
    issuedAt: 1_700_000_000,
  });
  const transparency = {
    job_id: '0190a5c8-0000-7000-8000-00000000aaaa',
    status: 'published',
    ...claim,
    entry_id: `entry-${index}`,
    log_index: index,
    receipt: receipt.toString('base64'),
    receipt_media_type: 'application/cose',
    statement: statement.toString('base64'),
    published_at: '2026-03-01T11:00:00.000Z',
    attempts: 1,
  };
  return { statement, receipt, view: { ...view, transparency } };
}

export interface FixtureOptions {
  /** What the published records claim (default: the truth, `local`/`dry_run`). */
  readonly claim?: { backend: 'local' | 'scrapi'; mode: 'dry_run' | 'published' };
  /** Signs the receipts (default: the service signer, whose chain the bundle ships as the log's). */
  readonly log?: KeySigner;
}

export async function fixture(options: FixtureOptions = {}): Promise<Fixture> {
  const w = await world();
  const signer = w.signer;
  const run = runFixture(succeeded);
  await w.recorder.recordSteps(run, ['retrieve', 'summarise', 'post']);
  await w.recorder.recordTerminal(run);
  const { artifact } = await w.recorder.recordAibom(run);
  const metadata = artifact.metadata as unknown as AibomMetadata;
  const caps = await capabilityEnvelopes(signer);
  const chain = signer.certificateChain!;
  const material = {
    ref: caps.capability.signature.cert_chain_ref!,
    keyId: signer.keyId,
    pem: chain.map((c) => c.toString()).join(''),
    certificate: chain[0]!,
  };
  const log = options.log ?? signer;
  const tree = new MemoryTree();
  const claim = options.claim ?? { backend: 'local', mode: 'dry_run' };
  // The fake keeps each stored record (all its fields) beside the summary type it declares.
  const rows = w.vault.rows.map((r) => withoutRow(r as unknown as StoredAttestation & { record?: unknown }));
  const items: ExportItem[] = [];
  const views = new Map<string, ApiEnvelope>();
  const add = (stored: { id: string; createdAt: Date; namespace: string }, view: ApiEnvelope, extra = {}) => {
    views.set(view.id, view);
    items.push({
      id: stored.id,
      createdAt: stored.createdAt,
      namespace: stored.namespace,
      envelope: view.envelope,
      view,
      signer: material,
      ...extra,
    });
  };
  for (const v of [caps.capability, caps.step])
    add({ id: v.id, createdAt: new Date(v.created_at), namespace: v.namespace }, v);
  for (const row of rows) {
    let view = toApiEnvelope(row);
    // A standard view's record carries its view's bytes (src/export/views.ts), as the exporter does.
    let extra: Partial<ExportItem> = viewFileOf(row);
    if (row.kind === 'aibom' || row.kind === 'policy') {
      const p = publish(view, signer, log, tree, claim);
      view = p.view;
      extra = { ...extra, scitt: { statement: p.statement, receipt: p.receipt } };
    }
    if (row.kind === 'aibom') {
      extra = {
        ...extra,
        aibom: {
          runId: row.runId!,
          objectKey: metadata.key,
          bytes: w.blobs.objects.get(metadata.key)!.body,
          manifest: w.blobs.objects.get(metadata.c2pa_manifest.key)!.body,
          metadata,
          manifestDigest: null,
          attestationIds: [row.id],
        },
      };
    }
    add(row, view, extra);
  }
  const logKey = logKeyOf(signer.publicKey);
  const chunks: Buffer[] = [];
  for await (const c of writeBundle({
    segments: Readable.from([
      { items: items.slice(0, 3), scittEnqueued: [] },
      { items: items.slice(3), scittEnqueued: [] },
    ]),
    logKeys: [{ key: logKey, chainPem: material.pem }],
    service: { name: 'aibom-vault', version: 'test' },
    selection: { namespaces: ['team-a'] },
    signer: signer.deterministic(),
    claimGenerator: 'aibom-vault/0.1.0',
  })) {
    chunks.push(c);
  }
  const bytes = Buffer.concat(chunks);
  const entries = (await tarEntries(bytes)).map(({ path, content }) => ({ path, content }));
  return { signer, bytes, entries, views, items, logKey };
}

/** The options a verifier of the fixture's bundle is given: its CA only. */
export const optionsOf = (f: Fixture, extra: Partial<VerifyBundleOptions> = {}): VerifyBundleOptions => ({
  trustAnchors: f.signer.caCertificates,
  ...extra,
});

/** A fresh state with every handler started (record closers registered), as verifyBundle makes it. */
export function freshState(options: VerifyBundleOptions): BundleState {
  const state = new BundleState(options);
  for (const h of ENTRY_HANDLERS) h.start?.(state);
  return state;
}

/** Hands `content` at `path` to `handler` as the reader would (digest, size, pattern captures). */
export function feed(
  state: BundleState,
  handler: EntryHandler,
  path: string,
  content: Buffer | string,
): void {
  const bytes = typeof content === 'string' ? Buffer.from(content) : content;
  const match = handler.pattern.exec(path);
  if (match === null) throw new Error(`${handler.name} does not own ${path}`);
  const entry: Entry = {
    path,
    size: bytes.length,
    sha256: hash('sha256', bytes),
    content: bytes,
    match,
  };
  handler.onEntry(state, entry);
}

/** The content of the fixture's entry at `path` (the first one matching, when a RegExp). */
export function contentOf(f: Fixture, path: string | RegExp): { path: string; content: Buffer } {
  const e = f.entries.find((x) => (typeof path === 'string' ? x.path === path : path.test(x.path)));
  if (e === undefined) throw new Error(`no entry ${String(path)}`);
  return e;
}

/** Codes of the problems, with their entries. */
export const found = (state: BundleState): string[] => state.problems.map((p) => `${p.entry} ${p.code}`);
