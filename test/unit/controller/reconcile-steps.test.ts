/**
 * The Run reconciler's acts, each alone (reconciler.ts): which records still need an Attestation
 * resource, how many are created, what a failure is called, and the one Event of what was recorded.
 */
import { describe, expect, it } from 'vitest';
import { EventReasons, Reasons } from '../../../src/crd/reasons.ts';
import type { Run } from '../../../src/crd/run.ts';
import type { Observed } from '../../../src/controller/run/plan.ts';
import {
  createResources,
  failureReason,
  missingResources,
  telling,
} from '../../../src/controller/run/reconciler.ts';
import { ObjectStoreError } from '../../../src/blob/store.ts';
import { RecordError } from '../../../src/recorder/errors.ts';
import type { AttestationSummary } from '../../../src/vault/index.ts';
import { runFixture } from './fixtures.ts';

const records = (n: number): AttestationSummary[] =>
  Array.from({ length: n }, (_, i) => ({
    id: `a${i}`,
    kind: 'step',
    predicateType: 'p',
    subjects: [],
    digest: `d${i}`,
  }));

const observedWith = (n: number): Observed => ({
  mirror: null,
  claimed: new Set(),
  aibom: null,
  attestations: records(n),
});

const counted = (r: Run, count: number): Run => ({ ...r, status: { ...r.status, attestations: { count } } });

/** An api whose LIST answers `existing` and counts its calls. */
function listing(existing: string[]) {
  const calls = { list: 0 };
  return {
    calls,
    api: {
      attestationIds: () => {
        calls.list++;
        return Promise.resolve(new Set(existing));
      },
    },
  };
}

describe('missingResources', () => {
  it('the records past the status count, without a LIST when within one batch', async () => {
    const { api, calls } = listing([]);
    const got = await missingResources(
      api,
      counted(runFixture(), 3),
      observedWith(5),
      { records: 64, resources: 4 },
      false,
    );
    expect(got.batch.map((a) => a.id)).toEqual(['a3', 'a4']);
    expect(got.left).toBe(false);
    expect(calls.list).toBe(0);
  });

  it('more than one batch behind: one LIST decides, a batch is taken and more is left', async () => {
    const { api, calls } = listing(['a0', 'a2', 'a4']);
    const got = await missingResources(
      api,
      counted(runFixture(), 0),
      observedWith(8),
      { records: 64, resources: 3 },
      false,
    );
    expect(calls.list).toBe(1);
    expect(got.batch.map((a) => a.id)).toEqual(['a1', 'a3', 'a5']);
    expect(got.left).toBe(true);
  });

  it('a Run being deleted gets no resources and no LIST', async () => {
    const { api, calls } = listing([]);
    const got = await missingResources(
      api,
      runFixture(),
      observedWith(100),
      { records: 64, resources: 3 },
      true,
    );
    expect(got).toEqual({ batch: [], left: false });
    expect(calls.list).toBe(0);
  });
});

describe('createResources', () => {
  it('creates each of the batch once, at most 8 at a time', async () => {
    let inFlight = 0;
    let peak = 0;
    const made: string[] = [];
    const api = {
      createAttestation: async (_run: Run, a: AttestationSummary) => {
        inFlight++;
        peak = Math.max(peak, inFlight);
        await new Promise((r) => setImmediate(r));
        made.push(a.id);
        inFlight--;
      },
    };
    await createResources(api, runFixture(), records(20));
    expect(made.sort()).toEqual(
      records(20)
        .map((a) => a.id)
        .sort(),
    );
    expect(peak).toBe(8);
  });
});

describe('failureReason', () => {
  it.each([
    [
      'a RecordError: its own code',
      new RecordError(Reasons.SignerUnavailable, 'x'),
      Reasons.SignerUnavailable,
    ],
    [
      'an object store failure',
      new ObjectStoreError('OBJECT_STORE_UNAVAILABLE', 'x'),
      Reasons.ObjectStoreUnavailable,
    ],
    [
      'a PostgreSQL connection failure',
      Object.assign(new Error('x'), { code: 'ECONNREFUSED' }),
      Reasons.VaultUnavailable,
    ],
    ['anything else', new Error('x'), Reasons.RecordingFailed],
  ])('%s', (_name, err, want) => {
    expect(failureReason(err)).toBe(want);
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
