/**
 * View inputs made the way the recorder makes them: a Run with finished steps → the recorder's own
 * statements (src/recorder/extract.ts) → records sealed by a real signer (src/recorder/seal.ts) →
 * the AIBOM listing them → the views' input. No hand-made records: digests and predicates are the
 * real ones, so the views of these runs cite what an export bundle of the same records would hold.
 */
import { aibomDigest, aibomRunOf, buildAibom, serializeAibom } from '../../src/aibom/index.ts';
import { viewRecordOf, type ViewInput } from '../../src/aibom/views/index.ts';
import type { Run, RunSpec, StepStatus } from '../../src/crd/run.ts';
import { stepBatch, terminalBatch } from '../../src/recorder/extract.ts';
import { sealRecord } from '../../src/recorder/seal.ts';
import type { Signer } from '../../src/signing/index.ts';
import type { NewAttestation } from '../../src/vault/index.ts';

/** A record as stored: what the recorder sealed, with the id the vault gave it. */
export type SealedRecord = NewAttestation & { id: string };

export interface MadeRun {
  readonly run: Run;
  readonly input: ViewInput;
  /** Every record of the run before the AIBOM, in vault order (= input.records). */
  readonly records: readonly SealedRecord[];
}

/** The id of a run's n-th record (0-based): UUIDv7-shaped and increasing, as the vault's are. */
export function recordId(n: number): string {
  return `0190f3a0-7c20-7000-8000-${(n + 1).toString(16).padStart(12, '0')}`;
}

/**
 * A terminal Run of `spec`: every step finishes (succeeded, one second apart), except that with
 * `phase: 'Failed'` the last step fails and, with `unfinished`, the steps named there never finish.
 */
export function terminalRun(
  spec: RunSpec,
  opts: {
    phase?: 'Succeeded' | 'Failed';
    uid?: string;
    namespace?: string;
    name?: string;
    unfinished?: readonly string[];
  } = {},
): Run {
  const phase = opts.phase ?? 'Succeeded';
  const start = Date.parse('2025-05-14T09:00:00Z');
  const steps: StepStatus[] = spec.steps.flatMap((s, i) => {
    if (opts.unfinished?.includes(s.id)) return [];
    const failed = phase === 'Failed' && i === spec.steps.length - 1;
    return [
      {
        id: s.id,
        phase: failed ? ('Failed' as const) : ('Succeeded' as const),
        startedAt: new Date(start + i * 1000).toISOString(),
        finishedAt: new Date(start + i * 1000 + 500).toISOString(),
        ...(failed ? { error: 'step failed' } : { output: { step: s.id } }),
      },
    ];
  });
  return {
    apiVersion: 'vault.service.dev/v1',
    kind: 'Run',
    metadata: {
      name: opts.name ?? 'run',
      namespace: opts.namespace ?? 'team-a',
      uid: opts.uid ?? '0190f3a0-7c1e-7a4b-9d2e-5f6a7b8c9d0e',
      creationTimestamp: '2025-05-14T08:59:59Z',
    },
    spec,
    status: { phase, steps },
  };
}

/** The records the recorder makes for `run` (steps in spec order, then the terminal batch). */
export function recordsOf(run: Run, signer: Signer): SealedRecord[] {
  const statuses = new Map((run.status?.steps ?? []).map((s) => [s.id, s]));
  const items = [
    ...run.spec.steps.flatMap((step) => {
      const status = statuses.get(step.id);
      return status?.phase === 'Succeeded' || status?.phase === 'Failed'
        ? stepBatch(run, step, status).items
        : [];
    }),
    ...terminalBatch(run, new Date('2025-05-14T10:00:00Z')).items,
  ];
  return items.map((i, n) => ({ ...sealRecord(i.statement, signer, i.meta), id: recordId(n) }));
}

/** The view input of a terminal run, with the records sealed by `signer`. */
export function madeRun(run: Run, signer: Signer): MadeRun {
  const records = recordsOf(run, signer);
  const aibomRun = aibomRunOf(run);
  // The steps that ran: those recordsOf gave a step record (issue 28: only they are components).
  const ranSteps = (run.status?.steps ?? [])
    .filter((s) => s.phase === 'Succeeded' || s.phase === 'Failed')
    .map((s) => s.id);
  const bom = buildAibom({ run: aibomRun, attestationIds: records.map((r) => r.id), ranSteps });
  const input: ViewInput = {
    run: aibomRun,
    bom,
    aibomDigest: aibomDigest(serializeAibom(bom)),
    records: records.map((r) =>
      viewRecordOf({
        id: r.id,
        kind: r.kind,
        digest: r.digest,
        predicateType: r.predicateType,
        stepId: r.stepId ?? null,
        envelope: r.envelope,
      }),
    ),
  };
  return { run, input, records };
}
