import { aibomStatement } from '../attest/index.ts';
import { sealRecord } from '../attestor/records.ts';
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
import { getArtifact, insertArtifact, type ArtifactRecord } from '../vault/artifacts.ts';
import { appendOnce } from '../vault/claims.ts';
import type { PoolClient } from 'pg';
import type { StoredAttestation, Vault } from '../vault/index.ts';
import { aibomAttestationIds } from '../vault/runs.ts';

export const CLAIM_GENERATOR = 'aibom-vault/0.1.0';

/** Which dependency a pipeline step failed on: the Run's condition reason says it. */
export type PipelineFailure = 'VaultUnavailable' | 'ObjectStoreUnavailable';

export class PipelineError extends Error {
  readonly reason: PipelineFailure;
  constructor(reason: PipelineFailure, cause: unknown) {
    super((cause as Error)?.message ?? String(cause), { cause });
    this.name = 'PipelineError';
    this.reason = reason;
  }
}

async function on<T>(reason: PipelineFailure, fn: () => Promise<T>): Promise<T> {
  try {
    return await fn();
  } catch (err) {
    throw err instanceof PipelineError ? err : new PipelineError(reason, err);
  }
}
export const AIBOM_MEDIA_TYPE = 'application/json';

export interface AibomPipelineDeps {
  readonly vault: Vault;
  readonly blobs: BlobStore;
  /** The runtime trust signer (signs the AIBOM bytes, the C2PA claim and the AIBOM attestation). */
  readonly signer: KeySigner;
  readonly logger: Logger;
  /** Runs in the transaction of the AIBOM attestation's append (SERVICE_TRANSPARENCY_WRITER=1: enqueue). */
  readonly onAppend?: (client: PoolClient, inserted: readonly StoredAttestation[]) => Promise<void>;
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
async function writeMetadataBeside(
  deps: AibomPipelineDeps,
  run: AibomRun,
  record: ArtifactRecord,
): Promise<void> {
  await on('ObjectStoreUnavailable', () =>
    deps.blobs.put(
      aibomKeys(run.namespace, run.id).meta,
      Buffer.from(JSON.stringify(record.metadata, null, 2)),
      'application/json',
      { kind: 'aibom-metadata', 'run-id': run.id },
    ),
  );
}

/** Builds the AIBOM of a run from the vault: the same bytes for the controller and the CLI. */
export async function computeAibom(
  vault: Vault,
  run: AibomRun,
  override?: PolicyPackOverride,
): Promise<{ bom: Aibom; bytes: Buffer; digest: string }> {
  const attestationIds = await aibomAttestationIds(vault.pool, run.id);
  const bom = buildAibom({ run, attestationIds, ...(override ? { policyPackOverride: override } : {}) });
  const bytes = serializeAibom(bom);
  return { bom, bytes, digest: aibomDigest(bytes) };
}

/**
 * The AIBOM pipeline of one terminal run: build → sign → C2PA manifest → object store → AIBOM
 * attestation → metadata record. Safe to run again after a crash at any point and from racing
 * replicas: the BOM bytes are deterministic (same key, same bytes), the sidecar key is
 * content-addressed (a loser's sidecar never replaces the winner's), the AIBOM attestation is
 * claimed once (`aibom:<run>`), and the metadata row is insert-once per (run, kind): whoever loses
 * adopts the stored record. Returns that record.
 */
export async function recordAibom(deps: AibomPipelineDeps, run: AibomRun): Promise<ArtifactRecord> {
  const existing = await on('VaultUnavailable', () => getArtifact(deps.vault.pool, run.id, 'aibom'));
  if (existing) {
    // A crash (or an object-store outage) after the record was inserted may have kept the copy
    // beside the blob from being written: repair it.
    if (!(await on('ObjectStoreUnavailable', () => deps.blobs.stat(aibomKeys(run.namespace, run.id).meta)))) {
      await writeMetadataBeside(deps, run, existing);
    }
    return existing;
  }
  const { bom, bytes, digest } = await on('VaultUnavailable', () => computeAibom(deps.vault, run));
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
  await on('ObjectStoreUnavailable', async () => {
    await deps.blobs.put(keys.blob, bytes, AIBOM_MEDIA_TYPE, small);
    await deps.blobs.put(sidecarKey, manifest.store, C2PA_MEDIA_TYPE, {
      ...small,
      'manifest-digest': manifest.digest,
    });
  });

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
  const { created } = await on('VaultUnavailable', () =>
    appendOnce(deps.vault, `aibom:${run.id}`, [record], {
      onAppend: async (client, inserted) => {
        await deps.onAppend?.(client, inserted);
        await insertArtifact(client, {
          runId: run.id,
          kind: 'aibom',
          namespace: run.namespace,
          objectKey: keys.blob,
          digest,
          metadata: metadataFor(inserted[0]!.id) as unknown as Record<string, unknown>,
        });
      },
    }),
  );
  const stored = await on('VaultUnavailable', () => getArtifact(deps.vault.pool, run.id, 'aibom'));
  if (!stored)
    throw new PipelineError(
      'VaultUnavailable',
      new Error(`AIBOM of run ${run.id} is claimed but has no record`),
    );
  await writeMetadataBeside(deps, run, stored);
  deps.logger.info({ digest, created, attestations: bom.trust.attestation_ids.length }, 'AIBOM recorded');
  return stored;
}
