import { describe, expect, it } from 'vitest';
import { TransparencyError } from '../../../src/transparency/errors.ts';
import { entryIdOf } from '../../../src/transparency/scrapi-client.ts';
import {
  describeAnswer,
  locationOf,
  request,
  verdictOf,
  wireOf,
  type Answer,
} from '../../../src/transparency/scrapi-wire.ts';
import { encodeProblemDetails } from '../../../src/transparency/problem-details.ts';
import { leafHash } from '../../../src/transparency/merkle.ts';
import { entryOf } from '../../../src/transparency/receipt.ts';
import { signedStatement, statementSigner } from './fixtures.ts';

// The pieces of the SCRAPI client on their own: what an answer means to the retry loop, how a
// request is retried (over an injected fetch: the schedule is the logic under test; the client
// against a real service is test/integration/transparency/scrapi.test.ts), and how entries are named.

const NOW = Date.parse('2026-01-01T00:00:00Z');

function answer(
  status: number,
  headers: Record<string, string> = {},
  body: Buffer = Buffer.alloc(0),
): Answer {
  return { status, headers: new Headers(headers), body, url: 'https://ts.example/a/entries' };
}

describe('verdictOf', () => {
  it('hands every status but 429 and 5xx back to the caller', () => {
    for (const status of [200, 201, 202, 302, 303, 400, 404, 409, 499]) {
      expect(verdictOf(answer(status, { 'retry-after': '3' }), NOW)).toEqual({ retry: false });
    }
  });

  it('retries 429 and 503 after their Retry-After, other 5xx without one', () => {
    expect(verdictOf(answer(429, { 'retry-after': '7' }), NOW)).toEqual({
      retry: true,
      last: 'HTTP 429',
      retryAfterMs: 7000,
    });
    expect(verdictOf(answer(503, { 'retry-after': 'Thu, 01 Jan 2026 00:00:30 GMT' }), NOW)).toMatchObject({
      retry: true,
      retryAfterMs: 30_000,
    });
    // A 500 or 502 naming a Retry-After is not asking us to wait for it: backoff decides.
    expect(verdictOf(answer(500, { 'retry-after': '7' }), NOW)).toMatchObject({
      retry: true,
      retryAfterMs: undefined,
    });
    expect(verdictOf(answer(502, { 'retry-after': '7' }), NOW)).toMatchObject({
      retry: true,
      retryAfterMs: undefined,
    });
    expect(verdictOf(answer(429, { 'retry-after': 'later' }), NOW)).toMatchObject({
      retryAfterMs: undefined,
    });
  });
});

describe('describeAnswer', () => {
  it('names the status, and the title and detail of an RFC 9290 problem', () => {
    const problem = encodeProblemDetails({ title: 'Bad Statement', detail: 'no x5chain' });
    expect(
      describeAnswer(answer(400, { 'content-type': 'application/concise-problem-details+cbor' }, problem)),
    ).toBe('HTTP 400 (Bad Statement: no x5chain)');
    // The same bytes under another media type are not read as a problem.
    expect(describeAnswer(answer(400, { 'content-type': 'application/cbor' }, problem))).toBe('HTTP 400');
    expect(
      describeAnswer(
        answer(500, { 'content-type': 'application/concise-problem-details+cbor' }, Buffer.from('not cbor')),
      ),
    ).toBe('HTTP 500');
  });
});

describe('locationOf', () => {
  it('resolves a relative Location against the answer URL, and is undefined without one', () => {
    expect(locationOf(answer(303, { location: 'entries/abc' }))?.toString()).toBe(
      'https://ts.example/a/entries/abc',
    );
    expect(locationOf(answer(303, { location: '/x/1' }))?.toString()).toBe('https://ts.example/x/1');
    expect(locationOf(answer(303, { location: 'https://other.example/e/2' }))?.toString()).toBe(
      'https://other.example/e/2',
    );
    expect(locationOf(answer(303))).toBeUndefined();
    expect(locationOf(answer(303, { location: '' }))).toBeUndefined();
  });

  it('refuses a Location that is no URL with BAD_RESPONSE', () => {
    expect(() => locationOf(answer(303, { location: 'http://[::1' }))).toThrow(
      expect.objectContaining({ code: 'BAD_RESPONSE' }),
    );
  });
});

/** A fetch answering from a script, one response per call, recording the calls. */
function scripted(script: (() => Response)[]): { fetch: typeof fetch; calls: number } {
  const state = { calls: 0 };
  // A throw inside the executor rejects: a scripted network error.
  const fetchFn = ((): Promise<Response> =>
    new Promise((resolve) => {
      const next = script[state.calls++];
      if (next === undefined) throw new Error('the script ran out');
      resolve(next());
    })) as typeof fetch;
  return {
    fetch: fetchFn,
    get calls() {
      return state.calls;
    },
  };
}

/** A sleep that returns at once, writing down what it was asked to wait. */
const record =
  (slept: number[]) =>
  (ms: number): Promise<void> => {
    slept.push(ms);
    return Promise.resolve();
  };

const call = {
  method: 'GET',
  url: new URL('https://ts.example/entries/1'),
  accept: 'application/cose',
} as const;

describe('request', () => {
  it('retries network errors and 5xx with backoff, then returns the first other answer', async () => {
    const slept: number[] = [];
    const s = scripted([
      () => {
        throw new TypeError('fetch failed');
      },
      () => new Response(null, { status: 502 }),
      () => new Response('ok', { status: 200 }),
    ]);
    const wire = wireOf({
      fetch: s.fetch,
      sleep: record(slept),
      random: () => 1,
      baseDelayMs: 100,
      maxDelayMs: 150,
    });
    const got = await request(wire, call);
    expect(got.status).toBe(200);
    expect(got.body.toString()).toBe('ok');
    expect(s.calls).toBe(3);
    // base·2^(n−1) capped at max; equal jitter (half fixed, half random) is the whole at random() = 1.
    expect(slept).toEqual([100, 150]);
  });

  it('waits a short Retry-After inline and hands a long one to the caller without sleeping', async () => {
    const slept: number[] = [];
    const short = scripted([
      () => new Response(null, { status: 429, headers: { 'retry-after': '2' } }),
      () => new Response(null, { status: 404 }),
    ]);
    const wire = wireOf({ fetch: short.fetch, sleep: record(slept) });
    expect((await request(wire, call)).status).toBe(404);
    expect(slept).toEqual([2000]);

    const long = scripted([() => new Response(null, { status: 503, headers: { 'retry-after': '120' } })]);
    const err = await request(wireOf({ fetch: long.fetch, sleep: record(slept) }), call).catch(
      (e: unknown) => e,
    );
    expect(err).toBeInstanceOf(TransparencyError);
    expect(err).toMatchObject({ code: 'REMOTE_UNAVAILABLE', retryAfterMs: 120_000 });
    expect(long.calls).toBe(1);
    expect(slept).toEqual([2000]);
  });

  it('gives up after maxAttempts with the last failure and its Retry-After', async () => {
    const s = scripted(
      Array.from(
        { length: 3 },
        () => () => new Response(null, { status: 429, headers: { 'retry-after': '1' } }),
      ),
    );
    const err = await request(wireOf({ fetch: s.fetch, sleep: record([]), maxAttempts: 3 }), call).catch(
      (e: unknown) => e,
    );
    expect(err).toMatchObject({ code: 'REMOTE_UNAVAILABLE', retryAfterMs: 1000 });
    expect((err as Error).message).toBe('GET /entries/1 failed 3 times; last: HTTP 429');
    expect(s.calls).toBe(3);
  });

  it('does not retry once the caller aborted, nor an answer over the size limit', async () => {
    const controller = new AbortController();
    const aborted = scripted([
      () => {
        controller.abort();
        throw new DOMException('aborted', 'AbortError');
      },
    ]);
    await expect(
      request(wireOf({ fetch: aborted.fetch, sleep: record([]) }), {
        ...call,
        signal: controller.signal,
      }),
    ).rejects.toThrow('aborted');
    expect(aborted.calls).toBe(1);

    const big = scripted([() => new Response(Buffer.alloc(2048), { status: 200 })]);
    await expect(
      request(wireOf({ fetch: big.fetch, sleep: record([]), maxResponseBytes: 1024 }), call),
    ).rejects.toMatchObject({ code: 'BAD_RESPONSE' });
    expect(big.calls).toBe(1);
  });
});

describe('entryIdOf', () => {
  it('is the last path segment of the location, decoded, or the leaf hash without one', async () => {
    const { statement } = signedStatement(await statementSigner());
    expect(entryIdOf('https://ts.example/entries/a%2Fb', statement.bytes)).toBe('a/b');
    expect(entryIdOf('https://ts.example/entries/xyz/', statement.bytes)).toBe('xyz');
    const leaf = leafHash(entryOf(statement.bytes)).toString('hex');
    expect(entryIdOf(undefined, statement.bytes)).toBe(leaf);
    // A location naming no segment at all falls back to the leaf hash too.
    expect(entryIdOf('https://ts.example/', statement.bytes)).toBe(leaf);
  });
});
