import {
  buildViews,
  VIEW_FORMATS,
  viewRecordOf,
  type BuiltView,
  type ViewFormat,
} from '../aibom/views/index.ts';
import type { Aibom, AibomRun } from '../aibom/index.ts';
import { viewStatement } from '../attest/index.ts';
import type { Signer } from '../signing/index.ts';
import type { NewAttestation, StoredAttestation } from '../vault/index.ts';
import { RecordError } from './errors.ts';
import { sealRecord } from './seal.ts';

/**
 * The AIBOM's standard views (src/aibom/views: CycloneDX 1.7 with CycloneDX Attestations, SPDX
 * 3.0.1) as the vault records them: built from the run, the AIBOM and the records it lists, each
 * signed as its own record (kind `artifact`, the standard's predicate type, the view as predicate)
 * in the AIBOM's own batch, so the views exist exactly when the AIBOM does, once per run.
 */

/** A recorded view, as the AIBOM metadata lists it under `views.<format>`. */
export interface ViewMetadata {
  /** The view's record. */
  attestation_id: string;
  /** `artifact:<run>:<name>` is the record's subject. */
  name: string;
  predicate_type: string;
  media_type: string;
  /** `sha256:<hex>` of the view's bytes (the JCS of the record's predicate). */
  digest: string;
  size: number;
}

/**
 * The view input from the records the AIBOM lists (`ids`, in its order), as the vault returned
 * them. A listed record the vault did not return is VaultUnavailable: the views would silently
 * cite fewer records than the AIBOM.
 */
export function viewsOf(
  run: AibomRun,
  bom: Aibom,
  aibomDigest: string,
  records: ReadonlyMap<string, StoredAttestation>,
): BuiltView[] {
  const listed = bom.trust.attestation_ids.map((id) => {
    const r = records.get(id);
    if (r === undefined) {
      throw new RecordError(
        'VaultUnavailable',
        `record ${id} of the AIBOM of run ${run.id} was not read back`,
      );
    }
    return viewRecordOf(r);
  });
  return buildViews({ run, bom, aibomDigest, records: listed });
}

/** Each view sealed as a record of the run, in VIEW_FORMAT_NAMES order. */
export function sealViews(
  run: AibomRun,
  views: readonly BuiltView[],
  signer: Signer,
  pack: { name: string; version: string },
): NewAttestation[] {
  return views.map((v) => {
    const format = VIEW_FORMATS[v.format];
    return sealRecord(
      viewStatement({
        runId: run.id,
        name: format.artifactName,
        predicateType: format.predicateType,
        document: v.document,
        sha256: v.digest.slice('sha256:'.length),
      }),
      signer,
      { namespace: run.namespace, kind: 'artifact', runId: run.id, policyPack: pack },
    );
  });
}

/** `views` of the AIBOM metadata: each view's record id (as inserted) and digest. */
export function viewMetadata(
  views: readonly BuiltView[],
  recordIds: readonly string[],
): Partial<Record<ViewFormat, ViewMetadata>> {
  return Object.fromEntries(
    views.map((v, i) => [
      v.format,
      {
        attestation_id: recordIds[i]!,
        name: VIEW_FORMATS[v.format].artifactName,
        predicate_type: VIEW_FORMATS[v.format].predicateType,
        media_type: VIEW_FORMATS[v.format].mediaType,
        digest: v.digest,
        size: v.bytes.length,
      },
    ]),
  );
}
