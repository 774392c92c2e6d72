/**
 * The Run reconciler's steps, each alone (reconciler.ts, telling.ts, failure.ts): what a failure
 * is called, the one Event of what was recorded, how a loss is judged on the live Run, and that a
 * failure after the terminal records is written as one that happened after them. The Attestation-
 * resource step has its own tests (resources.test.ts); reconcileRun itself: run-reconciler.test.ts
 * and losses.test.ts; against the real stack: test/integration/operator/.
 */
import { describe, expect, it } from 'vitest';
import { ConditionTypes, EventReasons, Reasons } from '../../../src/crd/reasons.ts';
import type { Run } from '../../../src/crd/run.ts';
import { ObjectStoreError } from '../../../src/blob/store.ts';
import { failureReason, humanCause } from '../../../src/controller/run/failure.ts';
import { plan } from '../../../src/controller/run/plan.ts';
import { observe, recordRecords } from '../../../src/controller/run/reconciler.ts';
import { telling, type Telling } from '../../../src/controller/run/telling.ts';
import { RecordError } from '../../../src/recorder/errors.ts';
import { terminalKey } from '../../../src/recorder/index.ts';
import {
  conditionOf,
  reconcileIn,
  reconcilerDeps,
  runFixture,
  stepsDone,
  storedRun,
  succeeded,
  world,
} from './fixtures.ts';

const counted = (r: Run, count: number): Run => ({ ...r, status: { ...r.status, attestations: { count } } });

/** A Telling that keeps its lines, and the lines noted by each time it was told, instead of emitting an Event. */
function recording(): Telling & { readonly lines: string[]; readonly told: string[][] } {
  const lines: string[] = [];
  const told: string[][] = [];
  return {
    notes: lines,
    lines,
    told,
    note(line) {
      lines.push(line);
    },
    tell() {
      told.push([...lines]);
      return Promise.resolve();
    },
  };
}

describe('failureReason', () => {
  it.each([
    [
      'a RecordError: its own code',
      new RecordError(Reasons.SignerUnavailable, 'x'),
      Reasons.SignerUnavailable,
    ],
    [
      'an object store outage',
      new ObjectStoreError('OBJECT_STORE_UNAVAILABLE', 'x'),
      Reasons.ObjectStoreUnavailable,
    ],
    [
      'a PostgreSQL connection failure',
      Object.assign(new Error('x'), { code: 'ECONNREFUSED' }),
      Reasons.VaultUnavailable,
    ],
    [
      'a PostgreSQL outage one cause deep',
      new Error('query failed', { cause: Object.assign(new Error('x'), { code: '57P01' }) }),
      Reasons.VaultUnavailable,
    ],
    ['anything else', new Error('x'), Reasons.RecordingFailed],
    ['not even an Error', 'a string', Reasons.RecordingFailed],
  ])('%s', (_name, err, want) => {
    expect(failureReason(err)).toBe(want);
  });
});

describe('humanCause', () => {
  it('names what is down, then the first line of the error, at most 500 characters', () => {
    expect(humanCause(Reasons.VaultUnavailable, new Error('connect ECONNREFUSED\n  at x'))).toBe(
      'the vault (PostgreSQL) is unavailable: connect ECONNREFUSED',
    );
    expect(humanCause(Reasons.ObjectStoreUnavailable, new Error('503'))).toBe(
      'the object store is unavailable: 503',
    );
    expect(humanCause(Reasons.RecordingFailed, new Error('y'.repeat(2000)))).toBe('y'.repeat(500));
    expect(humanCause(Reasons.RecordingFailed, 'thrown string')).toBe('thrown string');
  });
});

describe('telling', () => {
  it('one Event of every line noted, under the last reason given; none when nothing was noted', async () => {
    const events: string[][] = [];
    const told = telling({
      event: (_run, type, reason, note) => {
        events.push([type, reason, note]);
        return Promise.resolve();
      },
    });
    await told.tell(runFixture());
    expect(events).toEqual([]);
    told.note('recorded 2 attestation(s) for step a');
    told.note('AIBOM sha256:x stored at k', EventReasons.AIBOMRecorded);
    await told.tell(runFixture());
    // Told once: the lines are gone.
    await told.tell(runFixture());
    expect(events).toEqual([
      [
        'Normal',
        EventReasons.AIBOMRecorded,
        'recorded 2 attestation(s) for step a; AIBOM sha256:x stored at k',
      ],
    ]);
  });
});

describe('observe', () => {
  it('a Run whose status the vault covers: judged on the cache, no live GET', async () => {
    const w = await world();
    const run = w.kube.put(runFixture(stepsDone(1)));
    await reconcileIn(w, run);
    const seen = await observe(reconcilerDeps(w), storedRun(w, run));
    expect(seen?.loss).toBeNull();
    expect(seen?.observed.attestations.length).toBeGreaterThan(0);
    expect(w.kube.requests.calls.get('GET run')).toBeUndefined();
  });

  it('a status claiming more than the vault holds: judged again on the live Run', async () => {
    const w = await world();
    const run = w.kube.put(runFixture(stepsDone(1)));
    await reconcileIn(w, run);
    const stored = storedRun(w, run);
    // A stale cached copy claims a record the vault never had; the live Run claims what it holds.
    const stale = counted(stored, stored.status!.attestations!.count! + 1);
    const seen = await observe(reconcilerDeps(w), stale);
    expect(w.kube.requests.calls.get('GET run')).toBe(1);
    expect(seen?.run.status?.attestations).toEqual(stored.status?.attestations);
    expect(seen?.loss).toBeNull();
    // The vault lost a record the live Run shows: a loss, judged on the live Run.
    w.vault.rows.splice(0, 1);
    const lost = await observe(reconcilerDeps(w), stored);
    expect(lost?.loss).not.toBeNull();
    expect(lost?.loss?.claim.count).toBe(stored.status!.attestations!.count);
  });

  it('a Run gone or replaced (another uid) while a loss is judged: null, nothing to do', async () => {
    const w = await world();
    const run = w.kube.put(runFixture(stepsDone(1)));
    await reconcileIn(w, run);
    const stored = storedRun(w, run);
    w.vault.rows.splice(0, 1);
    const replaced = {
      ...reconcilerDeps(w).api,
      live: () => Promise.resolve({ ...stored, metadata: { ...stored.metadata, uid: 'another' } }),
    };
    expect(await observe({ ...reconcilerDeps(w), api: replaced }, stored)).toBeNull();
    const gone = { ...reconcilerDeps(w).api, live: () => Promise.resolve(null) };
    expect(await observe({ ...reconcilerDeps(w), api: gone }, stored)).toBeNull();
  });
});

describe('recordRecords', () => {
  it('the mirror, the steps, the terminal records last; one line for what it created, none on a repeat', async () => {
    const w = await world();
    const run = w.kube.put(runFixture(succeeded));
    const deps = reconcilerDeps(w);
    const todo = plan(run, { mirror: null, claimed: new Set(), aibom: null, attestations: [] });
    expect(todo).toMatchObject({ mirror: true, terminal: true, more: false });
    const told = recording();
    await recordRecords(deps, run, todo, told);
    expect(w.vault.mirrors.get(run.metadata.uid)?.spec).toEqual(run.spec);
    expect(w.vault.claimed.has(terminalKey(run.metadata.uid))).toBe(true);
    // In spec order, the terminal records (the run and its policies) last.
    expect(told.lines).toEqual([
      'recorded 3 attestation(s) for step retrieve, 2 attestation(s) for step summarise, ' +
        '2 attestation(s) for step post, 3 attestation(s) for run and policies',
    ]);
    const again = recording();
    await recordRecords(deps, run, todo, again);
    expect(again.lines).toEqual([]);
  });
});

describe('a failure is written with what was known when its act began', () => {
  it('the AIBOM fails after the terminal records were stored in the same reconcile: Attested stays True', async () => {
    const w = await world();
    const run = w.kube.put(runFixture(succeeded));
    // The first put is the AIBOM blob: the terminal records are stored by then.
    w.blobs.failNext = new Error('S3 503 SlowDown');
    await expect(reconcileIn(w, run)).rejects.toThrow('SlowDown');
    const now = storedRun(w, run);
    expect(conditionOf(now, ConditionTypes.Attested)).toMatchObject({
      status: 'True',
      reason: Reasons.RunAttested,
    });
    expect(conditionOf(now, ConditionTypes.AIBOMReady)).toMatchObject({
      status: 'False',
      reason: Reasons.ObjectStoreUnavailable,
    });
    // What was recorded before the failure was told, then the Warning.
    expect(w.kube.events.map((e) => [e.type, e.reason])).toEqual([
      ['Normal', EventReasons.Attested],
      ['Warning', Reasons.ObjectStoreUnavailable],
    ]);
  });

  it('the vault cannot be read: a terminal Run says it cannot tell whether its records are stored', async () => {
    const w = await world();
    const run = w.kube.put(runFixture(succeeded));
    w.vault.failNext = new Error('connect ECONNREFUSED 127.0.0.1:5432');
    await expect(reconcileIn(w, run)).rejects.toThrow('ECONNREFUSED');
    expect(conditionOf(storedRun(w, run), ConditionTypes.Attested)).toMatchObject({
      status: 'False',
      reason: Reasons.VaultUnavailable,
    });
    expect(conditionOf(storedRun(w, run), ConditionTypes.Attested)?.message).toMatch(
      /whether its records are all in the vault cannot be read now/,
    );
  });
});
