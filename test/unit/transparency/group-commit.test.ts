import { describe, expect, it } from 'vitest';
import { groupCommit } from '../../../src/transparency/group-commit.ts';

/** A batch function that holds each batch until released, recording what each batch held. */
function gated(): {
  run: (items: number[]) => Promise<string[]>;
  batches: number[][];
  release: () => void;
  fail: (err: Error) => void;
} {
  const batches: number[][] = [];
  const waiting: { resolve: () => void; reject: (e: Error) => void }[] = [];
  return {
    batches,
    run: async (items) => {
      batches.push(items);
      await new Promise<void>((resolve, reject) => waiting.push({ resolve, reject }));
      return items.map((i) => `r${i}`);
    },
    release: () => waiting.shift()!.resolve(),
    fail: (err) => waiting.shift()!.reject(err),
  };
}

/** Lets pending promise callbacks and microtasks run. */
const settle = (): Promise<void> => new Promise((resolve) => setImmediate(resolve));

describe('groupCommit', () => {
  it('puts items of the same tick in one batch and answers each with its own result', async () => {
    const g = gated();
    const submit = groupCommit(10, g.run);
    const all = Promise.all([1, 2, 3].map(submit));
    await settle();
    expect(g.batches).toEqual([[1, 2, 3]]);
    g.release();
    expect(await all).toEqual(['r1', 'r2', 'r3']);
  });

  it('gathers items arriving during a batch into the next one, at most maxBatch each', async () => {
    const g = gated();
    const submit = groupCommit(2, g.run);
    const first = submit(1);
    await settle();
    const later = [2, 3, 4, 5, 6].map(submit);
    await settle();
    // Nothing new starts while a batch is in flight.
    expect(g.batches).toEqual([[1]]);
    g.release();
    expect(await first).toBe('r1');
    for (let i = 0; i < 3; i++) {
      await settle();
      g.release();
    }
    expect(await Promise.all(later)).toEqual(['r2', 'r3', 'r4', 'r5', 'r6']);
    expect(g.batches).toEqual([[1], [2, 3], [4, 5], [6]]);
  });

  it('rejects every item of a failed batch, and the next batch still runs', async () => {
    const g = gated();
    const submit = groupCommit(2, g.run);
    const doomed = [1, 2].map((i) => submit(i).catch((e: unknown) => e));
    await settle();
    const after = submit(3);
    g.fail(new Error('serialization failure'));
    expect(await Promise.all(doomed)).toEqual([
      new Error('serialization failure'),
      new Error('serialization failure'),
    ]);
    await settle();
    g.release();
    expect(await after).toBe('r3');
    expect(g.batches).toEqual([[1, 2], [3]]);
  });

  it('starts afresh after going idle', async () => {
    const g = gated();
    const submit = groupCommit(5, g.run);
    const a = submit(1);
    await settle();
    g.release();
    await a;
    const b = submit(2);
    await settle();
    g.release();
    expect(await b).toBe('r2');
    expect(g.batches).toEqual([[1], [2]]);
  });
});
