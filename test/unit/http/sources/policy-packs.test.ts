import { describe, expect, it } from 'vitest';
import { policyPackSource } from '../../../../src/http/sources/policy-packs.ts';
import type { PolicyPackResource } from '../../../../src/policy/index.ts';

const packs: PolicyPackResource[] = [
  { metadata: { name: 'baseline' }, spec: { pack: 'baseline', minimumRetention: 'P1Y', notice: 'n' } },
];

/** A stand-in for the Kubernetes client: answers or fails as told, counts calls. */
function client() {
  const c = {
    calls: 0,
    fail: false,
    release: undefined as (() => void) | undefined,
    request<T>(): Promise<T> {
      c.calls++;
      if (c.fail) return Promise.reject(new Error('API server down'));
      return new Promise<T>((resolve) => {
        c.release = () => resolve({ items: packs } as T);
      });
    },
  };
  return c;
}

describe('the PolicyPack source of the sidecar (one LIST per interval)', () => {
  it('shares one LIST between concurrent readers and reuses it within the interval', async () => {
    let now = 0;
    const c = client();
    const source = policyPackSource(c, { ttlMs: 1000, now: () => now });
    const a = source.list();
    const b = source.list();
    c.release!();
    expect(await a).toEqual(packs);
    expect(await b).toEqual(packs);
    now = 999;
    expect(await source.list()).toEqual(packs);
    expect(c.calls).toBe(1);
    now = 1000;
    const again = source.list();
    c.release!();
    await again;
    expect(c.calls).toBe(2);
  });

  it('serves the last good list when a LIST fails, and undefined (not an empty list) before any succeeded', async () => {
    let now = 0;
    const c = client();
    c.fail = true;
    const source = policyPackSource(c, { ttlMs: 10, now: () => now });
    expect(await source.list()).toBeUndefined();
    c.fail = false;
    const ok = source.list();
    c.release!();
    expect(await ok).toEqual(packs);
    now = 100;
    c.fail = true;
    expect(await source.list()).toEqual(packs);
    expect(c.calls).toBe(3);
  });
});
