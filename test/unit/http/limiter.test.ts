import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { cachingAuthorizer, type ReviewClient, type UserInfo } from '../../../src/http/auth/authorizer.ts';
import { KeyedLimiter } from '../../../src/http/auth/limiter.ts';

const tick = () => new Promise((r) => setImmediate(r));

/** Calls that finish when the test says so, counting how many run at once, per key and in all. */
function gate() {
  const inflight = new Map<string, number>();
  let total = 0;
  let maxTotal = 0;
  const maxPerKey = new Map<string, number>();
  const started: string[] = [];
  const release: Array<() => void> = [];
  const call = (key: string) => () =>
    new Promise<string>((resolve) => {
      started.push(key);
      inflight.set(key, (inflight.get(key) ?? 0) + 1);
      maxPerKey.set(key, Math.max(maxPerKey.get(key) ?? 0, inflight.get(key)!));
      total += 1;
      maxTotal = Math.max(maxTotal, total);
      release.push(() => {
        inflight.set(key, inflight.get(key)! - 1);
        total -= 1;
        resolve(key);
      });
    });
  return { call, started, release, maxPerKey, max: () => maxTotal };
}

describe('KeyedLimiter', () => {
  it('runs at most perKey calls of one key and global calls in all; the rest wait FIFO', async () => {
    const limiter = new KeyedLimiter({ perKey: 2, global: 3 });
    const g = gate();
    const results = [
      ...Array.from({ length: 6 }, () => limiter.run('hog', g.call('hog'))),
      limiter.run('alice', g.call('alice')),
      limiter.run('bob', g.call('bob')),
    ];
    await tick();
    // The hog holds its two slots; alice takes the third global one; bob waits for a global slot,
    // not behind the hog's four waiting calls.
    expect(g.started).toEqual(['hog', 'hog', 'alice']);
    g.release.shift()!();
    await tick();
    expect(g.started.slice(3)).toEqual(['bob']);
    while (g.release.length > 0) {
      g.release.shift()!();
      await tick();
    }
    expect(await Promise.all(results)).toHaveLength(8);
    expect(g.maxPerKey.get('hog')).toBe(2);
    expect(g.max()).toBe(3);
    expect(limiter.activeKeys).toBe(0);
  });

  it('property: any interleaving of calls and completions stays within both bounds and finishes every call', async () => {
    await fc.assert(
      fc.asyncProperty(
        fc.array(fc.constantFrom('a', 'b', 'c'), { minLength: 1, maxLength: 40 }),
        fc.integer({ min: 1, max: 3 }),
        fc.integer({ min: 1, max: 5 }),
        fc.array(fc.nat(), { maxLength: 80 }),
        async (keys, perKey, global, picks) => {
          const limiter = new KeyedLimiter({ perKey, global });
          const g = gate();
          const all = Promise.all(keys.map((k) => limiter.run(k, g.call(k))));
          await tick();
          for (const p of picks) {
            if (g.release.length === 0) break;
            g.release.splice(p % g.release.length, 1)[0]!();
            await tick();
          }
          while (g.release.length > 0) {
            g.release.shift()!();
            await tick();
          }
          expect(await all).toEqual(keys);
          for (const n of g.maxPerKey.values()) expect(n).toBeLessThanOrEqual(perKey);
          expect(g.max()).toBeLessThanOrEqual(global);
          expect(limiter.activeKeys).toBe(0);
        },
      ),
    );
  });

  it('refuses limits below one', () => {
    expect(() => new KeyedLimiter({ perKey: 0, global: 1 })).toThrow(RangeError);
  });
});

describe('cachingAuthorizer (in-memory review client)', () => {
  const user: UserInfo = { username: 'mallory', groups: [] };

  it('one review per distinct question within the TTL, however often or concurrently asked', async () => {
    const asked: string[] = [];
    const reviews: ReviewClient = {
      tokenReview: (t) => {
        asked.push(`token ${t}`);
        return Promise.resolve(t === 'good' ? user : null);
      },
      accessReview: (_u, a) => {
        asked.push(`access ${a.namespace}`);
        return Promise.resolve(false);
      },
    };
    const authz = cachingAuthorizer(reviews);
    await Promise.all(Array.from({ length: 20 }, () => authz.authenticate('good')));
    await Promise.all(Array.from({ length: 20 }, () => authz.authenticate('bad')));
    await Promise.all(
      Array.from({ length: 20 }, (_, i) =>
        authz.allowed(user, { namespace: `ns${i % 2}`, verb: 'list', resource: 'attestations' }),
      ),
    );
    expect(asked.sort()).toEqual(['access ns0', 'access ns1', 'token bad', 'token good']);
  });

  it('a review that failed is not cached', async () => {
    let fail = true;
    const authz = cachingAuthorizer({
      tokenReview: () => Promise.resolve(user),
      accessReview: () => (fail ? Promise.reject(new Error('down')) : Promise.resolve(true)),
    });
    const attrs = { namespace: 'a', verb: 'get', resource: 'runs' } as const;
    await expect(authz.allowed(user, attrs)).rejects.toThrow('down');
    fail = false;
    expect(await authz.allowed(user, attrs)).toBe(true);
  });
});
