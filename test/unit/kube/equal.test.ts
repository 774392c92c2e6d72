import { describe, expect, it } from 'vitest';
import { jsonEqual } from '../../../src/kube/equal.ts';

describe('jsonEqual', () => {
  it('ignores key order, which JSON.stringify does not', () => {
    const a = { count: 3, runAttestationId: 'r', nested: { x: [1, { p: 1, q: 2 }], y: null } };
    const b = { nested: { y: null, x: [1, { q: 2, p: 1 }] }, runAttestationId: 'r', count: 3 };
    expect(JSON.stringify(a)).not.toBe(JSON.stringify(b));
    expect(jsonEqual(a, b)).toBe(true);
  });

  it('treats a member set to undefined as absent (it is never serialised)', () => {
    expect(jsonEqual({ a: 1, b: undefined }, { a: 1 })).toBe(true);
    expect(jsonEqual({ a: 1 }, { a: 1, b: undefined })).toBe(true);
    expect(jsonEqual({ a: undefined }, {})).toBe(true);
  });

  it('tells different values apart', () => {
    for (const [a, b] of [
      [{ a: 1 }, { a: 2 }],
      [{ a: 1 }, { a: 1, b: 2 }],
      [
        [1, 2],
        [2, 1],
      ],
      [[1], { 0: 1 }],
      [{ a: null }, {}],
      [{ a: '1' }, { a: 1 }],
      [null, {}],
      [{ a: [] }, { a: {} }],
    ] as [unknown, unknown][]) {
      expect(jsonEqual(a, b), JSON.stringify([a, b])).toBe(false);
      expect(jsonEqual(b, a), JSON.stringify([b, a])).toBe(false);
    }
  });
});
