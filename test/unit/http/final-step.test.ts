import { describe, expect, it } from 'vitest';
import { finalStepIndex } from '../../../src/http/routes/v1/runs.ts';

/** The final step of a run detail: the last to finish in the DAG (docs/api.md, "Run detail"). */
describe('finalStepIndex', () => {
  const spec = [{ id: 'a' }, { id: 'b' }, { id: 'c' }];
  const done = (id: string, finishedAt?: string, phase = 'Succeeded') => ({
    id,
    phase,
    ...(finishedAt !== undefined ? { finishedAt } : {}),
  });

  it('is the step that finished last, not the one listed last', () => {
    const status = [
      done('a', '2026-01-01T10:00:05Z'),
      done('c', '2026-01-01T10:00:01Z'),
      done('b', '2026-01-01T10:00:09Z'),
    ];
    expect(finalStepIndex(spec, status)).toBe(2);
  });

  it('compares instants, whatever UTC offset the pipeline wrote', () => {
    // 10:30+02:00 is 08:30Z: earlier than 09:00Z although it sorts after it as text.
    const status = [done('a', '2026-01-01T09:00:00Z'), done('b', '2026-01-01T10:30:00+02:00')];
    expect(finalStepIndex(spec, status)).toBe(0);
  });

  it('breaks a tie, or missing times, by spec order (a topological order of the DAG)', () => {
    const at = '2026-01-01T10:00:00Z';
    expect(finalStepIndex(spec, [done('b', at), done('a', at)])).toBe(0);
    expect(finalStepIndex(spec, [done('c'), done('a')])).toBe(0);
    // A step with a time finished after one without.
    expect(finalStepIndex(spec, [done('c'), done('a', at)])).toBe(1);
  });

  it('counts failed steps, and no unfinished one; -1 when none finished', () => {
    const status = [
      done('a', '2026-01-01T10:00:00Z'),
      done('b', '2026-01-01T10:00:03Z', 'Failed'),
      done('c', undefined, 'Running'),
    ];
    expect(finalStepIndex(spec, status)).toBe(1);
    expect(finalStepIndex(spec, [done('a', undefined, 'Pending')])).toBe(-1);
    expect(finalStepIndex(spec, [])).toBe(-1);
  });
});
