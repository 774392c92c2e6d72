import { describe, expect, it } from 'vitest';
import { isUuidV7, uuidV7Time, UuidV7Generator } from '../../../src/vault/uuidv7.ts';

const T = Date.UTC(2025, 0, 2, 3, 4, 5, 678);

function bits(id: string): bigint {
  return BigInt(`0x${id.replaceAll('-', '')}`);
}

describe('UuidV7Generator', () => {
  it('lays out timestamp, version 7 and variant 10 (RFC 9562 §5.7)', () => {
    const id = new UuidV7Generator({ now: () => T }).next();
    expect(id).toMatch(/^[0-9a-f]{8}-[0-9a-f]{4}-7[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/);
    const b = bits(id);
    expect(b >> 80n).toBe(BigInt(T)); // unix_ts_ms: top 48 bits
    expect((b >> 76n) & 0xfn).toBe(7n); // ver
    expect((b >> 62n) & 0x3n).toBe(2n); // var = 0b10
    expect(uuidV7Time(id).getTime()).toBe(T);
    expect(isUuidV7(id)).toBe(true);
    expect(isUuidV7('00000000-0000-4000-8000-000000000000')).toBe(false);
  });

  it('is strictly increasing with a frozen clock, and the counter is what moves', () => {
    const gen = new UuidV7Generator({ now: () => T });
    const ids = Array.from({ length: 10_000 }, () => gen.next());
    for (let i = 1; i < ids.length; i++) expect(ids[i]! > ids[i - 1]!).toBe(true);
    // All in the same millisecond: rand_a + top of rand_b counted up by exactly one each time.
    const counter = (id: string) =>
      ((bits(id) >> 64n) & 0xfffn) * 2n ** 30n + ((bits(id) >> 32n) & 0x3fffffffn);
    expect(ids.every((id) => uuidV7Time(id).getTime() === T)).toBe(true);
    expect(counter(ids[9999]!) - counter(ids[0]!)).toBe(9999n);
    // The counter starts with its top bit clear, leaving at least 2^41 increments.
    expect(counter(ids[0]!) < 2n ** 41n).toBe(true);
  });

  it('stays increasing when the clock goes backwards', () => {
    let now = T;
    const gen = new UuidV7Generator({ now: () => now });
    const a = gen.next();
    now = T - 60_000;
    const b = gen.next();
    now = T - 120_000;
    const c = gen.next();
    expect(a < b && b < c).toBe(true);
    expect(uuidV7Time(c).getTime()).toBe(T);
    now = T + 5;
    const d = gen.next();
    expect(d > c).toBe(true);
    expect(uuidV7Time(d).getTime()).toBe(T + 5);
  });

  it('draws fresh low bits even on a frozen clock (ids are not guessable from their neighbours)', () => {
    const gen = new UuidV7Generator({ now: () => T });
    const lows = new Set(Array.from({ length: 100 }, () => gen.next().slice(-8)));
    expect(lows.size).toBeGreaterThan(90);
  });

  it('next(floor) exceeds an id from a replica whose clock is ahead', () => {
    const ahead = new UuidV7Generator({ now: () => T + 3_600_000 }).next();
    const behind = new UuidV7Generator({ now: () => T });
    const id = behind.next(ahead);
    expect(id > ahead).toBe(true);
    expect(uuidV7Time(id).getTime()).toBe(T + 3_600_000);
    expect(behind.next() > id).toBe(true);
    // A floor that is already behind changes nothing.
    const later = behind.next(`${'0'.repeat(8)}-0000-7000-8000-${'0'.repeat(12)}`);
    expect(later > id).toBe(true);
  });

  it('moves to the next millisecond when the counter overflows', () => {
    const gen = new UuidV7Generator({ now: () => T });
    const ms = T.toString(16).padStart(12, '0');
    const full = `${ms.slice(0, 8)}-${ms.slice(8)}-7fff-bfff-ffffffffffff`;
    const id = gen.next(full);
    expect(id > full).toBe(true);
    expect(uuidV7Time(id).getTime()).toBe(T + 1);
  });

  it('uses the injected randomness source', () => {
    const gen = new UuidV7Generator({ now: () => T, randomFill: (buf) => buf.fill(0) });
    const ms = T.toString(16).padStart(12, '0');
    expect(gen.next()).toBe(`${ms.slice(0, 8)}-${ms.slice(8)}-7000-8000-000000000000`);
    expect(gen.next()).toBe(`${ms.slice(0, 8)}-${ms.slice(8)}-7000-8000-000100000000`);
  });
});
