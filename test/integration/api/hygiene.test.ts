/**
 * Issue 11 item 6, API side: NUL and other control characters in any query filter are refused
 * with 400 VALIDATION_FAILED and a pointer to the field, never passed to PostgreSQL (which cannot
 * store NUL and answered 500). A property test sends generated values in every filter field,
 * JSON pages and NDJSON alike, against the real database: never a 500.
 */
import fc from 'fast-check';
import type { FastifyInstance } from 'fastify';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { generateDevPki } from '../../../hack/dev-pki.ts';
import { signerFromPem } from '../../../src/signing/index.ts';
import { createVaultPool, migrate, openVault, type Vault } from '../../../src/vault/index.ts';
import { stackApp } from '../../helpers/app.ts';
import { runRecords } from '../../helpers/records.ts';
import { freshDatabase, stack, uniqueName } from '../../helpers/stack.ts';

let app: FastifyInstance;
let vault: Vault;
const ns = uniqueName('hygiene');
const headers = () => ({ authorization: `Bearer ${stack().kube.tokens.admin}` });

beforeAll(async () => {
  const url = await freshDatabase('hygiene');
  await migrate(url);
  vault = await openVault(createVaultPool(url));
  await vault.attestations.append(runRecords(signerFromPem(await generateDevPki()), ns).records);
  app = await stackApp(vault, []);
});

afterAll(async () => {
  await app?.close();
  await vault?.close();
});

/** Unicode Cc by code point (independently of the schema's pattern). */
const hasControl = (v: string): boolean =>
  [...v].some((c) => {
    const n = c.codePointAt(0)!;
    return n <= 0x1f || (n >= 0x7f && n <= 0x9f);
  });

/** Unicode Cc: C0 (NUL … US), DEL and C1 (PAD … APC). */
const CONTROL = [
  '\u0000',
  '\u0001',
  '\t',
  '\n',
  '\r',
  '\u001b',
  '\u001f',
  '\u007f',
  '\u0080',
  '\u0085',
  '\u009f',
];

/** Every free-text filter, with where its value goes in the body and the pointer that names it. */
const TEXT_FIELDS: { pointer: string; body: (v: string) => object }[] = [
  { pointer: '/body/subject', body: (v) => ({ subject: v }) },
  { pointer: '/body/step_id', body: (v) => ({ step_id: v }) },
  { pointer: '/body/policy_pack/name', body: (v) => ({ policy_pack: { name: v } }) },
  { pointer: '/body/policy_pack/version', body: (v) => ({ policy_pack: { name: 'baseline', version: v } }) },
  { pointer: '/body/capability_token', body: (v) => ({ capability_token: v }) },
  { pointer: '/body/cursor', body: (v) => ({ cursor: v }) },
];

const ask = (body: object, ndjson: boolean) =>
  app.inject({
    method: 'POST',
    url: '/v1/attestations/query',
    headers: { ...headers(), ...(ndjson ? { accept: 'application/x-ndjson' } : {}) },
    payload: body,
  });

describe('control characters in query filters', () => {
  it.each(TEXT_FIELDS.map((f) => [f.pointer, f] as const))(
    '%s: each control character is 400 VALIDATION_FAILED naming the field (page and NDJSON)',
    async (_pointer, field) => {
      for (const c of CONTROL) {
        for (const ndjson of [false, true]) {
          const res = await ask(field.body(`a${c}b`), ndjson);
          const what = `${JSON.stringify(c)} ndjson=${ndjson}`;
          expect(res.statusCode, what).toBe(400);
          expect(res.headers['content-type'], what).toContain('application/problem+json');
          const problem = res.json<{ code: string; errors: { pointer: string; message: string }[] }>();
          expect(problem.code, what).toBe('VALIDATION_FAILED');
          expect(problem.errors, what).toContainEqual({
            pointer: field.pointer,
            message: 'must not contain control characters',
          });
        }
      }
    },
  );

  it('the same values without the control character are answered (200)', async () => {
    for (const field of TEXT_FIELDS.filter((f) => f.pointer !== '/body/cursor')) {
      // A capability_token must take one of its forms (docs/api.md): a scope is one.
      const plain = field.pointer === '/body/capability_token' ? 'kb:read' : 'a b';
      expect((await ask(field.body(plain), false)).statusCode, field.pointer).toBe(200);
    }
  });

  it('a NUL in the path of a GET is 400, not 500', async () => {
    for (const url of ['/v1/attestations/%00', '/v1/runs/%00', '/v1/runs/%00/artifacts/aibom']) {
      const res = await app.inject({ url, headers: headers() });
      expect(res.statusCode, url).toBe(400);
      expect(res.json<{ errors: { pointer: string }[] }>().errors[0]!.pointer).toBe('/params/id');
    }
  });
});

describe('property: generated filters never answer 500', () => {
  const text = fc.oneof(
    fc.string({ unit: 'binary', maxLength: 40 }),
    fc.string({ unit: 'grapheme', maxLength: 20 }),
    fc
      .tuple(fc.string({ maxLength: 10 }), fc.constantFrom(...CONTROL), fc.string({ maxLength: 10 }))
      .map((p) => p.join('')),
  );
  const anyValue = fc.oneof(text, fc.integer(), fc.constant(null), fc.array(text, { maxLength: 3 }));
  const body = fc.record(
    {
      subject: text,
      run_id: fc.oneof(fc.uuid(), text),
      step_id: text,
      artifact_digest: text,
      policy_pack: fc.record({ name: text, version: text }, { requiredKeys: ['name'] }),
      capability_token: text,
      kind: fc.oneof(fc.constantFrom('run', 'step', 'aibom'), text),
      from: fc.oneof(
        fc.date({ noInvalidDate: true }).map((d) => d.toISOString()),
        text,
      ),
      to: text,
      namespaces: fc.array(fc.oneof(fc.constant(ns), text), { maxLength: 4 }),
      limit: fc.oneof(fc.integer({ min: -5, max: 2000 }), anyValue),
      cursor: text,
    },
    { requiredKeys: [] },
  );

  it('one filter at a time, so that valid-looking values reach PostgreSQL: never 500', async () => {
    let answered = 0;
    await fc.assert(
      fc.asyncProperty(fc.constantFrom(...TEXT_FIELDS), text, fc.boolean(), async (field, value, ndjson) => {
        const res = await ask(field.body(value), ndjson);
        expect([200, 400]).toContain(res.statusCode);
        if (res.statusCode === 200) answered += 1;
        if (hasControl(value)) {
          expect(res.json<{ errors: { pointer: string }[] }>().errors.map((e) => e.pointer)).toContain(
            field.pointer,
          );
        }
      }),
      { numRuns: 300 },
    );
    // Most generated values are valid text: they were queried, not refused.
    expect(answered).toBeGreaterThan(50);
  });

  it('in every filter field, JSON pages and NDJSON: 200 or 400 with pointers, never 500', async () => {
    await fc.assert(
      fc.asyncProperty(body, fc.boolean(), async (b, ndjson) => {
        const res = await ask(ndjson ? { ...b, limit: undefined, cursor: undefined } : b, ndjson);
        expect([200, 400]).toContain(res.statusCode);
        if (res.statusCode === 400) {
          const problem = res.json<{ code: string; errors?: { pointer: string }[] }>();
          expect(['VALIDATION_FAILED', 'CURSOR_INVALID', 'INVALID_TIME_WINDOW']).toContain(problem.code);
          expect(problem.errors?.length ?? 0).toBeGreaterThan(0);
        }
        // A control character anywhere in a free-text filter is never let through.
        const free = [b.subject, b.step_id, b.policy_pack?.name, b.policy_pack?.version, b.capability_token];
        if (free.some((v) => typeof v === 'string' && hasControl(v))) {
          expect(res.statusCode).toBe(400);
        }
      }),
      { numRuns: 300 },
    );
  });
});
