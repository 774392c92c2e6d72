/**
 * Runs the API server admits but the vault cannot record as they are, and Runs whose status or
 * resources the API server will not take: each ends with a clear answer (a condition or a Warning
 * Event), is not retried for ever, and never holds its own deletion (issue: Runs stuck in
 * Terminating behind the finalizer).
 */
import { describe, expect, it } from 'vitest';
import { ConditionTypes, EventReasons, FINALIZER, Reasons } from '../../../src/crd/reasons.ts';
import { runLabelValue } from '../../../src/controller/run/kube-api.ts';
import { jsonDepthOver, MAX_JSON_DEPTH, unrecordable } from '../../../src/controller/run/recordable.ts';
import { KubeApiError } from '../../../src/kube/index.ts';
import { because, RecordError } from '../../../src/recorder/errors.ts';
import {
  resetCounts,
  runFixture,
  stepsDone,
  succeeded,
  world,
  writes,
  conditionOf,
  reconcileIn,
  storedRun,
} from './fixtures.ts';

/** `value` wrapped in `depth` arrays. */
function nested(depth: number, value: unknown = 'x'): unknown {
  let v = value;
  for (let i = 0; i < depth; i++) v = [v];
  return v;
}

describe('JSON depth bound', () => {
  it('counts depth without recursion, exactly at the bound, at any depth the API server admits', () => {
    expect(jsonDepthOver('x', 0)).toBe(false);
    expect(jsonDepthOver({}, 0)).toBe(true);
    expect(jsonDepthOver(nested(MAX_JSON_DEPTH), MAX_JSON_DEPTH)).toBe(false);
    expect(jsonDepthOver(nested(MAX_JSON_DEPTH + 1), MAX_JSON_DEPTH)).toBe(true);
    // Objects and arrays alike, the deep branch anywhere among shallow ones.
    const mixed = { a: 1, b: [{ c: nested(MAX_JSON_DEPTH - 3) }], d: 'e' };
    expect(jsonDepthOver(mixed, MAX_JSON_DEPTH)).toBe(false);
    expect(jsonDepthOver({ ...mixed, z: [{ y: nested(MAX_JSON_DEPTH - 2) }] }, MAX_JSON_DEPTH)).toBe(true);
    // 10,000 levels (the API server's limit): JSON.stringify overflows long before; this does not.
    const deep = JSON.parse(`${'['.repeat(10_000)}1${']'.repeat(10_000)}`) as unknown;
    expect(() => JSON.stringify(deep)).toThrow(RangeError);
    expect(jsonDepthOver(deep, MAX_JSON_DEPTH)).toBe(true);
  });

  it('names the field of a Run that is too deep: spec inputs, a step input, a step output', () => {
    expect(unrecordable(runFixture(succeeded))).toBeNull();
    expect(unrecordable(runFixture((r) => (r.spec.inputs = { d: nested(MAX_JSON_DEPTH) })))).toMatch(
      /^spec\.inputs nests JSON more than 64 levels deep/,
    );
    expect(
      unrecordable(runFixture((r) => (r.spec.steps[1]!.inputs = { d: nested(MAX_JSON_DEPTH) }))),
    ).toMatch(/^spec\.steps\[id=summarise\]\.inputs/);
    expect(
      unrecordable(
        runFixture(stepsDone(1), (r) => (r.status!.steps![0]!.output = nested(MAX_JSON_DEPTH + 1))),
      ),
    ).toMatch(/^status\.steps\[id=retrieve\]\.output/);
    expect(
      unrecordable(runFixture(stepsDone(1), (r) => (r.status!.steps![0]!.output = nested(MAX_JSON_DEPTH)))),
    ).toBeNull();
  });
});

describe('Run reconciler: Runs it cannot record or cannot write', () => {
  it('a too-deep Run: both conditions say why, one Warning, nothing stored, no retry; deleting it is not held', async () => {
    const w = await world();
    const run = w.kube.put(runFixture(succeeded, (r) => (r.status!.steps![2]!.output = nested(200))));
    await expect(reconcileIn(w, run)).resolves.toBeUndefined();
    const shown = storedRun(w, run);
    for (const type of [ConditionTypes.Attested, ConditionTypes.AIBOMReady]) {
      expect(conditionOf(shown, type)).toMatchObject({ status: 'False', reason: Reasons.RunNotRecordable });
      expect(conditionOf(shown, type)?.message).toMatch(/^status\.steps\[id=post\]\.output nests JSON/);
    }
    expect(w.kube.events).toEqual([
      expect.objectContaining({ type: 'Warning', reason: Reasons.RunNotRecordable }),
    ]);
    expect(w.vault.rows).toHaveLength(0);

    // Again (a resync, the echo of its own write): nothing is written or told twice.
    resetCounts(w);
    await expect(reconcileIn(w, storedRun(w, run))).resolves.toBeUndefined();
    expect(writes(w)).toEqual({});

    // Deleted with the finalizer of an earlier version: it goes at once.
    w.kube.runs.get(`${run.metadata.namespace}/${run.metadata.name}`)!.metadata.finalizers = [FINALIZER];
    w.kube.runs.get(`${run.metadata.namespace}/${run.metadata.name}`)!.metadata.deletionTimestamp =
      '2026-03-01T12:00:00Z';
    await reconcileIn(w, storedRun(w, run));
    expect(storedRun(w, run).metadata.finalizers).toEqual([]);
  });

  it('steps recorded before a later step turned out too deep stay recorded and shown', async () => {
    const w = await world();
    const run = w.kube.put(runFixture(stepsDone(1)));
    await reconcileIn(w, run);
    const count = storedRun(w, run).status?.attestations?.count;
    expect(count).toBeGreaterThan(0);
    const later = w.kube.put(
      runFixture(stepsDone(2), (r) => {
        r.metadata = { ...run.metadata };
        r.status!.steps![1]!.output = nested(100);
      }),
    );
    await reconcileIn(w, later);
    expect(storedRun(w, run).status?.attestations?.count).toBe(count);
    expect(conditionOf(storedRun(w, run), ConditionTypes.AIBOMReady)?.reason).toBe(Reasons.RunNotRecordable);
  });

  it('a status the API server refuses as too large: the AIBOM is stored, a Warning says where, no retry', async () => {
    const w = await world();
    const run = w.kube.put(runFixture(succeeded));
    const api = w.kube.runApi();
    const tooLarge = {
      ...api,
      applyStatus: () =>
        Promise.reject(
          new KubeApiError(500, { message: 'etcdserver: request is too large', reason: 'InternalError' }),
        ),
    };
    await expect(reconcileIn(w, run, tooLarge)).resolves.toBeUndefined();
    expect(w.vault.rows.some((r) => r.kind === 'aibom')).toBe(true);
    const told = w.kube.events.filter((e) => e.reason === EventReasons.StatusTooLarge);
    expect(told).toHaveLength(1);
    expect(told[0]!.note).toContain(`GET /v1/runs/${run.metadata.uid}`);
    // Any other API failure is still an error, retried.
    const down = {
      ...api,
      applyStatus: () => Promise.reject(new KubeApiError(503, { message: 'unavailable' })),
    };
    const again = w.kube.put(
      runFixture(succeeded, (r) => (r.metadata = { ...run.metadata, name: 'r2', uid: crypto.randomUUID() })),
    );
    await expect(reconcileIn(w, again, down)).rejects.toThrow('unavailable');
  });

  it('a deleting Run whose resources the API server refuses: the records and AIBOM are stored, the finalizer goes', async () => {
    const w = await world();
    const run = w.kube.put(runFixture(succeeded));
    w.kube.runs.get(`${run.metadata.namespace}/${run.metadata.name}`)!.metadata.finalizers = [FINALIZER];
    w.kube.runs.get(`${run.metadata.namespace}/${run.metadata.name}`)!.metadata.deletionTimestamp =
      '2026-03-01T12:00:00Z';
    const api = w.kube.runApi();
    const refusing = {
      ...api,
      createAttestation: () =>
        Promise.reject(new KubeApiError(422, { message: 'metadata.labels: Invalid value' })),
      applyStatus: () => Promise.reject(new KubeApiError(422, { message: 'no' })),
    };
    await expect(reconcileIn(w, storedRun(w, run), refusing)).resolves.toBeUndefined();
    expect(w.vault.rows.some((r) => r.kind === 'aibom')).toBe(true);
    expect(storedRun(w, run).metadata.finalizers).toEqual([]);
  });

  it('a label value holds the name of any Run: as it is up to 63 characters, cut and hashed beyond', () => {
    expect(runLabelValue('r1')).toBe('r1');
    const name63 = 'a'.repeat(63);
    expect(runLabelValue(name63)).toBe(name63);
    const long = `${'a'.repeat(45)}.-${'b'.repeat(200)}`;
    const v = runLabelValue(long);
    expect(v).toMatch(/^[a-z0-9]([-a-z0-9_.]{0,61}[a-z0-9])?$/);
    expect(v).not.toBe(runLabelValue(`${long}c`));
    expect(v).toBe(runLabelValue(long));
  });

  it('a stack overflow while recording is RecordingFailed, never blamed on a dependency', async () => {
    const overflow = because(Reasons.VaultUnavailable, () =>
      Promise.reject(new RangeError('Maximum call stack size exceeded')),
    );
    await expect(overflow).rejects.toSatisfy(
      (e: unknown) => e instanceof RecordError && e.code === Reasons.RecordingFailed,
    );
    const outage = because(Reasons.VaultUnavailable, () => Promise.reject(new Error('connect ECONNREFUSED')));
    await expect(outage).rejects.toSatisfy(
      (e: unknown) => e instanceof RecordError && e.code === Reasons.VaultUnavailable,
    );
  });
});
