import { describe, expect, it } from 'vitest';
import { ExportSlots } from '../../../src/export/slots.ts';
import { ProblemError } from '../../../src/http/problem.ts';

function refusal(fn: () => unknown): ProblemError {
  try {
    fn();
  } catch (err) {
    if (err instanceof ProblemError) return err;
    throw err;
  }
  throw new Error('expected a refusal');
}

describe('ExportSlots', () => {
  it('gives one caller at most half of the slots, and everyone together at most all of them', () => {
    const slots = new ExportSlots(4);
    expect(slots.perCaller).toBe(2);
    const a1 = slots.acquire('alice');
    slots.acquire('alice');
    const own = refusal(() => slots.acquire('alice'));
    expect(own.status).toBe(429);
    expect(own.code).toBe('EXPORT_BUSY');
    expect(own.message).toContain('at most 2 per caller');
    slots.acquire('bob');
    slots.acquire('carol');
    const all = refusal(() => slots.acquire('dave'));
    expect(all.message).toContain('at most 4 at once');
    expect(slots.inUse).toBe(4);
    a1();
    expect(slots.inUse).toBe(3);
    slots.acquire('dave');
  });

  it('releases once however often release is called', () => {
    const slots = new ExportSlots(2);
    const release = slots.acquire('alice');
    release();
    release();
    expect(slots.inUse).toBe(0);
    // alice's count is not driven below zero: she still gets exactly one slot.
    slots.acquire('alice');
    expect(() => slots.acquire('alice')).toThrow(ProblemError);
  });

  it('lets a lone caller use the only slot, and refuses bad sizes', () => {
    const one = new ExportSlots(1);
    expect(one.perCaller).toBe(1);
    one.acquire('alice');
    expect(() => one.acquire('bob')).toThrow(ProblemError);
    expect(() => new ExportSlots(0)).toThrow(RangeError);
    expect(() => new ExportSlots(1.5)).toThrow(RangeError);
  });
});
