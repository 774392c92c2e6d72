import { sealStatement, type Statement } from '../attest/index.ts';
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
 * Sign: statement → signed envelope → vault record. The record's subjects are the statement's subject
 * names; artifact digests are indexed for artifact and AIBOM statements, whose subject digests are
 * digests of stored bytes.
 */
export function sealRecord(statement: Statement, signer: Signer, meta: RecordMeta): NewAttestation {
  const sealed = sealStatement(statement, signer);
  const subjects = statement.subject.map((s) => s.name);
  const artifactDigests =
    meta.kind === 'artifact' || meta.kind === 'aibom'
      ? statement.subject.flatMap((s) => (s.digest.sha256 !== undefined ? [`sha256:${s.digest.sha256}`] : []))
      : [];
  const capabilityTokenIds = [
    ...(meta.kind === 'capability' ? subjects : []),
    ...(meta.capabilityTokenIds ?? []),
  ];
  return {
    namespace: meta.namespace,
    runId: meta.runId ?? null,
    stepId: meta.stepId ?? null,
    kind: meta.kind,
    subjects,
    artifactDigests,
    predicateType: statement.predicateType,
    policyPack: meta.policyPack?.name ?? null,
    policyVersion: meta.policyPack?.version ?? null,
    capabilityTokenIds: [...new Set(capabilityTokenIds)],
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
