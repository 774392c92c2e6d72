import type { Run, StepSpec, StepStatus } from '../../api/run.ts';
import {
  capabilityStatement,
  policyStatement,
  runStatement,
  stepStatement,
  type Statement,
} from '../../attest/index.ts';
import { DEFAULT_TEMPERATURE, policyComponents, resolveRunPack, resolveStepPack } from '../../aibom/index.ts';
import { sealRecord } from '../../attestor/records.ts';
import type { Signer } from '../../signing/index.ts';
import type { NewAttestation } from '../../vault/index.ts';

/**
 * Pure translation of a Run into vault records. Each batch has a claim key: the controller appends
 * a batch once per key (see src/vault/claims.ts), however often it reconciles.
 */
export interface RecordBatch {
  readonly key: string;
  readonly records: NewAttestation[];
}

export const isFinished = (s: StepStatus | undefined): s is StepStatus & { phase: 'Succeeded' | 'Failed' } =>
  s?.phase === 'Succeeded' || s?.phase === 'Failed';

function stepKind(step: StepSpec) {
  if (step.model) {
    return {
      kind: 'model' as const,
      model: {
        name: step.model.name,
        provider: step.model.provider,
        version: step.model.version,
        temperature: step.model.temperature ?? DEFAULT_TEMPERATURE,
      },
    };
  }
  return {
    kind: 'tool' as const,
    tool: { name: step.tool?.name ?? step.id, command: step.tool?.command ?? [] },
  };
}

/** Capability-token records of one step, then the step record authorised by them. */
export function stepBatch(run: Run, step: StepSpec, status: StepStatus, signer: Signer): RecordBatch {
  const runId = run.metadata.uid;
  const namespace = run.metadata.namespace;
  const pack = resolveStepPack(step, resolveRunPack(run.spec));
  const capabilities = (step.capabilities ?? []).map((c, index) =>
    capabilityStatement({
      runId,
      stepId: step.id,
      index,
      chain: [{ scope: c.scope, grantedBy: c.grantedBy, approvedBy: c.approvedBy ?? null }],
    }),
  );
  const capIds = capabilities.map((s) => s.subject[0]!.name);
  const finished = status.finishedAt ?? run.metadata.creationTimestamp ?? new Date(0).toISOString();
  const statement = stepStatement({
    runId,
    stepId: step.id,
    ...stepKind(step),
    inputs: step.inputs ?? {},
    output: status.phase === 'Failed' ? { error: status.error ?? 'failed' } : (status.output ?? null),
    phase: status.phase === 'Failed' ? 'failed' : 'succeeded',
    startedAt: status.startedAt ?? finished,
    finishedAt: finished,
    policyPack: pack,
  });
  const meta = { namespace, runId, stepId: step.id, policyPack: pack };
  return {
    key: `step:${runId}:${step.id}`,
    records: [
      ...capabilities.map((c) => sealRecord(c, signer, { ...meta, kind: 'capability' })),
      sealRecord(statement, signer, { ...meta, kind: 'step', capabilityTokenIds: capIds }),
    ],
  };
}

/** At a terminal phase: one policy record per pack the run used, then the run's SLSA provenance. */
export function terminalBatch(run: Run, signer: Signer, now: Date): RecordBatch {
  const runId = run.metadata.uid;
  const namespace = run.metadata.namespace;
  const runPack = resolveRunPack(run.spec);
  const policies: Statement[] = policyComponents(run.spec, runPack).map((p) =>
    policyStatement({ runId, pack: p.pack, version: p.version, guardrails: p.guardrails, decision: 'allow' }),
  );
  const steps = run.status?.steps ?? [];
  const times = (f: 'startedAt' | 'finishedAt') => steps.flatMap((s) => (s[f] ? [s[f]] : [])).sort();
  const startedOn = times('startedAt')[0] ?? run.metadata.creationTimestamp ?? now.toISOString();
  const finishedOn = times('finishedAt').at(-1) ?? now.toISOString();
  const provenance = runStatement({
    runId,
    spec: run.spec,
    namespace,
    policyPack: runPack,
    models: run.spec.steps.flatMap((s) =>
      s.model ? [{ name: s.model.name, provider: s.model.provider, version: s.model.version }] : [],
    ),
    tools: run.spec.steps.flatMap((s) => (s.tool ? [{ name: s.tool.name }] : [])),
    startedOn,
    finishedOn: finishedOn < startedOn ? startedOn : finishedOn,
  });
  return {
    key: `run:${runId}`,
    records: [
      ...policies.map((p) => {
        const pred = p.predicate as { pack: string; version: string };
        return sealRecord(p, signer, {
          namespace,
          runId,
          kind: 'policy',
          policyPack: { name: pred.pack, version: pred.version },
        });
      }),
      sealRecord(provenance, signer, { namespace, runId, kind: 'run', policyPack: runPack }),
    ],
  };
}
