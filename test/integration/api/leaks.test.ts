/**
 * Issue 11 item 9: what the API tells an outsider. Excluded namespaces are counted, never named;
 * a hidden record and an unknown id take the same path (the same reviews, counted where they leave
 * for the real kube-apiserver, and the same answer); readiness never names an address; every error,
 * the router's own included, is problem+json and echoes nothing of the request; an NDJSON stream
 * ends with a trailer, and `service-ctl verify` refuses a stream cut before it.
 */
import { execFile } from 'node:child_process';
import { createHash, randomBytes, randomUUID } from 'node:crypto';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import type { FastifyInstance } from 'fastify';
import pg from 'pg';
import { pino } from 'pino';
import { DependenciesUnavailable } from '../../../src/health/dependencies.ts';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { generateDevPki, type DevPki } from '../../../hack/dev-pki.ts';
import { freePort } from '../../../hack/stack/proc.ts';
import { repoRoot } from '../../../hack/stack/stack.ts';
import type { Run } from '../../../src/crd/run.ts';
import { startOpsServer } from '../../../src/bin/ops-server.ts';
import { signerFromPem } from '../../../src/signing/index.ts';
import { UuidV7Generator } from '../../../src/vault/uuidv7.ts';
import {
  createVaultPool,
  migrate,
  openVault,
  type StoredAttestation,
  type Vault,
} from '../../../src/vault/index.ts';
import { stackApp } from '../../helpers/app.ts';
import { bindUser, createNamespace } from '../../helpers/rbac.ts';
import { runRecords } from '../../helpers/records.ts';
import { countedReviews, type CountedReviews } from '../../helpers/reviews.ts';
import { holdOpen } from '../../helpers/sockets.ts';
import { freshDatabase, stack, uniqueName } from '../../helpers/stack.ts';

let app: FastifyInstance;
let vault: Vault;
let pki: DevPki;
let reviews: CountedReviews;
let stored: StoredAttestation[];
let port: number;
const nsA = uniqueName('leak-a');
const nsB = uniqueName('leak-b');
const hiddenRecords: string[] = [];
const hiddenRuns: string[] = [];
const ids = new UuidV7Generator();
const uuidv7 = () => ids.next();
const token = (u: 'admin' | 'alice' | 'bob') => ({ authorization: `Bearer ${stack().kube.tokens[u]}` });

beforeAll(async () => {
  const url = await freshDatabase('leaks');
  await migrate(url);
  vault = await openVault(createVaultPool(url));
  pki = await generateDevPki();
  const signer = signerFromPem(pki);
  await Promise.all([createNamespace(nsA), createNamespace(nsB)]);
  await bindUser('alice', 'aibom-vault-viewer', nsA);
  stored = await vault.attestations.append([
    ...runRecords(signer, nsA).records,
    ...runRecords(signer, nsB).records,
    ...runRecords(signer, nsA).records,
  ]);
  // Records and runs alice cannot see, a fresh one for every probe below.
  for (let i = 0; i < 10; i++) {
    hiddenRecords.push(
      ...(await vault.attestations.append(runRecords(signer, nsB).records)).map((r) => r.id),
    );
    const run: Run = {
      apiVersion: 'vault.service.dev/v1',
      kind: 'Run',
      metadata: { name: `hidden-${i}`, namespace: nsB, uid: randomUUID() },
      spec: { steps: [{ id: 'a', tool: { name: 't' } }] },
    };
    await vault.runs.upsert(run);
    hiddenRuns.push(run.metadata.uid);
  }
  reviews = countedReviews();
  app = await stackApp(vault, [], { authorizer: reviews.authorizer });
  await app.listen({ host: '127.0.0.1', port: 0 });
  port = (app.server.address() as AddressInfo).port;
});

afterAll(async () => {
  await app?.close();
  await vault?.close();
});

beforeEach(() => reviews.reset());

describe('excluded namespaces', () => {
  it('are counted, never named, to a caller with no grants and to a namespaced one', async () => {
    for (const [who, excluded] of [
      ['bob', 2],
      ['alice', 1],
    ] as const) {
      const res = await app.inject({
        method: 'POST',
        url: '/v1/attestations/query',
        headers: token(who),
        payload: {},
      });
      expect(res.statusCode).toBe(200);
      const body = res.json<Record<string, unknown>>();
      expect(body.excluded_namespace_count).toBe(excluded);
      expect(body).not.toHaveProperty('excluded_namespaces');
      expect(res.headers['x-excluded-namespace-count']).toBe(String(excluded));
      expect(res.headers).not.toHaveProperty('x-excluded-namespaces');
      const everything = JSON.stringify(res.headers) + res.body;
      expect(everything).not.toContain(nsB);
      if (who === 'bob') expect(everything).not.toContain(nsA);
    }
  });
});

describe('hidden and unknown ids take the same path', () => {
  /** Each probe asks about an id not asked before, as an outsider scanning for ids would. */
  const cases = [
    {
      what: 'GET /v1/attestations/{id}',
      hidden: (i: number) =>
        app.inject({ url: `/v1/attestations/${hiddenRecords[i]!}`, headers: token('alice') }),
      unknown: () => app.inject({ url: `/v1/attestations/${uuidv7()}`, headers: token('alice') }),
    },
    {
      what: 'GET /v1/runs/{id}',
      hidden: (i: number) => app.inject({ url: `/v1/runs/${hiddenRuns[i]!}`, headers: token('alice') }),
      unknown: () => app.inject({ url: `/v1/runs/${randomUUID()}`, headers: token('alice') }),
    },
    {
      what: 'POST /v1/attestations/scitt',
      hidden: (i: number) =>
        app.inject({
          method: 'POST',
          url: '/v1/attestations/scitt',
          headers: token('alice'),
          payload: { id: hiddenRecords[i + 10]! },
        }),
      unknown: () =>
        app.inject({
          method: 'POST',
          url: '/v1/attestations/scitt',
          headers: token('alice'),
          payload: { id: uuidv7() },
        }),
    },
  ];

  it.each(cases.map((c) => [c.what, c] as const))(
    '%s: the same reviews and the same 404',
    async (_what, c) => {
      // From the first probe on, the first into the hidden namespace included.
      const measured: Record<'hidden' | 'unknown', { reviews: number; body: string; status: number }[]> = {
        hidden: [],
        unknown: [],
      };
      for (let i = 0; i < 4; i++) {
        for (const kind of ['unknown', 'hidden'] as const) {
          reviews.reset();
          const res = await c[kind](i);
          measured[kind].push({ reviews: reviews.sent.access, body: res.body, status: res.statusCode });
        }
      }
      const first = measured.hidden[0]!;
      expect(first.status).toBe(404);
      // Two fresh reviews, both naming the id: the verb, then `list`.
      expect(first.reviews).toBe(2);
      for (const m of [...measured.hidden, ...measured.unknown]) expect(m).toEqual(first);
    },
  );

  it('GET /v1/runs/{id} shares no cached answer with GET /v1/namespaces/{ns}/runs/{name}, either way round', async () => {
    // Runs alice cannot see, whose names she knows (a name is easily guessed; an id is not).
    const runs: Run[] = [];
    for (let i = 0; i < 3; i++) {
      const run: Run = {
        apiVersion: 'vault.service.dev/v1',
        kind: 'Run',
        metadata: { name: `named-${i}`, namespace: nsB, uid: randomUUID() },
        spec: { steps: [{ id: 'a', tool: { name: 't' } }] },
      };
      await vault.runs.upsert(run);
      runs.push(run);
    }
    /** The reviews one request sends: how many, and what each asks (verb, resource; name and namespace apart). */
    const probe = async (url: string) => {
      reviews.reset();
      const res = await app.inject({ url, headers: token('alice') });
      expect(res.statusCode, url).toBe(404);
      return {
        body: res.body,
        asked: reviews.asked.map(({ attrs }) => ({ verb: attrs.verb, resource: attrs.resource })),
        attrs: reviews.asked.map(({ attrs }) => attrs),
      };
    };
    const byId = (id: string) => probe(`/v1/runs/${id}`);
    const byName = (ns: string, name: string) => probe(`/v1/namespaces/${ns}/runs/${name}`);
    const twoFresh = [
      { verb: 'get', resource: 'runs' },
      { verb: 'list', resource: 'runs' },
    ];

    // Cold: a hidden id and an unknown id.
    const coldHidden = await byId(runs[0]!.metadata.uid);
    const coldUnknown = await byId(randomUUID());
    expect(coldHidden.asked).toEqual(twoFresh);
    expect(coldUnknown).toMatchObject({ asked: coldHidden.asked, body: coldHidden.body });

    // The by-name route asked first about run 1's namespace and name: its id still costs two fresh
    // reviews, as an unknown id does (a cache hit here told that the id exists).
    expect((await byName(nsB, runs[1]!.metadata.name)).asked).toEqual(twoFresh);
    const warmedHidden = await byId(runs[1]!.metadata.uid);
    const warmedUnknown = await byId(randomUUID());
    expect(warmedHidden.asked).toEqual(twoFresh);
    expect(warmedUnknown).toMatchObject({ asked: warmedHidden.asked, body: warmedHidden.body });
    // Each id's questions are its own: they name it in their cache scope, shared by no other id.
    const scopes = [coldHidden, coldUnknown, warmedHidden, warmedUnknown].map((p) =>
      p.attrs.map((a) => a.cacheScope),
    );
    for (const s of scopes) expect(new Set(s).size).toBe(1);
    expect(new Set(scopes.map((s) => s[0])).size).toBe(4);

    // The other way round: run 2's id asked first; its namespace and name by name then cost what a
    // name that does not exist costs (a cache hit here told the name and namespace of an id).
    expect((await byId(runs[2]!.metadata.uid)).asked).toEqual(twoFresh);
    const named = await byName(nsB, runs[2]!.metadata.name);
    const unnamed = await byName(nsB, `none-${randomUUID()}`);
    expect(named.asked).toEqual(twoFresh);
    expect(unnamed).toMatchObject({ asked: named.asked, body: named.body });
  });

  it('prints the answer times of hidden and unknown ids (for the record, not asserted)', async () => {
    // Interleaved, fresh ids on both sides (probes 0-3 were used above).
    const times = { hidden: [] as number[], unknown: [] as number[] };
    const c = cases[0]!;
    for (let i = 4; i < 24; i++) {
      for (const kind of ['hidden', 'unknown'] as const) {
        const t0 = performance.now();
        await c[kind](i);
        times[kind].push(performance.now() - t0);
      }
    }
    const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!;
    console.log(
      `GET /v1/attestations/{id} by an outsider, fresh ids: hidden ${median(times.hidden).toFixed(1)} ms, ` +
        `unknown ${median(times.unknown).toFixed(1)} ms (medians of ${times.hidden.length}, interleaved)`,
    );
    expect(times.hidden).toHaveLength(times.unknown.length);
  });
});

describe('readiness', () => {
  /** A real dependency failure: PostgreSQL at an address where nothing listens. */
  const deadPostgres = async (): Promise<Error> => {
    const where = `127.0.0.1:${await freePort()}`;
    const client = new pg.Client({
      connectionString: `postgresql://u:p@${where}/x`,
      connectionTimeoutMillis: 5000,
    });
    const err = await client.connect().then(
      () => new Error('connected?'),
      (e: Error) => e,
    );
    await client.end().catch(() => undefined);
    // The failure names the address: that is what must not leave.
    expect(err.message).toContain(where);
    return err;
  };

  it('/readyz of the API and of the ops server says not ready, names a dependency known down, and never why', async () => {
    const err = await deadPostgres();
    const failing = await stackApp(vault, [], { ready: () => Promise.reject(err) });
    try {
      const res = await failing.inject({ url: '/readyz' });
      expect(res.statusCode).toBe(503);
      expect(res.json()).toEqual({ status: 'not ready' });
      expect(res.body).not.toMatch(/127\.0\.0\.1|ECONNREFUSED/);
    } finally {
      await failing.close();
    }
    // A dependency known to be down is named (what, never where).
    const named = await stackApp(vault, [], {
      ready: () => Promise.reject(new DependenciesUnavailable(['the object store'])),
    });
    try {
      const res = await named.inject({ url: '/readyz' });
      expect(res.statusCode).toBe(503);
      expect(res.json()).toEqual({ status: 'not ready', unavailable: ['the object store'] });
    } finally {
      await named.close();
    }
    const ops = await startOpsServer({
      logger: pino({ level: 'silent' }),
      host: '127.0.0.1',
      port: 0,
      ready: () => Promise.reject(err),
    });
    try {
      const res = await fetch(`http://127.0.0.1:${ops.port}/readyz`);
      expect(res.status).toBe(503);
      const text = await res.text();
      expect(text).toBe('not ready');
    } finally {
      await ops.close();
    }
  });
});

describe('errors are problem+json and echo nothing', () => {
  const marker = 'zq7echo';

  it('an unknown route, with a query string and odd characters: 404 problem+json, nothing echoed', async () => {
    const res = await app.inject({
      url: `/v1/${marker}/<script>?${marker}=<b>x</b>`,
      headers: token('admin'),
    });
    expect(res.statusCode).toBe(404);
    expect(res.headers['content-type']).toContain('application/problem+json');
    expect(res.json()).toMatchObject({ code: 'NOT_FOUND' });
    expect(res.body).not.toContain(marker);
    expect(res.body).not.toContain('script');
  });

  it('an undecodable URL: 400 problem+json, nothing echoed', async () => {
    const res = await app.inject({ url: `/v1/attestations/${marker}%E0%A4%A`, headers: token('admin') });
    expect(res.statusCode).toBe(400);
    expect(res.headers['content-type']).toContain('application/problem+json');
    expect(res.json()).toMatchObject({ code: 'VALIDATION_FAILED' });
    expect(res.body).not.toContain(marker);
  });

  it('errors of the HTTP parser (malformed request, oversized headers): problem+json, then closed', async () => {
    const garbage = await holdOpen('127.0.0.1', port, [`${marker} / HTTP/1.1\r\n\r\n`]);
    expect(garbage.received).toMatch(/^HTTP\/1\.1 400 /);
    expect(garbage.received).toMatch(/content-type: application\/problem\+json/i);
    expect(garbage.received).not.toContain(marker);
    const big = await holdOpen('127.0.0.1', port, [
      `GET /healthz HTTP/1.1\r\nHost: x\r\nX-${marker}: ${'a'.repeat(20_000)}\r\n\r\n`,
    ]);
    expect(big.received).toMatch(/^HTTP\/1\.1 431 /);
    expect(big.received).toMatch(/content-type: application\/problem\+json/i);
    const body = JSON.parse(big.received.slice(big.received.indexOf('\r\n\r\n') + 4)) as { status: number };
    expect(body.status).toBe(431);
  });

  it('a validation error names an unknown field by pointer but quotes no value', async () => {
    const res = await app.inject({
      method: 'POST',
      url: '/v1/attestations/query',
      headers: token('admin'),
      payload: { kind: `${marker}-value`, [`${marker}/key~x`]: 1 },
    });
    expect(res.statusCode).toBe(400);
    expect(res.body).not.toContain(`${marker}-value`);
    expect(res.json<{ errors: { pointer: string }[] }>().errors.map((e) => e.pointer)).toContain(
      `/body/${marker}~1key~0x`,
    );
  });
});

describe('NDJSON streams end with a trailer', () => {
  let dir: string;
  beforeAll(async () => {
    dir = await mkdtemp(join(tmpdir(), 'ndjson-'));
    await writeFile(join(dir, 'signer.pem'), pki['tls.crt']);
  });
  afterAll(async () => {
    await rm(dir, { recursive: true, force: true });
  });

  const inA = () => stored.filter((r) => r.namespace === nsA);
  const stream = async (body: object = { namespaces: [nsA] }) => {
    const res = await fetch(`http://127.0.0.1:${port}/v1/attestations/query`, {
      method: 'POST',
      headers: { ...token('admin'), 'content-type': 'application/json', accept: 'application/x-ndjson' },
      body: JSON.stringify(body),
    });
    expect(res.status).toBe(200);
    return res.text();
  };
  const verify = (file: string) =>
    promisify(execFile)(process.execPath, [
      `${repoRoot}/src/bin/service-ctl.ts`,
      'verify',
      file,
      '--key',
      join(dir, 'signer.pem'),
    ]).then(
      (r) => ({ code: 0, stdout: r.stdout, stderr: r.stderr }),
      (e: { code: number; stdout: string; stderr: string }) => ({
        code: e.code,
        stdout: e.stdout,
        stderr: e.stderr,
      }),
    );

  it('the last line counts and digests the record lines (checked here with node:crypto)', async () => {
    const text = await stream();
    const lines = text.split('\n');
    expect(lines.pop()).toBe('');
    const trailer = JSON.parse(lines.pop()!) as { trailer: { count: number; digest: string } };
    expect(trailer.trailer.count).toBe(inA().length);
    const records = lines.map((l) => `${l}\n`).join('');
    expect(trailer.trailer.digest).toBe(`sha256:${createHash('sha256').update(records).digest('hex')}`);
    expect(lines.map((l) => (JSON.parse(l) as { id: string }).id)).toEqual(inA().map((r) => r.id));
    // An empty result is a trailer alone.
    const empty = await stream({ namespaces: [`none-${randomBytes(3).toString('hex')}`] });
    expect(JSON.parse(empty)).toEqual({
      trailer: { count: 0, digest: `sha256:${createHash('sha256').update('').digest('hex')}` },
    });
  });

  it('service-ctl verify accepts the whole stream and refuses it cut at any line', async () => {
    const text = await stream();
    const whole = join(dir, 'whole.ndjson');
    await writeFile(whole, text);
    const ok = await verify(whole);
    expect(ok.code, ok.stderr).toBe(0);
    expect(ok.stdout).toContain(`${inA().length} verified, 0 failed`);
    const lines = text.split('\n').filter((l) => l !== '');
    for (let keep = 1; keep < lines.length; keep++) {
      const cut = join(dir, `cut-${keep}.ndjson`);
      await writeFile(
        cut,
        lines
          .slice(0, keep)
          .map((l) => `${l}\n`)
          .join(''),
      );
      const res = await verify(cut);
      expect(res.code, `cut after ${keep} line(s)`).toBe(1);
      expect(res.stderr).toMatch(/incomplete or altered stream: .*cut/);
    }
    // A record removed from the middle, the trailer kept: refused too.
    const gap = join(dir, 'gap.ndjson');
    await writeFile(gap, [...lines.slice(0, 2), ...lines.slice(3)].map((l) => `${l}\n`).join(''));
    expect((await verify(gap)).code).toBe(1);
  });
});
