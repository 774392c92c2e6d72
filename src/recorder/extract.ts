import { isFinished, type Run, type StepSpec, type StepStatus } from '../crd/run.ts';
import { chainOf } from '../capability/chain.ts';
import {
  artifactStatement,
  canonicalJson,
  capabilityStatement,
  sha256Hex,
  policyStatement,
  type CapabilityRoot,
  runStatement,
  stepStatement,
  type Statement,
} from '../attest/index.ts';
import { DEFAULT_TEMPERATURE } from '../aibom/index.ts';
import { packContext, policyComponents, resolveStepPack } from '../policy/index.ts';
import type { RecordMeta } from './seal.ts';

/**
 * Extract: the pure translation of a Run into the statements to record. Each batch has a claim key:
 * the recorder stores a batch once per key (once.ts), however often the Run is reconciled.
 */

/** One statement with the index fields its vault record gets. */
export interface Extracted {
  readonly statement: Statement;
  readonly meta: RecordMeta;
}

export interface Batch {
  readonly key: string;
  readonly items: readonly Extracted[];
}

export const stepKey = (runId: string, stepId: string): string => `step:${runId}:${stepId}`;
export const terminalKey = (runId: string): string => `run:${runId}`;
export const aibomKey = (runId: string): string => `aibom:${runId}`;

/** The steps of `run` that finished (their status is terminal), in spec order, with that status. */
export function finishedSteps(run: Run): { step: StepSpec; status: StepStatus }[] {
  const statuses = new Map((run.status?.steps ?? []).map((s) => [s.id, s]));
  return run.spec.steps.flatMap((step) => {
    const status = statuses.get(step.id);
    return isFinished(status) ? [{ step, status }] : [];
  });
}

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

/** Name of the artifact a step's output is, within its run: `artifact:<run>:steps/<id>/output`. */
export const stepOutputName = (stepId: string): string => `steps/${stepId}/output`;

/**
 * The artifact record of a succeeded step's output (none for a failed step, which produced an
 * error, or a step that reported no output): its bytes are the JCS of the output, so its subject
 * digest is the step record's `outputDigest`, and a verifier hashes the bytes to match it.
 */
function outputArtifact(runId: string, step: StepSpec, status: StepStatus) {
  if (status.phase !== 'Succeeded' || status.output === undefined) return undefined;
  const bytes = Buffer.from(canonicalJson(status.output), 'utf8');
  return artifactStatement({
    runId,
    name: stepOutputName(step.id),
    mediaType: 'application/json',
    sha256: sha256Hex(bytes),
    size: bytes.length,
    step: step.id,
  });
}

/**
 * Capability statements of one finished step (each with its chain of authority from `root`, the
 * key that signs them), then the step statement authorised by them, then the artifact record of
 * its output (when it succeeded with one). Throws CapabilityError for a chain that widens a scope
 * or names an invalid scope or principal: the batch is then not stored at all.
 */
export function stepBatch(run: Run, step: StepSpec, status: StepStatus, root?: CapabilityRoot): Batch {
  const runId = run.metadata.uid;
  const namespace = run.metadata.namespace;
  const pack = resolveStepPack(step, packContext(run.spec));
  const capabilities = (step.capabilities ?? []).map((c, index) =>
    capabilityStatement({
      runId,
      stepId: step.id,
      index,
      chain: chainOf(c),
      ...(root !== undefined ? { root } : {}),
    }),
  );
  const capIds = capabilities.map((s) => s.subject[0]!.name);
  // The query's scope form (`capability_token: "kb:read"`) finds records indexed under `scope:<scope>`.
  const scopeIds = capabilities.map((s) => `scope:${s.predicate.chain.at(-1)!.scope}`);
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
  const artifact = outputArtifact(runId, step, status);
  return {
    key: stepKey(runId, step.id),
    items: [
      ...capabilities.map((c, i) => ({
        statement: c,
        meta: { ...meta, kind: 'capability' as const, capabilityTokenIds: [scopeIds[i]!] },
      })),
      { statement, meta: { ...meta, kind: 'step' as const, capabilityTokenIds: [...capIds, ...scopeIds] } },
      ...(artifact !== undefined
        ? [{ statement: artifact, meta: { ...meta, kind: 'artifact' as const } }]
        : []),
    ],
  };
}

/** At a terminal phase: one policy statement per pack the run used, then the run's SLSA provenance. */
export function terminalBatch(run: Run, now: Date): Batch {
  const runId = run.metadata.uid;
  const namespace = run.metadata.namespace;
  const packs = packContext(run.spec);
  const runPack = packs.run;
  const policies: Extracted[] = policyComponents(run.spec, packs).map((p) => ({
    statement: policyStatement({
      runId,
      pack: p.pack,
      version: p.version,
      guardrails: p.guardrails,
      decision: 'allow',
    }),
    meta: { namespace, runId, kind: 'policy', policyPack: { name: p.pack, version: p.version } },
  }));
  const steps = run.status?.steps ?? [];
  // By the instant, not the text: RFC 3339 admits any UTC offset, and "10:00:00+02:00" is earlier
  // than "09:00:00Z" although it sorts after it. The record keeps the pipeline's own text.
  const at = (t: string): number => Date.parse(t);
  const times = (f: 'startedAt' | 'finishedAt') =>
    steps.flatMap((s) => (s[f] ? [s[f]] : [])).sort((a, b) => at(a) - at(b) || (a < b ? -1 : a > b ? 1 : 0));
  const startedOn = times('startedAt')[0] ?? run.metadata.creationTimestamp ?? now.toISOString();
  const finishedOn = times('finishedAt').at(-1) ?? now.toISOString();
  // What the run used: the models and tools of the steps that ran (finished), not of steps a
  // Failed run never reached; externalParameters (the spec) still says what was asked for.
  const finished = new Set(steps.filter(isFinished).map((s) => s.id));
  const ran = run.spec.steps.filter((s) => finished.has(s.id));
  const provenance = runStatement({
    runId,
    spec: run.spec,
    namespace,
    policyPack: runPack,
    models: ran.flatMap((s) =>
      s.model ? [{ name: s.model.name, provider: s.model.provider, version: s.model.version }] : [],
    ),
    tools: ran.flatMap((s) => (s.tool ? [{ name: s.tool.name }] : [])),
    startedOn,
    finishedOn: at(finishedOn) < at(startedOn) ? startedOn : finishedOn,
  });
  return {
    key: terminalKey(runId),
    items: [
      ...policies,
      { statement: provenance, meta: { namespace, runId, kind: 'run', policyPack: runPack } },
    ],
  };
}
