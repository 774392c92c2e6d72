import { describe, expect, it } from 'vitest';
import { safeNext } from '../../../../src/http/ui/routes.ts';

/** Where a browser goes when it follows `Location: <next>` from a page of this site. */
const followed = (next: string): URL => new URL(next, 'https://vault.example/ui/sign-in');

describe('the sign-in form`s next: a normalised path under /ui/, else /ui/runs', () => {
  it('keeps paths of the UI, with their query and fragment', () => {
    for (const next of [
      '/ui/runs',
      '/ui/runs?phase=Running&namespace=a,b',
      '/ui/runs/0190a5c8-1234-7abc-8def-0123456789ab?drawer=aibom',
      '/ui/runs/',
      '/ui/runs?next=/ui/../x#top',
    ]) {
      expect(safeNext(next), next).toBe(next);
    }
  });

  it('refuses what leaves /ui/ once a browser resolves it, other sites, and what is not plain ASCII', () => {
    const refused = [
      undefined,
      null,
      '',
      '/ui',
      '/ui/../..//evil.example',
      '/ui/../v1/runs',
      '/ui/./runs',
      '/ui/runs/..',
      '/ui/%2e%2e/v1/runs',
      '/ui/%2E./v1/runs',
      '/ui/.%2e/v1/runs',
      '/ui/%2e/runs',
      '/ui//evil.example',
      '/ui/\\evil.example',
      '/ui/runs\\..\\..\\v1',
      '//evil.example/ui/x',
      '/\\evil.example/ui/x',
      'https://evil.example/ui/runs',
      'javascript:alert(1)//ui/',
      '/v1/runs',
      '/ui/runs\u0000',
      '/ui/runs\t/x',
      '/ui/runs x',
      '/ui/ru\u00dfns',
      '/ui/\uff0e\uff0e/v1/runs',
      `/ui/${'a'.repeat(2048)}`,
    ];
    for (const next of refused) expect(safeNext(next), String(next)).toBe('/ui/runs');
  });

  it('whatever it answers, a browser following it stays on this site under /ui/', () => {
    const probes = [
      '/ui/..',
      '/ui/a/../../b',
      '/ui/%2e%2e%2f..%2fv1',
      '/ui/;/../v1',
      '/ui/a/%2E%2E/%2E%2E/v1',
    ];
    for (const next of probes) {
      const url = followed(safeNext(next));
      expect(url.origin, next).toBe('https://vault.example');
      expect(url.pathname.startsWith('/ui/'), next).toBe(true);
    }
  });
});
