import { aibomStatement, artifactStatement } from '../attest/index.ts';
import {
  aibomDigest,
  buildAibom,
  serializeAibom,
  summarize,
  type Aibom,
  type AibomRun,
  type PolicyPackOverride,
} from '../aibom/index.ts';
import type { BlobStore } from '../blob/store.ts';
import { backoffDelay } from '../queue/queue-loop.ts';
import {
  buildManifest,
  buildTimestampedManifest,
  C2PA_MEDIA_TYPE,
  type BuiltManifest,
} from '../c2pa/index.ts';
import type { Logger } from '../log/index.ts';
import type { KeySigner } from '../signing/index.ts';
import { signatureMetadata } from '../signing/index.ts';
import { transparencyView } from '../transparency/jobs.ts';
import { TimestampError, type Timestamper, type VerifiedTimestamp } from '../timestamp/index.ts';
import type {
  AibomRecords,
  ArtifactRecord,
  ArtifactRepository,
  AttestationRepository,
  ClaimRepository,
  LossRepository,
  ManifestRepair,
  ManifestRepairRepository,
  NewAttestation,
  TransparencyJobRepository,
} from '../vault/index.ts';
import { because, RecordError } from './errors.ts';
import { aibomKey } from './extract.ts';
import { currentMetadata } from './metadata.ts';
import { viewRecordIds } from './losses.ts';
import { appendOnce } from './once.ts';
import { removeOrphanSidecars } from './orphans.ts';
import { sealRecord } from './seal.ts';
import { sealViews, viewMetadata, viewsOf, type ViewMetadata } from './views.ts';
import type { BuiltView, ViewFormat } from '../aibom/views/index.ts';

export const CLAIM_GENERATOR = 'aibom-vault/0.1.0';
export const AIBOM_MEDIA_TYPE = 'application/json';

/** The parts of the vault the AIBOM flow reads and writes. */
export interface AibomStore {
  /** The AIBOM's inputs, and the records they name (the standard views cite them). */
  readonly attestations: Pick<AttestationRepository, 'aibomInputs' | 'getMany'>;
  readonly artifacts: Pick<ArtifactRepository, 'get'>;
  readonly claims: ClaimRepository;
  /** The AIBOM attestation's SCITT job, for the metadata's `transparency` entry. */
  readonly transparencyJobs: Pick<TransparencyJobRepository, 'get'>;
  readonly manifestRepairs: Pick<ManifestRepairRepository, 'complete' | 'fail'>;
  /** Where an AIBOM found in the bucket without its record is written down (docs/failover.md). */
  readonly losses: Pick<LossRepository, 'record'>;
}

/** Who the audit log names for what the controller does on its own (manifest repairs). */
export const CONTROLLER_ACTOR = 'aibom-vault-controller';

export interface AibomDeps {
  readonly vault: AibomStore;
  readonly blobs: BlobStore;
  /** The runtime trust signer (signs the AIBOM bytes, the C2PA claim and the AIBOM attestation). */
  readonly signer: KeySigner;
  readonly logger: Logger;
  /** SERVICE_TRANSPARENCY_WRITER=1: the AIBOM attestation's SCITT job commits with it. */
  readonly enqueueTransparency?: boolean;
  /**
   * RFC 3161 time-stamps for the C2PA claim signature and the runtime signature (TSA_URL). Without
   * one, nothing is time-stamped and verifiers judge the signer's certificate at their own time.
   */
  readonly timestamper?: Timestamper;
  /**
   * Record without time-stamps when the TSA fails (docs/adr/0014): set while the Run is being
   * deleted, so a TSA outage never holds a deletion; otherwise the failure is TimestampUnavailable
   * and the reconciler retries.
   */
  readonly allowUntimestamped?: boolean;
}

/** An RFC 3161 time-stamp as the metadata records it, beside the signature it is over. */
export interface TimestampMetadata {
  /** genTime of the token (ISO 8601): when the TSA saw the signature. */
  time: string;
  /** Subject of the TSA certificate. */
  tsa: string;
  /** Base64 DER TimeStampResp (RFC 3161), the form Sigstore bundles carry as `signedTimestamp`. */
  signed_timestamp: string;
}

/** The spec's AIBOM object-store metadata record, as stored in Postgres and beside the blob. */
export interface AibomMetadata {
  kind: 'aibom';
  run_id: string;
  status: string;
  trust_subjects: string[];
  attestation_ids: string[];
  summary: ReturnType<typeof summarize>;
  c2pa_manifest: {
    label: string;
    digest: string;
    bucket: string;
    key: string;
    media_type: string;
    claim_version: 1;
    spec_version: '1.4';
    attestation_ids: string[];
    /** The claim signature's `sigTst` time-stamp, when the manifest has one. */
    timestamp?: { time: string; tsa: string };
  };
  /**
   * The runtime trust signature over the AIBOM bytes (spec: algorithm, key id, base64 signature),
   * the certificate it was made with, and its RFC 3161 time-stamp (over the signature bytes).
   */
  signature: {
    algorithm: string;
    key_id: string;
    signature: string;
    cert_chain_ref?: string;
    timestamp?: TimestampMetadata;
  };
  bucket: string;
  key: string;
  digest: string;
  size: number;
  media_type: string;
  aibom_attestation_id: string;
  /**
   * The artifact record of the AIBOM blob (issue 22 item 6), stored in the AIBOM's batch: named here
   * so that its loss is found like the others' (recorder/losses.ts). Absent on older AIBOMs.
   */
  blob_attestation_id?: string;
  namespace: string;
  run_name: string;
  /**
   * The standard views recorded with the AIBOM (docs/aibom.md, "Standard views"): each view's
   * record and digest. Absent on AIBOMs recorded before views existed.
   */
  views?: Partial<Record<ViewFormat, ViewMetadata>>;
  /**
   * An earlier AIBOM of the run whose record the vault lost (found in the bucket when this one was
   * recorded): it is kept where it was, this one replaces it, and the loss is in `vault_losses`.
   */
  supersedes?: SupersededAibom;
}

/** The AIBOM a new one replaces after the vault lost its record (docs/failover.md). */
export interface SupersededAibom {
  digest: string;
  key: string;
  /** The copy of its metadata record, kept beside the blob. */
  metadata_key: string;
  aibom_attestation_id: string | null;
  /** The ids it names that the vault no longer holds (dangling references). */
  lost_attestation_ids: string[];
  /** The `vault_losses` row. */
  loss_id: string;
  detected_at: string;
}

export function timestampMetadata(t: VerifiedTimestamp): TimestampMetadata {
  return { time: t.genTime.toISOString(), tsa: t.tsa, signed_timestamp: t.response.toString('base64') };
}

/**
 * The C2PA manifest, time-stamped when a TSA is configured, and the time-stamp of the runtime
 * signature (both requested at once; each over its own bytes). A TSA failure is
 * TimestampUnavailable (nothing has been written yet, the reconciler retries), unless
 * `allowUntimestamped`: then both are made without one and a warning says so. Without
 * `signatureBytes` (a manifest repair: the runtime signature is the record's), only the manifest.
 */
async function signedManifest(
  deps: AibomDeps,
  input: Parameters<typeof buildManifest>[0],
  signatureBytes?: Buffer,
): Promise<{
  manifest: BuiltManifest & { timestamp?: VerifiedTimestamp };
  signatureTimestamp?: VerifiedTimestamp;
}> {
  const tsa = deps.timestamper;
  if (tsa === undefined) return { manifest: buildManifest(input) };
  try {
    const [manifest, signatureTimestamp] = await Promise.all([
      buildTimestampedManifest(input, (data) => tsa.timestamp(data)),
      signatureBytes !== undefined ? tsa.timestamp(signatureBytes) : undefined,
    ]);
    return { manifest, ...(signatureTimestamp !== undefined ? { signatureTimestamp } : {}) };
  } catch (err) {
    if (!(err instanceof TimestampError)) throw err;
    if (deps.allowUntimestamped !== true) {
      throw new RecordError('TimestampUnavailable', `no time-stamp from ${tsa.url}: ${err.message}`, {
        cause: err,
      });
    }
    deps.logger.warn(
      { err, tsa: tsa.url },
      'AIBOM recorded WITHOUT a time-stamp: the TSA failed while the Run is being deleted',
    );
    return { manifest: buildManifest(input) };
  }
}

/**
 * Object keys of a run's artifacts; the sidecar is content-addressed (see recordAibom). An AIBOM
 * that supersedes one the vault lost is content-addressed too (`superseding`): bytes in the bucket
 * are never overwritten with other bytes.
 */
export function aibomKeys(namespace: string, runId: string) {
  const base = `runs/${namespace}/${runId}`;
  return {
    prefix: `${base}/`,
    blob: `${base}/aibom.json`,
    meta: `${base}/aibom.meta.json`,
    sidecar: (manifestDigest: string) => `${base}/aibom.${manifestDigest.slice(7, 23)}.c2pa`,
    superseding: (digest: string) => `${base}/aibom.${digest.slice(7, 23)}.json`,
    supersededMeta: (digest: string) => `${base}/aibom.${digest.slice(7, 23)}.meta.json`,
  };
}

/** The `transparency` entry of the AIBOM's metadata now (writer on and the job exists), else null. */
async function transparencyOf(
  deps: Pick<AibomDeps, 'vault' | 'enqueueTransparency'>,
  record: ArtifactRecord,
): Promise<ReturnType<typeof transparencyView> | null> {
  const id = record.metadata.aibom_attestation_id;
  if (deps.enqueueTransparency !== true || typeof id !== 'string') return null;
  const job = await because('VaultUnavailable', () => deps.vault.transparencyJobs.get({ attestationId: id }));
  return job === null ? null : transparencyView(job);
}

/**
 * The metadata as readers should see it now (metadata.ts: the record, the manifest in force, the
 * transparency entry) as JSON beside the blob. Idempotent; written after every change of those.
 */
export async function writeMetadataBeside(
  deps: Pick<AibomDeps, 'blobs'>,
  record: ArtifactRecord,
  transparency: ReturnType<typeof transparencyView> | null,
): Promise<void> {
  await because('ObjectStoreUnavailable', () =>
    deps.blobs.put(
      aibomKeys(record.namespace, record.runId).meta,
      Buffer.from(JSON.stringify(currentMetadata(record, transparency), null, 2)),
      'application/json',
      { kind: 'aibom-metadata', 'run-id': record.runId },
    ),
  );
}

/** The AIBOM of a run from its records (ids listed, steps that ran), bytes and digest (pure). */
function aibomOf(
  run: AibomRun,
  records: AibomRecords,
  override?: PolicyPackOverride,
): { bom: Aibom; bytes: Buffer; digest: string } {
  const bom = buildAibom({
    run,
    attestationIds: records.ids,
    ranSteps: records.steps,
    ...(override ? { policyPackOverride: override } : {}),
  });
  const bytes = serializeAibom(bom);
  return { bom, bytes, digest: aibomDigest(bytes) };
}

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/;

/** Where a new AIBOM goes, and the lost one it replaces (if the bucket holds one). */
interface Placement {
  readonly blobKey: string;
  readonly supersedes?: SupersededAibom;
}

/**
 * What the bucket holds at a run's AIBOM keys while the vault has no AIBOM record of the run. The
 * metadata copy (`aibom.meta.json`) is only ever written after the record committed, so one that
 * exists now is the copy of an AIBOM whose record the vault lost (docs/failover.md): it is written
 * down in `vault_losses` (with the ids it names that the vault no longer holds) and kept beside the
 * blob under its own digest, and the new AIBOM supersedes it. Blob bytes are never overwritten with
 * other bytes: when `aibom.json` holds another AIBOM, the new one is stored content-addressed.
 * Bytes equal to ours are a crash's leftover (put before the record's transaction): written again.
 */
async function placeAibom(
  deps: AibomDeps,
  run: AibomRun,
  digest: string,
  held: readonly string[],
): Promise<Placement | { readonly raced: ArtifactRecord }> {
  const keys = aibomKeys(run.namespace, run.id);
  const [metaBytes, blob] = await because('ObjectStoreUnavailable', () =>
    Promise.all([deps.blobs.get(keys.meta), deps.blobs.get(keys.blob)]),
  );
  const blobKey = blob !== null && aibomDigest(blob) !== digest ? keys.superseding(digest) : keys.blob;
  if (metaBytes === null) return { blobKey };
  // Another replica may have recorded the AIBOM (and written the copy) since we looked.
  const now = await because('VaultUnavailable', () => deps.vault.artifacts.get(run.id, 'aibom'));
  if (now !== null) return { raced: now };
  let prior: Partial<AibomMetadata> = {};
  try {
    prior = JSON.parse(metaBytes.toString('utf8')) as Partial<AibomMetadata>;
  } catch {
    // not JSON: described by its digest below
  }
  const priorDigest = typeof prior.digest === 'string' ? prior.digest : aibomDigest(metaBytes);
  const named = [
    ...(Array.isArray(prior.attestation_ids) ? prior.attestation_ids : []),
    ...(typeof prior.aibom_attestation_id === 'string' ? [prior.aibom_attestation_id] : []),
    ...(typeof prior.blob_attestation_id === 'string' ? [prior.blob_attestation_id] : []),
    ...viewRecordIds(prior.views),
  ]
    .filter((id) => typeof id === 'string')
    .map((id) => id.toLowerCase())
    .filter((id) => UUID.test(id));
  const holds = new Set(held.map((id) => id.toLowerCase()));
  const lost = [...new Set(named.filter((id) => !holds.has(id)))];
  const metadataKey = keys.supersededMeta(priorDigest);
  await because('ObjectStoreUnavailable', () =>
    deps.blobs.put(metadataKey, metaBytes, 'application/json', {
      kind: 'aibom-metadata',
      'run-id': run.id,
      superseded: 'true',
    }),
  );
  const { loss, created } = await because('VaultUnavailable', () =>
    deps.vault.losses.record({
      scope: 'run',
      namespace: run.namespace,
      runId: run.id,
      missingIds: lost,
      identity: {
        source: 'bucket',
        run: run.id,
        digest: priorDigest,
        aibom: prior.aibom_attestation_id ?? null,
      },
      details: {
        source: 'bucket',
        claimed: { aibom: prior as Record<string, unknown> },
        metadata_key: metadataKey,
        held: held.length,
      },
      detectedBy: CONTROLLER_ACTOR,
    }),
  );
  if (created) {
    deps.logger.error(
      { runId: run.id, lostDigest: priorDigest, lostIds: lost.length, loss: loss.id },
      'the bucket holds an AIBOM whose record the vault lost; recording a new AIBOM that supersedes it',
    );
  }
  return {
    blobKey,
    supersedes: {
      digest: priorDigest,
      key: typeof prior.key === 'string' ? prior.key : keys.blob,
      metadata_key: metadataKey,
      aibom_attestation_id:
        typeof prior.aibom_attestation_id === 'string' ? prior.aibom_attestation_id : null,
      lost_attestation_ids: lost,
      loss_id: loss.id,
      detected_at: loss.detectedAt.toISOString(),
    },
  };
}

/** Builds the AIBOM of a run from the vault: the same bytes for the controller and the CLI. */
export async function computeAibom(
  attestations: Pick<AttestationRepository, 'aibomInputs'>,
  run: AibomRun,
  override?: PolicyPackOverride,
): Promise<{ bom: Aibom; bytes: Buffer; digest: string }> {
  return aibomOf(run, await attestations.aibomInputs(run.id), override);
}

/**
 * The AIBOM of a run and its standard views, from the vault: the same bytes for the controller
 * (which records them) and `service-ctl aibom generate --format` (which recomputes them).
 */
export async function computeAibomViews(
  attestations: Pick<AttestationRepository, 'aibomInputs' | 'getMany'>,
  run: AibomRun,
): Promise<{
  bom: Aibom;
  bytes: Buffer;
  digest: string;
  views: BuiltView[];
  /** Record id → record digest of the records the AIBOM lists (what the views' evidence names). */
  recordDigests: Map<string, string>;
}> {
  const inputs = await attestations.aibomInputs(run.id);
  const aibom = aibomOf(run, inputs);
  const records = await attestations.getMany(inputs.ids);
  return {
    ...aibom,
    views: viewsOf(run, aibom.bom, aibom.digest, records),
    recordDigests: new Map([...records.values()].map((r) => [r.id, r.digest])),
  };
}

/**
 * The AIBOM of one terminal run: build → sign → C2PA manifest → object store → AIBOM
 * attestation → metadata record. Safe to run again after a crash at any point and from racing
 * replicas: the BOM bytes are deterministic (same key, same bytes), the sidecar key is
 * content-addressed (a loser's sidecar never replaces the winner's), the AIBOM attestation is
 * claimed once (`aibom:<run>`), and the metadata row is insert-once per (run, kind): whoever loses
 * adopts the stored record. Returns that record.
 */
export async function recordAibom(
  deps: AibomDeps,
  run: AibomRun,
): Promise<{ artifact: ArtifactRecord; created: boolean }> {
  const existing = await because('VaultUnavailable', () => deps.vault.artifacts.get(run.id, 'aibom'));
  if (existing) return { artifact: await adoptAibom(deps, run, existing), created: false };
  // Only the read is the vault's: a run the builder rejects is not a vault outage.
  const inputs = await because('VaultUnavailable', () => deps.vault.attestations.aibomInputs(run.id));
  const { bom, bytes, digest } = aibomOf(run, inputs);
  const placement = await placeAibom(deps, run, digest, inputs.ids);
  if ('raced' in placement) return { artifact: placement.raced, created: false };
  const listed = await because('VaultUnavailable', () => deps.vault.attestations.getMany(inputs.ids));
  const views = viewsOf(run, bom, digest, listed);
  const signed = await signAibom(deps, run, bom, bytes);
  const made: MadeAibom = {
    run,
    bom,
    bytes,
    digest,
    views,
    ...signed,
    bucket: deps.blobs.bucket,
    blobKey: placement.blobKey,
    sidecarKey: aibomKeys(run.namespace, run.id).sidecar(signed.manifest.digest),
    ...(placement.supersedes ? { supersedes: placement.supersedes } : {}),
  };
  await putAibom(deps, made);
  const batch = sealAibomBatch(deps.signer, made);
  const sig = signatureMetadata(deps.signer);
  // The AIBOM attestation, its views, the blob's artifact record, their claim and the metadata
  // record commit together: after any crash either all exist (and name the same sidecar) or none
  // does and the retry starts over.
  const { created } = await because('VaultUnavailable', () =>
    appendOnce(deps.vault.claims, aibomKey(run.id), batch, {
      enqueueTransparency: deps.enqueueTransparency === true,
      // The AIBOM attestation's DSSE signature is time-stamped after it is stored, like every
      // record's (ADR 0015); the AIBOM's own signatures were time-stamped above (ADR 0014).
      enqueueTimestamps: deps.timestamper !== undefined,
      artifact: (inserted) => ({
        runId: run.id,
        kind: 'aibom',
        namespace: run.namespace,
        objectKey: placement.blobKey,
        digest,
        metadata: aibomMetadata(made, sig, {
          aibom: inserted[0]!.id,
          views: inserted.slice(1, 1 + views.length).map((r) => r.id),
          blob: inserted[1 + views.length]!.id,
        }) as unknown as Record<string, unknown>,
      }),
    }),
  );
  const stored = await because('VaultUnavailable', () => deps.vault.artifacts.get(run.id, 'aibom'));
  if (!stored)
    throw new RecordError('VaultUnavailable', `AIBOM of run ${run.id} is claimed but has no record`);
  // With the writer on, the AIBOM attestation's job committed with it: the copy beside the blob
  // shows it `queued` with its id from the start (the transparency projection brings it up to date).
  await writeMetadataBeside(deps, stored, await transparencyOf(deps, stored));
  if (!made.supersedes) {
    const named = (stored.metadata as unknown as AibomMetadata).c2pa_manifest.key;
    await removeOrphanSidecars(
      deps.blobs,
      {
        prefix: aibomKeys(run.namespace, run.id).prefix,
        aibomDigest: digest,
        ownKey: made.sidecarKey,
        namedKey: named,
        created,
      },
      deps.logger,
    );
  }
  // The logger already binds the run's namespace/name (recorder/index.ts aibomDeps).
  deps.logger.info(
    { runId: run.id, digest, created, attestations: bom.trust.attestation_ids.length },
    'AIBOM recorded',
  );
  return { artifact: stored, created };
}

/**
 * The AIBOM the vault already holds: a crash (or an object-store outage) after its record was
 * inserted may have kept the copy beside the blob from being written: written now.
 */
async function adoptAibom(deps: AibomDeps, run: AibomRun, existing: ArtifactRecord): Promise<ArtifactRecord> {
  const meta = aibomKeys(run.namespace, run.id).meta;
  if (!(await because('ObjectStoreUnavailable', () => deps.blobs.stat(meta)))) {
    await writeMetadataBeside(deps, existing, await transparencyOf(deps, existing));
  }
  return existing;
}

/** One new AIBOM as made, signed and placed, before its records are stored. */
interface MadeAibom {
  readonly run: AibomRun;
  readonly bom: Aibom;
  readonly bytes: Buffer;
  readonly digest: string;
  readonly views: readonly BuiltView[];
  /** The runtime signature over `bytes`, base64. */
  readonly signature: string;
  readonly signatureTimestamp?: VerifiedTimestamp | undefined;
  readonly manifest: BuiltManifest & { timestamp?: VerifiedTimestamp };
  readonly bucket: string;
  readonly blobKey: string;
  readonly sidecarKey: string;
  readonly supersedes?: SupersededAibom;
}

/** The runtime signature over the AIBOM's bytes and its C2PA manifest (time-stamped with TSA_URL). */
async function signAibom(
  deps: AibomDeps,
  run: AibomRun,
  bom: Aibom,
  bytes: Buffer,
): Promise<Pick<MadeAibom, 'signature' | 'signatureTimestamp' | 'manifest'>> {
  const signatureBytes = deps.signer.sign(bytes);
  const { manifest, signatureTimestamp } = await signedManifest(
    deps,
    {
      asset: bytes,
      mimeType: AIBOM_MEDIA_TYPE,
      title: `aibom-${run.id}.json`,
      signer: deps.signer,
      attestationIds: bom.trust.attestation_ids,
      runId: run.id,
      claimGenerator: CLAIM_GENERATOR,
    },
    signatureBytes,
  );
  return { signature: signatureBytes.toString('base64'), signatureTimestamp, manifest };
}

/** The AIBOM's bytes and its C2PA sidecar into the bucket. */
async function putAibom(deps: AibomDeps, a: MadeAibom): Promise<void> {
  const small = { kind: 'aibom', 'run-id': a.run.id, status: a.bom.metadata.status, digest: a.digest };
  // Together: neither is visible before the record below names them, so their order is free.
  await because('ObjectStoreUnavailable', () =>
    Promise.all([
      deps.blobs.put(a.blobKey, a.bytes, AIBOM_MEDIA_TYPE, small),
      deps.blobs.put(a.sidecarKey, a.manifest.store, C2PA_MEDIA_TYPE, {
        ...small,
        'manifest-digest': a.manifest.digest,
      }),
    ]),
  );
}

/**
 * The AIBOM's batch of records, in the order they are stored: the AIBOM attestation, its views,
 * then the AIBOM blob's artifact record.
 */
function sealAibomBatch(signer: KeySigner, a: MadeAibom): NewAttestation[] {
  const { run, bom } = a;
  const pack = { name: bom.metadata.policy_pack, version: bom.metadata.policy_pack_version };
  const sha256 = a.digest.slice('sha256:'.length);
  const record = sealRecord(aibomStatement({ runId: run.id, bom, sha256 }), signer, {
    namespace: run.namespace,
    kind: 'aibom',
    runId: run.id,
    policyPack: pack,
    c2paManifestRef: `s3://${a.bucket}/${a.sidecarKey}`,
  });
  // The views are records of their own, signed by the same signer, stored in the same batch as
  // the AIBOM record (after it): all exist, or none, and only once per run.
  const viewRecords = sealViews(run, a.views, signer, pack);
  // The AIBOM blob is an artifact the run produced: its artifact record, stored in the same batch
  // after the views, names the bytes by their digest and their place in the bucket (where
  // placeAibom put them: content-addressed when it supersedes a lost AIBOM; docs/predicates).
  const blobRecord = sealRecord(
    artifactStatement({
      runId: run.id,
      name: 'aibom',
      mediaType: AIBOM_MEDIA_TYPE,
      sha256,
      size: a.bytes.length,
      bucket: a.bucket,
      key: a.blobKey,
    }),
    signer,
    { namespace: run.namespace, kind: 'artifact', runId: run.id, policyPack: pack },
  );
  return [record, ...viewRecords, blobRecord];
}

/** The AIBOM's metadata record, once the ids of its batch's records are known. */
function aibomMetadata(
  a: MadeAibom,
  sig: ReturnType<typeof signatureMetadata>,
  ids: { readonly aibom: string; readonly views: readonly string[]; readonly blob: string },
): AibomMetadata {
  const { run, bom, manifest } = a;
  return {
    kind: 'aibom',
    run_id: run.id,
    status: bom.metadata.status,
    trust_subjects: bom.trust.subjects,
    attestation_ids: bom.trust.attestation_ids,
    summary: summarize(bom),
    c2pa_manifest: {
      label: manifest.manifestLabel,
      digest: manifest.digest,
      bucket: a.bucket,
      key: a.sidecarKey,
      media_type: C2PA_MEDIA_TYPE,
      claim_version: 1,
      spec_version: '1.4',
      attestation_ids: bom.trust.attestation_ids,
      ...(manifest.timestamp
        ? { timestamp: { time: manifest.timestamp.genTime.toISOString(), tsa: manifest.timestamp.tsa } }
        : {}),
    },
    signature: {
      algorithm: sig.algorithm,
      key_id: sig.key_id,
      signature: a.signature,
      ...(sig.cert_chain_ref !== undefined ? { cert_chain_ref: sig.cert_chain_ref } : {}),
      ...(a.signatureTimestamp ? { timestamp: timestampMetadata(a.signatureTimestamp) } : {}),
    },
    bucket: a.bucket,
    key: a.blobKey,
    digest: a.digest,
    size: a.bytes.length,
    media_type: AIBOM_MEDIA_TYPE,
    aibom_attestation_id: ids.aibom,
    blob_attestation_id: ids.blob,
    namespace: run.namespace,
    run_name: run.name,
    views: viewMetadata(a.views, ids.views),
    ...(a.supersedes ? { supersedes: a.supersedes } : {}),
  };
}

/** First retry of a repair attempt that failed on a dependency; doubles per attempt, capped. */
const REPAIR_RETRY_MS = 1_000;
const REPAIR_RETRY_MAX_MS = 30_000;

/**
 * The recorded AIBOM bytes put back where the record says, when they are gone or were replaced:
 * the AIBOM is rebuilt from the vault (the same inputs give the same bytes, computeAibom) and put
 * back only if it hashes to the recorded digest. Null when it does not (the vault's records of the
 * run no longer give those bytes): then nothing is written.
 */
async function restoreBytes(deps: AibomDeps, record: ArtifactRecord, run: AibomRun): Promise<Buffer | null> {
  const meta = record.metadata as unknown as AibomMetadata;
  const rebuilt = await because('VaultUnavailable', () => computeAibom(deps.vault.attestations, run));
  if (rebuilt.digest !== record.digest) return null;
  await because('ObjectStoreUnavailable', () =>
    deps.blobs.put(meta.key, rebuilt.bytes, AIBOM_MEDIA_TYPE, {
      kind: 'aibom',
      'run-id': record.runId,
      status: meta.status,
      digest: record.digest,
      restored: 'true',
    }),
  );
  deps.logger.warn(
    { runId: record.runId, key: meta.key, digest: record.digest },
    'AIBOM bytes were missing or replaced in the object store: the recorded bytes are back (rebuilt from the vault)',
  );
  return rebuilt.bytes;
}

/**
 * Serves a manifest repair (vault/manifest-repairs.ts): a new C2PA manifest over the SAME bytes the
 * record names, stored under its own content-addressed key (the earlier object is left as it is),
 * then the request is closed with the new manifest (and audited) and the metadata beside the blob
 * shows it. Bytes that are gone or no longer hash to the record's digest are first rebuilt from the
 * vault and put back (`run`, restoreBytes); bytes that cannot be rebuilt are never signed: the
 * request fails for good and says why. An attempt that fails on a dependency leaves the request open,
 * due again after a backoff (what the API's Retry-After tells clients), and rethrows.
 */
export async function repairManifest(
  deps: AibomDeps,
  record: ArtifactRecord,
  repair: ManifestRepair,
  run?: AibomRun,
): Promise<{ repair: ManifestRepair; outcome: 'done' | 'failed' }> {
  const meta = record.metadata as unknown as AibomMetadata;
  try {
    let bytes = await because('ObjectStoreUnavailable', () => deps.blobs.get(meta.key));
    let digest = bytes === null ? null : aibomDigest(bytes);
    if ((bytes === null || digest !== record.digest) && run !== undefined) {
      const restored = await restoreBytes(deps, record, run);
      if (restored !== null) [bytes, digest] = [restored, record.digest];
    }
    if (bytes === null || digest !== record.digest) {
      const why =
        (bytes === null
          ? `the AIBOM bytes (${meta.key}) are missing`
          : `the AIBOM bytes (${meta.key}) hash to ${digest}, the record says ${record.digest}`) +
        (run !== undefined ? ' and the vault no longer rebuilds them' : '');
      const failed = await because('VaultUnavailable', () =>
        deps.vault.manifestRepairs.fail(repair.id, {
          error: `${why}: a manifest is only ever signed over the recorded bytes`,
          final: true,
          delayMs: 0,
        }),
      );
      deps.logger.error({ repair: repair.id, reason: why }, 'C2PA manifest cannot be repaired');
      return { repair: failed ?? repair, outcome: 'failed' };
    }
    const { manifest } = await signedManifest(deps, {
      asset: bytes,
      mimeType: AIBOM_MEDIA_TYPE,
      title: `aibom-${record.runId}.json`,
      signer: deps.signer,
      attestationIds: meta.attestation_ids,
      runId: record.runId,
      claimGenerator: CLAIM_GENERATOR,
    });
    const key = aibomKeys(record.namespace, record.runId).sidecar(manifest.digest);
    await because('ObjectStoreUnavailable', () =>
      deps.blobs.put(key, manifest.store, C2PA_MEDIA_TYPE, {
        kind: 'aibom',
        'run-id': record.runId,
        status: meta.status,
        digest: record.digest,
        'manifest-digest': manifest.digest,
        'repair-id': repair.id,
      }),
    );
    const done = await because('VaultUnavailable', () =>
      deps.vault.manifestRepairs.complete(
        repair.id,
        { key, digest: manifest.digest, label: manifest.manifestLabel },
        {
          actor: CONTROLLER_ACTOR,
          namespace: record.namespace,
          object: record.objectKey,
          attestationIds: meta.attestation_ids,
        },
      ),
    );
    const stored = await because('VaultUnavailable', () =>
      deps.vault.artifacts.get(record.runId, record.kind),
    );
    if (stored) await writeMetadataBeside(deps, stored, await transparencyOf(deps, stored));
    deps.logger.info(
      { repair: repair.id, replaces: repair.replacesDigest, digest: manifest.digest },
      'C2PA manifest re-signed',
    );
    return { repair: done ?? repair, outcome: 'done' };
  } catch (err) {
    // The queue loops' backoff without jitter: 1 s, 2 s, 4 s, … 30 s.
    const delayMs = backoffDelay(
      repair.attempts + 1,
      { baseDelayMs: REPAIR_RETRY_MS, maxDelayMs: REPAIR_RETRY_MAX_MS },
      () => 1,
    );
    await deps.vault.manifestRepairs
      .fail(repair.id, { error: (err as Error).message ?? String(err), final: false, delayMs })
      .catch(() => undefined);
    throw err;
  }
}

/**
 * Brings `aibom.meta.json` up to date with the AIBOM's transparency entry (the transparency
 * projection calls it when the entry changes: queued → published or failed).
 */
export async function refreshAibomMetadata(
  deps: Pick<AibomDeps, 'vault' | 'blobs'>,
  runId: string,
  transparency: ReturnType<typeof transparencyView>,
): Promise<void> {
  const record = await because('VaultUnavailable', () => deps.vault.artifacts.get(runId, 'aibom'));
  if (record) await writeMetadataBeside(deps, record, transparency);
}
