import { describe, expect, it } from 'vitest';
import {
  BucketRateLimiter,
  ExponentialRateLimiter,
  MaxOfRateLimiter,
  defaultControllerRateLimiter,
} from '../../../src/queue/ratelimit.ts';

describe('ExponentialRateLimiter', () => {
  it('doubles per failure of a key from 5 ms and caps at 1000 s', () => {
    const rl = new ExponentialRateLimiter();
    const delays = Array.from({ length: 20 }, () => rl.when('a'));
    expect(delays.slice(0, 5)).toEqual([5, 10, 20, 40, 80]);
    expect(delays[17]).toBe(655_360);
    expect(delays[18]).toBe(1_000_000);
    expect(rl.numRequeues('a')).toBe(20);
    // Far past where 2^n overflows, still the cap.
    for (let i = 0; i < 2000; i++) rl.when('a');
    expect(rl.when('a')).toBe(1_000_000);
  });

  it('keeps keys apart and starts over after forget', () => {
    const rl = new ExponentialRateLimiter(5, 1000);
    rl.when('a');
    rl.when('a');
    expect(rl.when('b')).toBe(5);
    rl.forget('a');
    expect(rl.numRequeues('a')).toBe(0);
    expect(rl.when('a')).toBe(5);
  });

  it('rejects nonsense bounds', () => {
    expect(() => new ExponentialRateLimiter(0, 10)).toThrow(RangeError);
    expect(() => new ExponentialRateLimiter(10, 5)).toThrow(RangeError);
  });
});

describe('BucketRateLimiter', () => {
  it('lets a burst through, then spaces requests at 1/qps, and refills with time', () => {
    let now = 0;
    const rl = new BucketRateLimiter(10, 3, () => now);
    expect([rl.when('x'), rl.when('y'), rl.when('z')]).toEqual([0, 0, 0]);
    expect(rl.when('x')).toBe(100);
    expect(rl.when('x')).toBe(200);
    now += 1000; // +10 tokens, capped at burst 3, minus the 2 owed
    expect(rl.when('x')).toBe(0);
  });
});

describe('MaxOfRateLimiter / default', () => {
  it('takes the larger delay and lets every member count the failure', () => {
    const now = 0;
    const exp = new ExponentialRateLimiter(5, 1_000_000);
    const rl = new MaxOfRateLimiter(exp, new BucketRateLimiter(1, 1, () => now));
    expect(rl.when('a')).toBe(5); // bucket had a token; exponential says 5
    expect(rl.when('b')).toBe(1000); // bucket empty: 1 s beats b's 5 ms
    expect(exp.numRequeues('b')).toBe(1);
    expect(rl.numRequeues('a')).toBe(1);
    rl.forget('a');
    expect(rl.numRequeues('a')).toBe(0);
  });

  it('defaultControllerRateLimiter matches client-go (5 ms per key, burst of 100 then 10 qps)', () => {
    const now = 0;
    const rl = defaultControllerRateLimiter(() => now);
    const first = Array.from({ length: 100 }, (_, i) => rl.when(`k${i}`));
    expect(new Set(first)).toEqual(new Set([5]));
    expect(rl.when('k100')).toBe(100);
  });
});
