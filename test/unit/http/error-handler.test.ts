import { Decoder } from 'cbor-x';
import Fastify, { type FastifyInstance } from 'fastify';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { installErrorHandling } from '../../../src/http/error-handler.ts';
import { ProblemError } from '../../../src/http/problem.ts';
import { TransparencyError } from '../../../src/transparency/errors.ts';

// An independent CBOR view of the concise problem details (RFC 9290: -1 title, -2 detail).
const cbor = new Decoder({ mapsAsObjects: false, useRecords: false });

/**
 * One application, one error handler: the same failures thrown from a JSON route and from a route
 * that asks for CBOR problem details (as the SCRAPI routes do) carry the same status and code, in
 * the representation of the route.
 */
describe('the one error handler', () => {
  let app: FastifyInstance;
  beforeAll(async () => {
    app = Fastify({ logger: false });
    installErrorHandling(app);
    const failures: Record<string, () => never> = {
      transparency: () => {
        throw new TransparencyError('UNTRUSTED_ISSUER', 'chain does not lead to a trust anchor');
      },
      problem: () => {
        throw new ProblemError(403, 'FORBIDDEN', 'needs create on attestations/scitt', {
          headers: { 'x-extra': '1' },
        });
      },
      internal: () => {
        throw new Error('secret database detail');
      },
      service: () => {
        throw new TransparencyError('ISSUER_UNAVAILABLE', 'secret signer detail');
      },
    };
    for (const [format, prefix] of [
      ['json', '/v1'],
      ['cbor', '/scitt'],
    ] as const) {
      for (const [name, fail] of Object.entries(failures)) {
        app.get(`${prefix}/${name}`, { config: { problem: format } }, fail);
      }
      // eslint-disable-next-line @typescript-eslint/require-await -- Fastify plugins are async functions
      await app.register(async (scope) => {
        scope.removeAllContentTypeParsers();
        scope.addContentTypeParser('application/cose', { parseAs: 'buffer' }, (_req, body, done) => {
          done(null, body);
        });
        scope.post(
          `${prefix}/entries`,
          { config: { problem: format, accepts: 'application/cose' } },
          () => ({}),
        );
      });
    }
    await app.ready();
  });
  afterAll(async () => {
    await app.close();
  });

  const json = async (url: string) => {
    const res = await app.inject({ method: 'GET', url });
    expect(res.headers['content-type']).toMatch(/^application\/problem\+json/);
    return { status: res.statusCode, headers: res.headers, body: res.json<Record<string, unknown>>() };
  };
  const concise = async (
    url: string,
    init: { method?: 'GET' | 'POST'; headers?: Record<string, string> } = {},
  ) => {
    const res = await app.inject({ method: init.method ?? 'GET', url, headers: init.headers ?? {} });
    expect(res.headers['content-type']).toBe('application/concise-problem-details+cbor');
    const map = cbor.decode(res.rawPayload) as Map<unknown, unknown>;
    return {
      status: res.statusCode,
      headers: res.headers,
      title: map.get(-1),
      detail: map.get(-2),
      code: map.get('code'),
    };
  };

  it('maps a client-caused transparency failure to 400 with its code, in each representation', async () => {
    expect(await json('/v1/transparency')).toMatchObject({
      status: 400,
      body: {
        status: 400,
        code: 'UNTRUSTED_ISSUER',
        detail: 'chain does not lead to a trust anchor',
        instance: '/v1/transparency',
      },
    });
    expect(await concise('/scitt/transparency')).toMatchObject({
      status: 400,
      title: 'Bad Request',
      code: 'UNTRUSTED_ISSUER',
      detail: 'chain does not lead to a trust anchor',
    });
  });

  it('keeps a ProblemError’s status, code and headers', async () => {
    const a = await json('/v1/problem');
    const b = await concise('/scitt/problem');
    for (const r of [a, b]) {
      expect(r.status).toBe(403);
      expect(r.headers['x-extra']).toBe('1');
    }
    expect(a.body.code).toBe('FORBIDDEN');
    expect(b.code).toBe('FORBIDDEN');
  });

  it('never shows the cause of a 5xx', async () => {
    for (const name of ['internal', 'service']) {
      const a = await json(`/v1/${name}`);
      const b = await concise(`/scitt/${name}`);
      expect(a).toMatchObject({ status: 500, body: { code: 'INTERNAL' } });
      expect(b).toMatchObject({ status: 500, code: 'INTERNAL', title: 'Internal Server Error' });
      expect(JSON.stringify(a.body)).not.toMatch(/secret/);
      expect(String(b.detail)).not.toMatch(/secret/);
    }
  });

  it('answers a wrong media type with 415 naming what the route accepts', async () => {
    const headers = { 'content-type': 'text/plain' };
    const res = await app.inject({ method: 'POST', url: '/v1/entries', headers, payload: 'x' });
    expect(res.statusCode).toBe(415);
    expect(res.json()).toMatchObject({ code: 'UNSUPPORTED_MEDIA_TYPE', detail: 'send application/cose' });
    expect(await concise('/scitt/entries', { method: 'POST', headers })).toMatchObject({
      status: 415,
      title: 'Unsupported Media Type',
      code: 'UNSUPPORTED_MEDIA_TYPE',
    });
  });

  it('answers unknown routes in the representation the client asks for', async () => {
    expect(await json('/nowhere')).toMatchObject({ status: 404, body: { code: 'NOT_FOUND' } });
    expect(
      await concise('/nowhere', {
        headers: { accept: 'application/cose, application/concise-problem-details+cbor' },
      }),
    ).toMatchObject({ status: 404, code: 'NOT_FOUND' });
    const both = await app.inject({
      method: 'GET',
      url: '/nowhere',
      headers: { accept: 'application/concise-problem-details+cbor, application/problem+json' },
    });
    expect(both.headers['content-type']).toMatch(/^application\/problem\+json/);
  });
});
