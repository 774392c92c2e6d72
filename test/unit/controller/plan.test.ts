/**
 * plan(): what the vault holds for a Run (observed) → what one reconcile does (the plan), one row per
 * case. Pure: no seam, no clock. The reconciler's acts are tested against the fakes in
 * run-reconciler.test.ts and against the real stack in test/integration/operator/.
 */
import { describe, expect, it } from 'vitest';
import { ConditionTypes } from '../../../src/crd/reasons.ts';
import type { Run } from '../../../src/crd/run.ts';
import {
  isEmpty,
  plan,
  type Observed,
  type Plan,
  type ReconcileLimits,
} from '../../../src/controller/run/plan.ts';
import { stepKey, terminalKey } from '../../../src/recorder/index.ts';
import { mirroredStatus, type ArtifactRecord, type ManifestRepair } from '../../../src/vault/index.ts';
import { failedAt, runFixture, stepsDone, succeeded } from './fixtures.ts';

const UID = '0190a000-0000-7000-8000-000000000001';
const withUid = (r: Run): void => {
  r.metadata.uid = UID;
};

/** The mirror of `run` as the vault would hold it after an upsert. */
const mirrorOf = (run: Run): Observed['mirror'] => ({
  id: run.metadata.uid,
  namespace: run.metadata.namespace,
  name: run.metadata.name,
  spec: structuredClone(run.spec),
  status: mirroredStatus(run),
  phase: run.status?.phase ?? null,
  createdAt: new Date(0),
  updatedAt: new Date(0),
});

const repair = (state: ManifestRepair['state']): ManifestRepair => ({
  id: 'rep-1',
  runId: UID,
  kind: 'aibom',
  reason: 'invalid',
  detail: '',
  replacesKey: 'k',
  replacesDigest: 'sha256:old',
  requestedBy: 'user:alice',
  state,
  attempts: 0,
  lastError: null,
  nextAttemptAt: new Date(0),
  manifestKey: null,
  manifestDigest: null,
  manifestLabel: null,
  requestedAt: new Date(0),
  completedAt: null,
});

const aibom = (repairs: ManifestRepair[] = []): ArtifactRecord => ({
  runId: UID,
  kind: 'aibom',
  namespace: 'team-a',
  objectKey: 'aibom/x.json',
  digest: 'sha256:aibom',
  metadata: {},
  createdAt: new Date(0),
  repairs,
});

/** The status of a Run that already shows its AIBOM (AIBOMReady=True with its digest). */
const showsAibom = (r: Run): void => {
  r.status = {
    ...r.status,
    artifacts: { aibom: { digest: 'sha256:aibom' } },
    conditions: [
      {
        type: ConditionTypes.AIBOMReady,
        status: 'True',
        reason: 'AIBOMRecorded',
        message: '',
        lastTransitionTime: '2026-03-01T10:00:00Z',
      },
    ],
  };
};

const stepsOf = (r: Run, n: number): string[] => r.spec.steps.slice(0, n).map((s) => stepKey(UID, s.id));

interface Row {
  readonly name: string;
  readonly run: Run;
  /** Observed, from the Run (defaults: mirrored, nothing claimed, no AIBOM, no records). */
  readonly observed?: (run: Run) => Partial<Observed>;
  readonly limits?: ReconcileLimits;
  readonly want: Plan;
}

const NOTHING: Plan = { mirror: false, steps: [], more: false, terminal: false, aibom: false, repair: null };

// SPEC's steps: retrieve (1 capability: 2 records), summarise (1 record), post (1 record).
const rows: Row[] = [
  {
    name: 'new Run, no mirror: the mirror only',
    run: runFixture(withUid),
    observed: () => ({ mirror: null }),
    want: { ...NOTHING, mirror: true },
  },
  {
    name: 'mirror of another status: the mirror again',
    run: runFixture(withUid, stepsDone(1)),
    observed: () => ({ mirror: mirrorOf(runFixture(withUid)), claimed: new Set(stepsOf(runFixture(), 0)) }),
    want: { ...NOTHING, mirror: true, steps: ['retrieve'] },
  },
  {
    name: 'converged Running Run: nothing',
    run: runFixture(withUid, stepsDone(2)),
    observed: (r) => ({ claimed: new Set(stepsOf(r, 2)) }),
    want: NOTHING,
  },
  {
    name: 'two steps finished, none recorded: both, in spec order',
    run: runFixture(withUid, stepsDone(2)),
    want: { ...NOTHING, steps: ['retrieve', 'summarise'] },
  },
  {
    name: 'one recorded: only the other',
    run: runFixture(withUid, stepsDone(2)),
    observed: (r) => ({ claimed: new Set(stepsOf(r, 1)) }),
    want: { ...NOTHING, steps: ['summarise'] },
  },
  {
    name: 'record limit: whole steps up to the limit, more left',
    run: runFixture(withUid, succeeded),
    // retrieve: its capability, the step, its output's artifact record (3); summarise: 2; post: 2.
    limits: { records: 5, resources: 64 },
    want: { ...NOTHING, steps: ['retrieve', 'summarise'], more: true },
  },
  {
    name: 'record limit below one step: still one whole step',
    run: runFixture(withUid, succeeded),
    limits: { records: 1, resources: 64 },
    want: { ...NOTHING, steps: ['retrieve'], more: true },
  },
  {
    name: 'terminal with steps left over the limit: neither terminal records nor AIBOM yet',
    run: runFixture(withUid, succeeded),
    limits: { records: 2, resources: 64 },
    want: { ...NOTHING, steps: ['retrieve'], more: true },
  },
  {
    name: 'terminal, every step due: steps, terminal records and AIBOM in one',
    run: runFixture(withUid, succeeded),
    want: { ...NOTHING, steps: ['retrieve', 'summarise', 'post'], terminal: true, aibom: true },
  },
  {
    name: 'failed Run: its finished steps, terminal records, AIBOM',
    run: runFixture(withUid, failedAt('summarise')),
    want: { ...NOTHING, steps: ['retrieve', 'summarise'], terminal: true, aibom: true },
  },
  {
    name: 'terminal records claimed, no AIBOM: the AIBOM',
    run: runFixture(withUid, succeeded),
    observed: (r) => ({ claimed: new Set([...stepsOf(r, 3), terminalKey(UID)]) }),
    want: { ...NOTHING, aibom: true },
  },
  {
    name: 'AIBOM stored, status does not show it: the AIBOM (its status) again',
    run: runFixture(withUid, succeeded),
    observed: (r) => ({ claimed: new Set([...stepsOf(r, 3), terminalKey(UID)]), aibom: aibom() }),
    want: { ...NOTHING, aibom: true },
  },
  {
    name: 'AIBOM stored and shown: nothing',
    run: runFixture(withUid, succeeded, showsAibom),
    observed: (r) => ({ claimed: new Set([...stepsOf(r, 3), terminalKey(UID)]), aibom: aibom() }),
    want: NOTHING,
  },
  {
    name: 'queued manifest repair: the repair',
    run: runFixture(withUid, succeeded, showsAibom),
    observed: (r) => ({
      claimed: new Set([...stepsOf(r, 3), terminalKey(UID)]),
      aibom: aibom([repair('queued')]),
    }),
    want: { ...NOTHING, repair: repair('queued') },
  },
  {
    name: 'failed manifest repair: not retried by the plan',
    run: runFixture(withUid, succeeded, showsAibom),
    observed: (r) => ({
      claimed: new Set([...stepsOf(r, 3), terminalKey(UID)]),
      aibom: aibom([repair('failed')]),
    }),
    want: NOTHING,
  },
  {
    name: 'repair queued while steps are left: waits for them',
    run: runFixture(withUid, succeeded, showsAibom),
    limits: { records: 2, resources: 64 },
    observed: () => ({ aibom: aibom([repair('queued')]) }),
    want: { ...NOTHING, steps: ['retrieve'], more: true },
  },
];

describe('plan(): observed → todo', () => {
  it.each(rows)('$name', ({ run, observed, limits, want }) => {
    const seen: Observed = {
      mirror: mirrorOf(run),
      claimed: new Set(),
      aibom: null,
      attestations: [],
      ...observed?.(run),
    };
    const got = plan(run, seen, limits);
    expect(got).toEqual(want);
    expect(isEmpty(got)).toBe(want === NOTHING);
  });
});
