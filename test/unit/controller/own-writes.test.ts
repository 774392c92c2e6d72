import { describe, expect, it } from 'vitest';
import { OwnWrites } from '../../../src/controller/run/own-writes.ts';
import type { Written } from '../../../src/controller/run/plan.ts';

const echo = (view: string): Written => ({ view, status: { phase: 'Succeeded' } });

describe('OwnWrites', () => {
  it('gives the remembered write once: the next take after it runs in full', () => {
    const w = new OwnWrites();
    w.remember('ns/a', echo('v1'));
    expect(w.take('ns/a')).toEqual(echo('v1'));
    expect(w.take('ns/a')).toBeUndefined();
    expect(w.size).toBe(0);
  });

  it('a force while a reconcile is in flight outlives the write that reconcile remembers', () => {
    const w = new OwnWrites();
    // Reconcile 1 starts, a repair is asked for, reconcile 1 writes its status.
    expect(w.take('ns/a')).toBeUndefined();
    w.force('ns/a');
    w.remember('ns/a', echo('v1'));
    // Reconcile 2 (the repair's) must not take the Run for that echo.
    expect(w.take('ns/a')).toBeUndefined();
    // The mark is consumed: reconcile 2's own write is an echo again.
    w.remember('ns/a', echo('v2'));
    expect(w.take('ns/a')).toEqual(echo('v2'));
  });

  it('a force before the reconcile starts drops what was remembered; other keys are untouched', () => {
    const w = new OwnWrites();
    w.remember('ns/a', echo('a'));
    w.remember('ns/b', echo('b'));
    w.force('ns/a');
    expect(w.take('ns/a')).toBeUndefined();
    expect(w.take('ns/b')).toEqual(echo('b'));
  });
});
