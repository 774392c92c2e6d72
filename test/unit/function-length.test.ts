import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { functionLengths } from '../helpers/function-lengths.ts';

/**
 * No function in src/ is longer than MAX_LINES (a factory counts with the closures it returns: that
 * is what a reader holds at once). `node hack/function-lengths.ts [limit]` lists them, longest first.
 *
 * The functions below are still longer, each with the length it had when this test was written as
 * its ceiling: none may grow, none may join them, and one split below the limit must leave the list
 * (so the list only shrinks). Most are factories of closures over one connection or state.
 */
const MAX_LINES = 150;

const NOT_YET_SPLIT: Record<string, number> = {};

describe('function length', () => {
  const root = join(import.meta.dirname, '..', '..');
  const long = functionLengths(root).filter((f) => f.lines > MAX_LINES);
  const keyOf = (f: { at: string; name: string }): string => `${f.at.split(':')[0]!} ${f.name}`;

  it(`no function in src/ over ${MAX_LINES} lines but the listed ones, and those no longer than they were`, () => {
    const over = long
      .filter((f) => f.lines > (NOT_YET_SPLIT[keyOf(f)] ?? MAX_LINES))
      .map((f) => `${f.at} ${f.name}: ${f.lines} lines`);
    expect(over).toEqual([]);
  });

  it('the list of functions not yet split holds only functions still over the limit', () => {
    const still = new Set(long.map(keyOf));
    expect(Object.keys(NOT_YET_SPLIT).filter((k) => !still.has(k))).toEqual([]);
  });

  it('measures: a function of known length is found with its name and length', () => {
    // This file's helper measured on itself: the guard would be blind if the parser found nothing.
    const all = functionLengths(root, 'test/helpers').filter((f) => f.name === 'functionLengths');
    expect(all).toHaveLength(1);
    expect(all[0]!.lines).toBeGreaterThan(10);
    expect(functionLengths(root).length).toBeGreaterThan(500);
  });
});
