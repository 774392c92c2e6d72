import { randomUUID } from 'node:crypto';
import { capabilityStatement, policyStatement, stepStatement } from '../../src/attest/index.ts';
import { sealRecord } from '../../src/recorder/index.ts';
import type { Signer } from '../../src/signing/index.ts';
import type { NewAttestation, StoredAttestation } from '../../src/vault/index.ts';

/** A model step, a policy decision and a capability token of one run: three signed records. */
export function runRecords(
  signer: Signer,
  namespace: string,
  opts: { runId?: string; pack?: { name: string; version: string } } = {},
): { runId: string; records: NewAttestation[] } {
  const runId = opts.runId ?? randomUUID();
  const pack = opts.pack ?? { name: 'baseline', version: '1.0.0' };
  const capability = capabilityStatement({
    runId,
    stepId: 'summarise',
    index: 0,
    chain: [{ scope: 'model:invoke', grantedBy: 'team:lead', approvedBy: 'user:security' }],
  });
  const capId = capability.subject[0]!.name;
  const step = stepStatement({
    runId,
    stepId: 'summarise',
    kind: 'model',
    model: { name: 'gpt-x', provider: 'acme', version: '2025-01', temperature: 0.2 },
    inputs: { prompt: 'hi' },
    output: { text: 'hello' },
    phase: 'succeeded',
    startedAt: '2026-01-01T00:00:00Z',
    finishedAt: '2026-01-01T00:00:01Z',
    policyPack: pack,
  });
  const policy = policyStatement({
    runId,
    pack: pack.name,
    version: pack.version,
    guardrails: ['pii'],
    decision: 'allow',
  });
  const base = { namespace, runId, policyPack: pack };
  return {
    runId,
    records: [
      sealRecord(capability, signer, { ...base, kind: 'capability', stepId: 'summarise' }),
      sealRecord(step, signer, { ...base, kind: 'step', stepId: 'summarise', capabilityTokenIds: [capId] }),
      sealRecord(policy, signer, { ...base, kind: 'policy' }),
    ],
  };
}

/**
 * A record as the vault would return it after storing `rec` at position `seq` (fixed ids and
 * times, so bundles built from it are reproducible), with `extra` fields (e.g. a time-stamp).
 */
export function storedRecord(
  rec: NewAttestation,
  seq: number,
  extra: Partial<StoredAttestation> = {},
): StoredAttestation {
  return {
    id: `0190a5c8-0000-7000-8000-${String(seq).padStart(12, '0')}`,
    seq,
    namespace: rec.namespace,
    runId: rec.runId ?? null,
    stepId: rec.stepId ?? null,
    kind: rec.kind,
    subjects: [...rec.subjects],
    artifactDigests: [...(rec.artifactDigests ?? [])],
    predicateType: rec.predicateType,
    policyPack: rec.policyPack ?? null,
    policyVersion: rec.policyVersion ?? null,
    capabilityTokenIds: [...(rec.capabilityTokenIds ?? [])],
    envelope: rec.envelope,
    digest: rec.digest,
    prevDigest: `sha256:${'0'.repeat(64)}`,
    signature: rec.signature,
    c2paManifestRef: null,
    createdAt: new Date(Date.UTC(2026, 0, 1, 0, 0, seq)),
    ...extra,
  };
}
