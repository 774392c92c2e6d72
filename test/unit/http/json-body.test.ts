/**
 * The JSON body parser (src/http/json-body.ts) behind the one error handler: malformed JSON and
 * well-formed JSON refused for a prototype member are told apart, and everything else arrives as
 * JSON.parse gives it.
 */
import Fastify, { type FastifyInstance } from 'fastify';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { installErrorHandling } from '../../../src/http/error-handler.ts';
import { installJsonBody } from '../../../src/http/json-body.ts';

describe('JSON bodies', () => {
  let app: FastifyInstance;
  beforeAll(async () => {
    app = Fastify({ logger: false });
    installErrorHandling(app);
    installJsonBody(app);
    app.post('/v1/echo', (req) => ({ got: req.body }));
    await app.ready();
  });
  afterAll(() => app.close());

  const post = async (payload: string, type = 'application/json') => {
    const res = await app.inject({
      method: 'POST',
      url: '/v1/echo',
      headers: { 'content-type': type },
      payload,
    });
    return {
      status: res.statusCode,
      type: res.headers['content-type'],
      body: res.json<Record<string, unknown>>(),
    };
  };

  it('answers malformed and empty bodies with MALFORMED_JSON, not valid JSON', async () => {
    for (const payload of ['{"a":', '', 'nul', '{"a":1}x']) {
      const r = await post(payload);
      expect(r.status, payload).toBe(400);
      expect(r.type).toMatch(/^application\/problem\+json/);
      expect(r.body).toMatchObject({ code: 'MALFORMED_JSON', detail: 'the body is not valid JSON' });
    }
  });

  it('refuses a prototype member at any depth, saying so (the JSON itself is valid)', async () => {
    for (const payload of [
      '{"__proto__":{"x":1}}',
      '{"a":[{"b":{"__proto__":null}}]}',
      '{"constructor":{"prototype":{"x":1}}}',
      '{"a":{"constructor":{"prototype":1}}}',
    ]) {
      expect(() => JSON.parse(payload) as unknown, payload).not.toThrow();
      const r = await post(payload);
      expect(r.status, payload).toBe(400);
      expect(r.body.code).toBe('MALFORMED_JSON');
      expect(String(r.body.detail), payload).toMatch(/"__proto__".*refused \(prototype pollution\)/);
    }
    expect(({} as Record<string, unknown>).x).toBeUndefined();
  });

  it('passes everything else through as JSON.parse gives it', async () => {
    const body = {
      constructor: 'x',
      prototype: { a: 1 },
      text: '{"__proto__":1}',
      list: [1, 'two', null, true, { nested: { deep: [] } }],
      unicode: 'é \u2028 😀',
    };
    expect(await post(JSON.stringify(body), 'application/json; charset=utf-8')).toMatchObject({
      status: 200,
      body: { got: body },
    });
    expect(await post('[1,2]')).toMatchObject({ status: 200, body: { got: [1, 2] } });
  });
});
