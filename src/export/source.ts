import type { ExportItem, ExportSegment, ItemSigner } from './bundle.ts';
import { SEGMENT_SIZE } from './layout.ts';
import type { RecordProofs } from '../witness/proofs.ts';
import { parseCertificates } from '../signing/index.ts';
import type { AttestationFilter, StoredAttestation, Vault } from '../vault/index.ts';
import { withJob, type Audience } from '../http/views/envelope.ts';
import { currentMetadata } from '../recorder/index.ts';
import { guardStoredArtifact, type ArtifactGuardDeps } from './guard.ts';
import { viewFileOf } from './views.ts';

/**
 * Where an export's records and everything they reference come from: the vault (records, SCITT
 * jobs, signer chains, AIBOM metadata records) and the object store (AIBOM blobs and sidecars).
 * One pass over the selection (`until` fixed by the caller): segments of records with their
 * material, the next batch read from PostgreSQL while the writer works through the current one
 * (the writer collects the `.intoto.jsonl` on the way).
 */
export interface ExportSourceDeps extends ArtifactGuardDeps {
  readonly vault: Pick<
    Vault,
    'attestations' | 'transparencyJobs' | 'artifacts' | 'signers' | 'manifestRepairs'
  >;
}

export interface ExportSourceOptions {
  /** The head the selection was counted at (selectionSize). */
  readonly until: string | null;
  /** Enqueue SCITT jobs for selected records that have none (`scitt: true`). */
  readonly enqueueScitt: boolean;
  /** Who exports (a manifest repair the guard opens is asked by them). */
  readonly actor: string;
  /** Whether the exporter sees the records' positions (src/http/views/envelope.ts); a tenant does not. */
  readonly audience?: Audience;
  /** The records' tlog-proofs in the vault log (src/witness/proofs.ts); none without a checkpoint. */
  readonly tlogProofs?: RecordProofs;
  readonly segmentSize?: number;
  /** Start after this id (exclusive): with `until`, an id range (a partition's archive, src/export/archive.ts). */
  readonly after?: string | null;
}

export function exportSource(
  deps: ExportSourceDeps,
  filter: AttestationFilter,
  options: ExportSourceOptions,
) {
  const size = options.segmentSize ?? SEGMENT_SIZE;
  // Signers are few (the service's keys and one per customer namespace): resolved once each.
  const signers = new Map<string, Promise<ItemSigner | null>>();
  const signerOf = (record: StoredAttestation): Promise<ItemSigner | null> => {
    const ref = record.signature.cert_chain_ref ?? record.signature.key_id;
    const key = `${record.namespace}\n${ref}`;
    let found = signers.get(key);
    if (found === undefined) {
      found = deps.vault.signers.resolve(ref, ['', record.namespace]).then((entries) => {
        const e = entries.find((x) => x.role === 'signer') ?? entries[0];
        if (e === undefined) return null;
        const certificate = e.chainPem.includes('CERTIFICATE')
          ? parseCertificates(e.chainPem, e.certRef)[0]
          : undefined;
        return {
          ref: e.certRef,
          keyId: e.keyId,
          pem: e.chainPem,
          ...(certificate !== undefined ? { certificate } : {}),
        };
      });
      signers.set(key, found);
    }
    return found;
  };

  const aibomOf = async (record: StoredAttestation): Promise<ExportItem['aibom']> => {
    if (record.kind !== 'aibom' || record.runId === null) return undefined;
    const artifact = await deps.vault.artifacts.get(record.runId, 'aibom');
    if (artifact === null) return undefined;
    // The guard again, per artifact, as it leaves (the route checked all of them before the first byte).
    const guarded = await guardStoredArtifact(deps, artifact, options.actor);
    // The metadata as it is now: the manifest in force (after a repair) is the one exported.
    const metadata = currentMetadata(artifact) as { attestation_ids?: string[] };
    return {
      runId: record.runId,
      objectKey: artifact.objectKey,
      bytes: guarded.bytes,
      manifest: guarded.manifest ?? Buffer.alloc(0),
      metadata,
      manifestDigest: guarded.manifestDigest,
      // The ids the manifest links as verified; what the record says when it did not verify.
      attestationIds:
        guarded.attestationIds.length > 0 ? guarded.attestationIds : (metadata.attestation_ids ?? []),
    };
  };

  const segmentOf = async (batch: StoredAttestation[]): Promise<ExportSegment> => {
    const ids = batch.map((r) => r.id);
    let jobs = await deps.vault.transparencyJobs.getByAttestation(ids);
    const scittEnqueued: { attestation_id: string; job_id: string }[] = [];
    if (options.enqueueScitt) {
      const missing = ids.filter((id) => !jobs.has(id));
      if (missing.length > 0) {
        for (const j of await deps.vault.transparencyJobs.enqueue(missing)) {
          scittEnqueued.push({ attestation_id: j.attestationId, job_id: j.id });
        }
        // Only the new jobs are read back; the others were read above.
        jobs = new Map([...jobs, ...(await deps.vault.transparencyJobs.getByAttestation(missing))]);
      }
    }
    // One query for the subtrees of every proof of the segment.
    const proofs = options.tlogProofs ? await options.tlogProofs.proofs(batch.map((r) => r.seq)) : undefined;
    const items: ExportItem[] = [];
    for (const record of batch) {
      const tlogProof = proofs?.get(record.seq);
      const job = jobs.get(record.id);
      const published =
        job?.state === 'published' && job.statement !== null && job.receipt !== null
          ? { statement: job.statement, receipt: job.receipt }
          : undefined;
      const aibom = await aibomOf(record);
      items.push({
        id: record.id,
        createdAt: record.createdAt,
        namespace: record.namespace,
        envelope: record.envelope,
        // Built when its entry is written: a segment's views never live all at once.
        view: () => withJob(record, job, options.audience),
        signer: await signerOf(record),
        ...(record.timestamp !== undefined
          ? { timestamp: { signedTimestamp: record.timestamp.response.toString('base64') } }
          : {}),
        ...(published !== undefined ? { scitt: published } : {}),
        ...(tlogProof !== undefined ? { tlogProof } : {}),
        ...(aibom !== undefined ? { aibom } : {}),
        ...viewFileOf(record),
      });
    }
    return { items, scittEnqueued };
  };

  return {
    async *segments(): AsyncGenerator<ExportSegment> {
      let batch: StoredAttestation[] = [];
      for await (const r of deps.vault.attestations.stream(filter, {
        until: options.until,
        after: options.after ?? null,
        batchSize: size,
        readAhead: true,
      })) {
        batch.push(r);
        if (batch.length === size) {
          yield await segmentOf(batch);
          batch = [];
        }
      }
      if (batch.length > 0) yield await segmentOf(batch);
    },
  };
}
