import { describe, expect, it } from 'vitest';
import { createBatchLoader } from '../../../src/vault/batch-loader.ts';

/** A fetch whose batches the test resolves by hand, recording what each asked for. */
function manualFetch() {
  const calls: { keys: string[]; resolve: (m: Map<string, string>) => void; reject: (e: Error) => void }[] =
    [];
  const fetch = (keys: readonly string[]) =>
    new Promise<Map<string, string>>((resolve, reject) => calls.push({ keys: [...keys], resolve, reject }));
  const answer = (i: number) => calls[i]!.resolve(new Map(calls[i]!.keys.map((k) => [k, `v:${k}`])));
  return { fetch, calls, answer };
}

const tick = () => new Promise<void>((r) => setImmediate(r));

describe('createBatchLoader', () => {
  it('sends a lone key at once and loads issued in one tick together, de-duplicated', async () => {
    const m = manualFetch();
    const loader = createBatchLoader(m.fetch);
    const a = loader.load('a');
    await tick();
    expect(m.calls.map((c) => c.keys)).toEqual([['a']]);
    m.answer(0);
    expect(await a).toBe('v:a');

    const many = ['b', 'c', 'b', 'd'].map((k) => loader.load(k));
    await tick();
    expect(m.calls[1]!.keys).toEqual(['b', 'c', 'd']);
    m.answer(1);
    expect(await Promise.all(many)).toEqual(['v:b', 'v:c', 'v:b', 'v:d']);
  });

  it('queues keys while maxInFlight batches run, then sends them as one batch of at most maxBatch', async () => {
    const m = manualFetch();
    const loader = createBatchLoader(m.fetch, { maxInFlight: 2, maxBatch: 3 });
    const first = loader.load('a');
    await tick();
    const second = loader.load('b');
    await tick();
    expect(m.calls).toHaveLength(2); // two in flight
    const waiting = ['c', 'd', 'e', 'f'].map((k) => loader.load(k));
    await tick();
    expect(m.calls).toHaveLength(2); // nothing more until one finishes
    m.answer(0);
    await first;
    await tick();
    expect(m.calls[2]!.keys).toEqual(['c', 'd', 'e']); // the oldest, maxBatch of them
    m.answer(1);
    await second;
    await tick();
    expect(m.calls[3]!.keys).toEqual(['f']);
    m.answer(2);
    m.answer(3);
    expect(await Promise.all(waiting)).toEqual(['v:c', 'v:d', 'v:e', 'v:f']);
  });

  it('resolves missing keys to undefined; a failed batch rejects its loads only', async () => {
    const m = manualFetch();
    const loader = createBatchLoader(m.fetch, { maxInFlight: 1 });
    const bad = [loader.load('x'), loader.load('y')];
    await tick();
    const later = loader.load('z');
    m.calls[0]!.reject(new Error('database down'));
    await expect(Promise.all(bad)).rejects.toThrow('database down');
    await tick();
    expect(m.calls[1]!.keys).toEqual(['z']);
    m.calls[1]!.resolve(new Map());
    expect(await later).toBeUndefined();
  });

  it('rejects nonsensical limits', () => {
    expect(() => createBatchLoader(() => Promise.resolve(new Map()), { maxBatch: 0 })).toThrow(RangeError);
    expect(() => createBatchLoader(() => Promise.resolve(new Map()), { maxInFlight: 1.5 })).toThrow(
      RangeError,
    );
  });
});
