import { aibomStatement } from '../attest/index.ts';
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
import { buildManifest, C2PA_MEDIA_TYPE } from '../c2pa/index.ts';
import type { Logger } from '../log/index.ts';
import type { KeySigner } from '../signing/index.ts';
import { signatureMetadata } from '../signing/index.ts';
import type {
  ArtifactRecord,
  ArtifactRepository,
  AttestationRepository,
  ClaimRepository,
} from '../vault/index.ts';
import { because, RecordError } from './errors.ts';
import { aibomKey } from './extract.ts';
import { appendOnce } from './once.ts';
import { sealRecord } from './seal.ts';

export const CLAIM_GENERATOR = 'aibom-vault/0.1.0';
export const AIBOM_MEDIA_TYPE = 'application/json';

/** The parts of the vault the AIBOM flow reads and writes. */
export interface AibomStore {
  readonly attestations: Pick<AttestationRepository, 'aibomInputs'>;
  readonly artifacts: Pick<ArtifactRepository, 'get'>;
  readonly claims: ClaimRepository;
}

export interface AibomDeps {
  readonly vault: AibomStore;
  readonly blobs: BlobStore;
  /** The runtime trust signer (signs the AIBOM bytes, the C2PA claim and the AIBOM attestation). */
  readonly signer: KeySigner;
  readonly logger: Logger;
  /** SERVICE_TRANSPARENCY_WRITER=1: the AIBOM attestation's SCITT job commits with it. */
  readonly enqueueTransparency?: boolean;
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
  };
  signature: { algorithm: string; key_id: string; signature: string; cert_chain_ref?: string };
  bucket: string;
  key: string;
  digest: string;
  size: number;
  media_type: string;
  aibom_attestation_id: string;
  namespace: string;
  run_name: string;
}

/** Object keys of a run's artifacts; the sidecar is content-addressed (see recordAibom). */
export function aibomKeys(namespace: string, runId: string) {
  const base = `runs/${namespace}/${runId}`;
  return {
    blob: `${base}/aibom.json`,
    meta: `${base}/aibom.meta.json`,
    sidecar: (manifestDigest: string) => `${base}/aibom.${manifestDigest.slice(7, 23)}.c2pa`,
  };
}

/** The metadata record that won (ours or an earlier writer's), as JSON beside the blob: idempotent. */
async function writeMetadataBeside(deps: AibomDeps, run: AibomRun, record: ArtifactRecord): Promise<void> {
  await because('ObjectStoreUnavailable', () =>
    deps.blobs.put(
      aibomKeys(run.namespace, run.id).meta,
      Buffer.from(JSON.stringify(record.metadata, null, 2)),
      'application/json',
      { kind: 'aibom-metadata', 'run-id': run.id },
    ),
  );
}

/** The AIBOM of a run listing `attestationIds`, its canonical bytes and their digest (pure). */
function aibomOf(
  run: AibomRun,
  attestationIds: readonly string[],
  override?: PolicyPackOverride,
): { bom: Aibom; bytes: Buffer; digest: string } {
  const bom = buildAibom({ run, attestationIds, ...(override ? { policyPackOverride: override } : {}) });
  const bytes = serializeAibom(bom);
  return { bom, bytes, digest: aibomDigest(bytes) };
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
  if (existing) {
    // A crash (or an object-store outage) after the record was inserted may have kept the copy
    // beside the blob from being written: repair it.
    if (
      !(await because('ObjectStoreUnavailable', () => deps.blobs.stat(aibomKeys(run.namespace, run.id).meta)))
    ) {
      await writeMetadataBeside(deps, run, existing);
    }
    return { artifact: existing, created: false };
  }
  // Only the read is the vault's: a run the builder rejects is not a vault outage.
  const inputs = await because('VaultUnavailable', () => deps.vault.attestations.aibomInputs(run.id));
  const { bom, bytes, digest } = aibomOf(run, inputs);
  const sha256 = digest.slice('sha256:'.length);
  const signature = deps.signer.sign(bytes).toString('base64');
  const manifest = buildManifest({
    asset: bytes,
    mimeType: AIBOM_MEDIA_TYPE,
    title: `aibom-${run.id}.json`,
    signer: deps.signer,
    attestationIds: bom.trust.attestation_ids,
    runId: run.id,
    claimGenerator: CLAIM_GENERATOR,
  });
  const keys = aibomKeys(run.namespace, run.id);
  const sidecarKey = keys.sidecar(manifest.digest);
  const small = { kind: 'aibom', 'run-id': run.id, status: bom.metadata.status, digest };
  // Together: neither is visible before the record below names them, so their order is free.
  await because('ObjectStoreUnavailable', () =>
    Promise.all([
      deps.blobs.put(keys.blob, bytes, AIBOM_MEDIA_TYPE, small),
      deps.blobs.put(sidecarKey, manifest.store, C2PA_MEDIA_TYPE, {
        ...small,
        'manifest-digest': manifest.digest,
      }),
    ]),
  );

  const statement = aibomStatement({ runId: run.id, bom, sha256 });
  const record = sealRecord(statement, deps.signer, {
    namespace: run.namespace,
    kind: 'aibom',
    runId: run.id,
    policyPack: { name: bom.metadata.policy_pack, version: bom.metadata.policy_pack_version },
    c2paManifestRef: `s3://${deps.blobs.bucket}/${sidecarKey}`,
  });
  const sig = signatureMetadata(deps.signer);
  const metadataFor = (aibomAttestationId: string): AibomMetadata => ({
    kind: 'aibom',
    run_id: run.id,
    status: bom.metadata.status,
    trust_subjects: bom.trust.subjects,
    attestation_ids: bom.trust.attestation_ids,
    summary: summarize(bom),
    c2pa_manifest: {
      label: manifest.manifestLabel,
      digest: manifest.digest,
      bucket: deps.blobs.bucket,
      key: sidecarKey,
      media_type: C2PA_MEDIA_TYPE,
      claim_version: 1,
      spec_version: '1.4',
      attestation_ids: bom.trust.attestation_ids,
    },
    signature: {
      algorithm: sig.algorithm,
      key_id: sig.key_id,
      signature,
      ...(sig.cert_chain_ref !== undefined ? { cert_chain_ref: sig.cert_chain_ref } : {}),
    },
    bucket: deps.blobs.bucket,
    key: keys.blob,
    digest,
    size: bytes.length,
    media_type: AIBOM_MEDIA_TYPE,
    aibom_attestation_id: aibomAttestationId,
    namespace: run.namespace,
    run_name: run.name,
  });
  // The AIBOM attestation, its claim and the metadata record commit together: after any crash
  // either all three exist (and name the same sidecar) or none does and the retry starts over.
  const { created } = await because('VaultUnavailable', () =>
    appendOnce(deps.vault.claims, aibomKey(run.id), [record], {
      enqueueTransparency: deps.enqueueTransparency === true,
      artifact: (inserted) => ({
        runId: run.id,
        kind: 'aibom',
        namespace: run.namespace,
        objectKey: keys.blob,
        digest,
        metadata: metadataFor(inserted[0]!.id) as unknown as Record<string, unknown>,
      }),
    }),
  );
  const stored = await because('VaultUnavailable', () => deps.vault.artifacts.get(run.id, 'aibom'));
  if (!stored)
    throw new RecordError('VaultUnavailable', `AIBOM of run ${run.id} is claimed but has no record`);
  await writeMetadataBeside(deps, run, stored);
  deps.logger.info(
    {
      run: `${run.namespace}/${run.name}`,
      runId: run.id,
      digest,
      created,
      attestations: bom.trust.attestation_ids.length,
    },
    'AIBOM recorded',
  );
  return { artifact: stored, created };
}
