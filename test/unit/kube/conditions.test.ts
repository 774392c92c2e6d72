import { describe, expect, it } from 'vitest';
import {
  conditionsEqual,
  findCondition,
  formatConditionTime,
  isFalse,
  isTrue,
  removeCondition,
  setCondition,
  type Condition,
} from '../../../src/kube/conditions.ts';

const t0 = new Date('2026-01-01T00:00:00.123Z');
const t1 = new Date('2026-01-01T00:05:00.999Z');

describe('setCondition', () => {
  it('appends a new type with lastTransitionTime at second precision', () => {
    const out = setCondition(
      undefined,
      { type: 'Ready', status: 'False', reason: 'Pending', message: 'm' },
      t0,
    );
    expect(out).toEqual([
      {
        type: 'Ready',
        status: 'False',
        reason: 'Pending',
        message: 'm',
        lastTransitionTime: '2026-01-01T00:00:00Z',
      },
    ]);
  });

  it('keeps lastTransitionTime when only reason, message or generation change', () => {
    const a = setCondition(
      [],
      { type: 'Ready', status: 'False', reason: 'A', message: 'a', observedGeneration: 1 },
      t0,
    );
    const b = setCondition(
      a,
      { type: 'Ready', status: 'False', reason: 'B', message: 'b', observedGeneration: 2 },
      t1,
    );
    expect(b[0]).toEqual({
      type: 'Ready',
      status: 'False',
      reason: 'B',
      message: 'b',
      observedGeneration: 2,
      lastTransitionTime: '2026-01-01T00:00:00Z',
    });
  });

  it('moves lastTransitionTime when the status flips (including to Unknown)', () => {
    const a = setCondition([], { type: 'Ready', status: 'False', reason: 'A', message: '' }, t0);
    const b = setCondition(a, { type: 'Ready', status: 'True', reason: 'Done', message: '' }, t1);
    expect(b[0]!.lastTransitionTime).toBe('2026-01-01T00:05:00Z');
    const c = setCondition(
      b,
      { type: 'Ready', status: 'Unknown', reason: 'Lost', message: '' },
      new Date('2026-01-02T00:00:00Z'),
    );
    expect(c[0]!.lastTransitionTime).toBe('2026-01-02T00:00:00Z');
  });

  it('replaces in place, keeps other types and their order, and never mutates its input', () => {
    const input: Condition[] = [
      { type: 'A', status: 'True', reason: 'r', message: '', lastTransitionTime: 'x' },
      { type: 'B', status: 'True', reason: 'r', message: '', lastTransitionTime: 'y' },
    ];
    const frozen = structuredClone(input);
    const out = setCondition(input, { type: 'A', status: 'False', reason: 's', message: 'why' }, t0);
    expect(out.map((c) => c.type)).toEqual(['A', 'B']);
    expect(out[1]).toBe(input[1]);
    expect(input).toEqual(frozen);
  });

  it('drops observedGeneration when the new input has none (no stale generation claims)', () => {
    const a = setCondition(
      [],
      { type: 'R', status: 'True', reason: 'r', message: '', observedGeneration: 3 },
      t0,
    );
    const b = setCondition(a, { type: 'R', status: 'True', reason: 'r', message: '' }, t1);
    expect(b[0]).not.toHaveProperty('observedGeneration');
  });
});

describe('queries', () => {
  const list = setCondition(
    setCondition([], { type: 'Ready', status: 'True', reason: 'r', message: '' }, t0),
    { type: 'Degraded', status: 'False', reason: 'r', message: '' },
    t0,
  );
  it('isTrue / isFalse / findCondition', () => {
    expect(isTrue(list, 'Ready')).toBe(true);
    expect(isTrue(list, 'Degraded')).toBe(false);
    expect(isFalse(list, 'Degraded')).toBe(true);
    expect(isTrue(list, 'Missing')).toBe(false);
    expect(isFalse(undefined, 'Ready')).toBe(false);
    expect(findCondition(list, 'Ready')?.reason).toBe('r');
  });

  it('removeCondition', () => {
    expect(removeCondition(list, 'Ready').map((c) => c.type)).toEqual(['Degraded']);
    expect(removeCondition(undefined, 'Ready')).toEqual([]);
  });
});

describe('conditionsEqual', () => {
  const a = setCondition(
    setCondition([], { type: 'A', status: 'True', reason: 'r', message: 'm', observedGeneration: 1 }, t0),
    { type: 'B', status: 'False', reason: 'r', message: 'm' },
    t0,
  );
  it('ignores order (a list-map keyed by type)', () => {
    expect(conditionsEqual(a, [...a].reverse())).toBe(true);
    expect(conditionsEqual(undefined, [])).toBe(true);
  });

  it('sees any field change, and a missing or extra entry', () => {
    for (const change of [
      { status: 'False' },
      { reason: 'x' },
      { message: 'x' },
      { lastTransitionTime: '2027-01-01T00:00:00Z' },
      { observedGeneration: 2 },
    ]) {
      const b = a.map((c, i) => (i === 0 ? { ...c, ...change } : c)) as Condition[];
      expect(conditionsEqual(a, b), JSON.stringify(change)).toBe(false);
    }
    expect(conditionsEqual(a, a.slice(1))).toBe(false);
    expect(conditionsEqual(a, [a[0]!, { ...a[1]!, type: 'C' }])).toBe(false);
  });

  it('is stable across a re-set with the same input (no spurious status writes)', () => {
    const again = setCondition(
      a,
      { type: 'A', status: 'True', reason: 'r', message: 'm', observedGeneration: 1 },
      t1,
    );
    expect(conditionsEqual(a, again)).toBe(true);
  });
});

describe('formatConditionTime', () => {
  it('writes what the API server stores for metav1.Time', () => {
    expect(formatConditionTime(t1)).toBe('2026-01-01T00:05:00Z');
  });
});
