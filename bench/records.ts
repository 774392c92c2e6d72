/**
 * Attestation records for the benchmarks: real statements from the project's builders, sealed
 * (signed, digested) with a real signer, in the mix a run produces (capability token, model step,
 * output artifact, policy decision).
 */
import { hash } from 'node:crypto';
import {
  artifactStatement,
  capabilityStatement,
  policyStatement,
  labelStatement,
  recordIndex,
  statementPayload,
  stepStatement,
  type RecordLabels,
  type Statement,
} from '../src/attest/index.ts';
import { sealRecord, type RecordMeta } from '../src/recorder/index.ts';
import type { Signer } from '../src/signing/index.ts';
import type { AttestationKind, NewAttestation } from '../src/vault/index.ts';

export interface RunShape {
  readonly namespace: string;
  /** Lowercase UUID. */
  readonly runId: string;
  readonly pack: { readonly name: string; readonly version: string };
}

/** Record i of a run is of kind KIND_CYCLE[i % 4], about step ⌊i / 4⌋. */
export const KIND_CYCLE = ['capability', 'step', 'artifact', 'policy'] as const satisfies AttestationKind[];

const PROMPT =
  'Summarise the quarterly incident reports for the platform team, list the three most frequent root ' +
  'causes with their ticket numbers, and propose one guardrail per cause.';

/** The statement and index metadata of record `i` of `run` (content unique per run and i). */
export function statementFor(run: RunShape, i: number): { statement: Statement; meta: RecordMeta } {
  const kind = KIND_CYCLE[i % KIND_CYCLE.length]!;
  const step = Math.floor(i / KIND_CYCLE.length);
  const stepId = `step-${step}`;
  const base = { namespace: run.namespace, runId: run.runId, policyPack: run.pack };
  const capabilityId = `capability:${run.runId}:${stepId}:0`;
  switch (kind) {
    case 'capability':
      return {
        statement: capabilityStatement({
          runId: run.runId,
          stepId,
          index: 0,
          chain: [
            { scope: 'model:invoke', grantedBy: 'team-lead', approvedBy: 'security' },
            { scope: `dataset:read:incidents-${step % 16}`, grantedBy: 'data-owner' },
          ],
        }),
        meta: { ...base, kind, stepId },
      };
    case 'step':
      return {
        statement: stepStatement({
          runId: run.runId,
          stepId,
          kind: 'model',
          model: { name: 'gpt-x', provider: 'acme', version: '2025-01', temperature: 0.2 },
          inputs: { prompt: `${PROMPT} (${i})`, documents: [`s3://reports/${step}.pdf`] },
          output: { text: `summary ${i}` },
          phase: 'succeeded',
          startedAt: '2026-01-01T00:00:00Z',
          finishedAt: '2026-01-01T00:00:01Z',
          policyPack: run.pack,
        }),
        meta: { ...base, kind, stepId, capabilityTokenIds: [capabilityId] },
      };
    case 'artifact':
      return {
        statement: artifactStatement({
          runId: run.runId,
          name: `output-${step}.json`,
          mediaType: 'application/json',
          sha256: hash('sha256', `${run.runId}:${i}`),
          size: 4096 + i,
          bucket: 'aibom-vault',
          key: `runs/${run.runId}/output-${step}.json`,
        }),
        meta: { ...base, kind, stepId },
      };
    case 'policy':
      return {
        statement: policyStatement({
          runId: run.runId,
          pack: run.pack.name,
          version: run.pack.version,
          guardrails: ['pii', 'toxicity', `budget-${step % 4}`],
          decision: 'allow',
        }),
        meta: { ...base, kind },
      };
  }
}

/** Build the statement and seal it: the full client-side path of one attestation. */
export function buildRecord(signer: Signer, run: RunShape, i: number): NewAttestation {
  const { statement, meta } = statementFor(run, i);
  return sealRecord(statement, signer, meta);
}

/**
 * A bulk-fixture row: the envelope of a real template record of the same kind, with the index
 * columns (namespace, run, step, subjects, digests) of row `k` of `run`. Signing a million rows
 * would take minutes on two cores and the read benchmarks never verify signatures, so only the
 * templates are signed: each row's statement is the template's with the row's subjects and labels
 * (what the API checks every record against, ADR 0007), under the template's signature, which
 * therefore does not verify; `digest` is made unique per row (the column is UNIQUE), so these rows
 * do not pass `verifyChain` either. Sizes and shapes are those of real records.
 */
export function fixtureRow(template: NewAttestation, run: RunShape, k: number, step: number): NewAttestation {
  const stepId = `step-${step}`;
  const capabilityId = `capability:${run.runId}:${stepId}:0`;
  const unique = hash('sha256', `${template.digest}:${k}`);
  const statement = JSON.parse(
    Buffer.from(template.envelope.payload, 'base64').toString('utf8'),
  ) as Statement;
  const templateDigest = statement.subject[0]!.digest.sha256;
  let columns: { stepId?: string; subjects: string[]; capabilityTokenIds?: string[]; subjectDigest: string };
  switch (template.kind) {
    case 'capability':
      columns = {
        stepId,
        subjects: [capabilityId],
        capabilityTokenIds: [capabilityId],
        subjectDigest: templateDigest,
      };
      break;
    case 'step':
      columns = {
        stepId,
        subjects: [`step:${run.runId}:${stepId}`],
        capabilityTokenIds: [capabilityId],
        subjectDigest: templateDigest,
      };
      break;
    case 'artifact':
      columns = {
        stepId,
        subjects: [`artifact:${run.runId}:output-${step}.json`],
        subjectDigest: hash('sha256', unique),
      };
      break;
    default:
      columns = { subjects: [`policy:${run.pack.name}@${run.pack.version}`], subjectDigest: templateDigest };
  }
  const labels: RecordLabels = {
    namespace: run.namespace,
    kind: template.kind,
    run_id: run.runId,
    ...(columns.stepId !== undefined ? { step_id: columns.stepId } : {}),
    policy_pack: run.pack.name,
    policy_version: run.pack.version,
    ...(columns.capabilityTokenIds !== undefined ? { capability_token_ids: columns.capabilityTokenIds } : {}),
  };
  statement.subject = columns.subjects.map((name) => ({ name, digest: { sha256: columns.subjectDigest } }));
  const labelled = labelStatement(statement, labels);
  const index = recordIndex(labelled, labels);
  return {
    namespace: index.namespace,
    runId: index.run_id,
    stepId: index.step_id,
    kind: template.kind,
    subjects: index.subjects,
    artifactDigests: index.artifact_digests,
    predicateType: index.predicate_type,
    policyPack: index.policy_pack,
    policyVersion: index.policy_version,
    capabilityTokenIds: index.capability_token_ids,
    envelope: { ...template.envelope, payload: statementPayload(labelled).toString('base64') },
    digest: `sha256:${unique}`,
    signature: template.signature,
  };
}
