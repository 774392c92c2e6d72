import { describe, expect, it } from 'vitest';
import { StringTable } from '../../../src/kube/intern.ts';

/**
 * The cache's string table (src/kube/intern.ts): sharing must change nothing a reader sees, and
 * the table must stay within its bounds whatever comes through it. (Whether two equal strings are
 * one heap object cannot be seen from JavaScript: the memory it saves is measured by
 * `npm run bench -- memory`, docs/bench.md.)
 */
describe('StringTable', () => {
  const run = () => ({
    apiVersion: 'vault.service.dev/v1',
    kind: 'Run',
    metadata: { name: 'r', labels: { a: 'x' }, generation: 2 },
    spec: {
      steps: [{ id: 'retrieve', tool: { command: ['vector-search', '--top-k', '5'] } }],
      flag: true,
      none: null,
    },
    status: { ids: ['a', 'b', 'a'], nested: [[{ deep: 'retrieve' }]], size: 1648 },
  });

  it('gives back the same tree, in place, with every value equal', () => {
    const table = new StringTable();
    const original = run();
    const copy = structuredClone(original);
    const out = table.values(copy);
    expect(out).toBe(copy);
    expect(out).toEqual(original);
    // A second tree through the same table reads the same too.
    expect(table.values(run())).toEqual(original);
    // Each distinct string value once: the table holds no duplicates.
    const distinct = [
      'vault.service.dev/v1',
      'Run',
      'r',
      'x',
      'retrieve',
      'vector-search',
      '--top-k',
      '5',
      'a',
      'b',
    ];
    expect(table.size).toBe(distinct.length);
  });

  it('holds at most capacity strings, emptying itself when full, and still answers every string', () => {
    const table = new StringTable({ capacity: 10 });
    for (let i = 0; i < 95; i++) {
      expect(table.string(`s${i}`)).toBe(`s${i}`);
      expect(table.size).toBeLessThanOrEqual(10);
    }
    expect(table.size).toBe(5);
  });

  it('does not hold strings longer than maxLength', () => {
    const table = new StringTable({ maxLength: 4 });
    expect(table.values({ a: 'short', b: 'tiny', c: ['12345'] })).toEqual({
      a: 'short',
      b: 'tiny',
      c: ['12345'],
    });
    expect(table.size).toBe(1);
  });

  it('leaves primitives and empty containers alone', () => {
    const table = new StringTable();
    for (const v of [1, true, null, 'x', [], {}]) expect(table.values(v)).toEqual(v);
  });
});
