import {
  labelStatement,
  recordIndex,
  sealStatement,
  type RecordLabels,
  type Statement,
} from '../attest/index.ts';
import type { Signer } from '../signing/index.ts';
import type { AttestationKind, NewAttestation } from '../vault/index.ts';

/** Index fields of a vault record that are not in the signed statement itself. */
export interface RecordMeta {
  readonly namespace: string;
  readonly kind: AttestationKind;
  readonly runId?: string;
  readonly stepId?: string;
  readonly policyPack?: { readonly name: string; readonly version?: string };
  /** Capability subjects (`capability:<run>:<step>:<n>`) the statement is about or was authorised by. */
  readonly capabilityTokenIds?: readonly string[];
  readonly c2paManifestRef?: string;
}

/**
 * Sign: statement → labelled statement → signed envelope → vault record. The labels (namespace,
 * kind, run, step, policy pack, capability tokens) are signed inside the statement and every index
 * column is derived from it by `recordIndex` (src/attest/labels.ts, ADR 0007), so no column the
 * vault filters or authorises by is outside the signature.
 */
export function sealRecord(statement: Statement, signer: Signer, meta: RecordMeta): NewAttestation {
  const subjects = statement.subject.map((s) => s.name);
  const labels: RecordLabels = {
    namespace: meta.namespace,
    kind: meta.kind,
    ...(meta.runId !== undefined ? { run_id: meta.runId } : {}),
    ...(meta.stepId !== undefined ? { step_id: meta.stepId } : {}),
    ...(meta.policyPack !== undefined ? { policy_pack: meta.policyPack.name } : {}),
    ...(meta.policyPack?.version !== undefined ? { policy_version: meta.policyPack.version } : {}),
    capability_token_ids: [
      ...(meta.kind === 'capability' ? subjects : []),
      ...(meta.capabilityTokenIds ?? []),
    ],
  };
  const labelled = labelStatement(statement, labels);
  const sealed = sealStatement(labelled, signer);
  const index = recordIndex(labelled, labels);
  return {
    namespace: index.namespace,
    runId: index.run_id,
    stepId: index.step_id,
    kind: meta.kind,
    subjects: index.subjects,
    artifactDigests: index.artifact_digests,
    predicateType: index.predicate_type,
    policyPack: index.policy_pack,
    policyVersion: index.policy_version,
    capabilityTokenIds: index.capability_token_ids,
    envelope: sealed.envelope,
    digest: sealed.digest,
    signature: sealed.signature,
    c2paManifestRef: meta.c2paManifestRef ?? null,
  };
}

/** Every statement of a batch sealed with one signer, in order. */
export function sealBatch(
  items: readonly { readonly statement: Statement; readonly meta: RecordMeta }[],
  signer: Signer,
): NewAttestation[] {
  return items.map((i) => sealRecord(i.statement, signer, i.meta));
}
