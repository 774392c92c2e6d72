/**
 * The runs list, the policy pack of a run and the UI's sessions and CSRF rules, over HTTP against the
 * real stack: RBAC of the real API server (alice and bob bound in one namespace each), PolicyPack
 * resources in that server, the runs mirror in PostgreSQL written by its own repository. The browser
 * test (browser.test.ts) drives the pages; this file pins the rules beneath them.
 */
import { randomUUID } from 'node:crypto';
import type { AddressInfo } from 'node:net';
import { CustomObjectsApi } from '@kubernetes/client-node';
import type { FastifyInstance } from 'fastify';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Run, RunSpec } from '../../../src/crd/run.ts';
import { kubeClient } from '../../../src/kube/index.ts';
import { policyPackSource } from '../../../src/http/sources/policy-packs.ts';
import { createVaultPool, migrate, openVault, type Vault } from '../../../src/vault/index.ts';
import { stackApp } from '../../helpers/app.ts';
import { bindUser, createNamespace } from '../../helpers/rbac.ts';
import { freshDatabase, kubeConfig, kubeAccess, stack, uniqueName } from '../../helpers/stack.ts';

const group = 'vault.service.dev';
const nsA = uniqueName('ui-a');
const nsB = uniqueName('ui-b');
const nsC = uniqueName('ui-c');
const pack = uniqueName('uipack');
const packs = [`${pack}-v2`, `${pack}-any`];
let vault: Vault;
let app: FastifyInstance;
let url: string;
type User = 'admin' | 'alice' | 'bob';
const token = (u: User) => stack().kube.tokens[u];
const bearer = (u: User) => ({ authorization: `Bearer ${token(u)}` });
const runIds: Record<string, string> = {};

function runOf(namespace: string, name: string, spec: RunSpec, phase: string): Run {
  return {
    apiVersion: `${group}/v1`,
    kind: 'Run',
    metadata: { name, namespace, uid: randomUUID() },
    spec,
    status: { phase: phase as 'Running', steps: [] },
  };
}

const specWith = (version?: string): RunSpec => ({
  policyPack: { name: pack, ...(version !== undefined ? { version } : {}), guardrails: ['pii-redaction'] },
  steps: [{ id: 's', tool: { name: 't' } }],
});

beforeAll(async () => {
  const db = await freshDatabase('ui');
  await migrate(db);
  vault = await openVault(createVaultPool(db));
  await Promise.all([createNamespace(nsA), createNamespace(nsB), createNamespace(nsC)]);
  await bindUser('alice', 'aibom-vault-auditor', nsA);
  await bindUser('bob', 'aibom-vault-viewer', nsB);
  const objects = kubeConfig('admin').makeApiClient(CustomObjectsApi);
  await objects.createClusterCustomObject({
    group,
    version: 'v1',
    plural: 'policypacks',
    body: {
      apiVersion: `${group}/v1`,
      kind: 'PolicyPack',
      metadata: { name: packs[0] },
      spec: {
        pack,
        version: '2',
        guardrails: ['pii-redaction', 'secret-detection'],
        minimumRetention: 'P7Y',
        notice: 'Keep version 2 evidence for seven years.',
      },
    },
  });
  await objects.createClusterCustomObject({
    group,
    version: 'v1',
    plural: 'policypacks',
    body: {
      apiVersion: `${group}/v1`,
      kind: 'PolicyPack',
      metadata: { name: packs[1] },
      spec: { pack, minimumRetention: 'P90D', notice: 'Any other version: ninety days.' },
    },
  });
  // Five runs in A (newest last), one each in B and C; mirrored as the controller mirrors them.
  for (let i = 0; i < 5; i++) {
    const r = runOf(nsA, `a-${i}`, specWith('2'), i % 2 === 0 ? 'Succeeded' : 'Running');
    await vault.runs.upsert(r);
    runIds[`a-${i}`] = r.metadata.uid;
  }
  for (const [ns, name, version] of [
    [nsB, 'b-0', '3'],
    [nsC, 'c-0', undefined],
  ] as const) {
    const r = runOf(
      ns,
      name,
      name === 'c-0' ? { steps: [{ id: 's', tool: { name: 't' } }] } : specWith(version),
      'Pending',
    );
    await vault.runs.upsert(r);
    runIds[name] = r.metadata.uid;
  }
  app = await stackApp(vault, [], {
    // Read fresh on every request here: the test creates packs and expects to see them.
    policyPacks: policyPackSource(kubeClient(kubeAccess('aibom-vault')), { ttlMs: 0 }),
  });
  await app.listen({ host: '127.0.0.1', port: 0 });
  url = `http://127.0.0.1:${(app.server.address() as AddressInfo).port}`;
});

afterAll(async () => {
  const objects = kubeConfig('admin').makeApiClient(CustomObjectsApi);
  for (const name of packs) {
    await objects
      .deleteClusterCustomObject({ group, version: 'v1', plural: 'policypacks', name })
      .catch(() => undefined);
  }
  await app?.close();
  await vault?.close();
});

interface ListBody {
  items: {
    id: string;
    namespace: string;
    name: string;
    phase: string;
    aibom: { state: string };
    policy_pack: unknown;
  }[];
  next_cursor: string | null;
  excluded_namespace_count: number;
}

async function list(
  user: User,
  query = '',
): Promise<{ status: number; body: ListBody & { code?: string; errors?: unknown } }> {
  const res = await fetch(`${url}/v1/runs${query}`, { headers: bearer(user) });
  return { status: res.status, body: (await res.json()) as ListBody };
}

describe('GET /v1/runs', () => {
  it('shows each user the runs of the namespaces it may list, newest first, and counts the others', async () => {
    const alice = await list('alice');
    expect(alice.status).toBe(200);
    expect(alice.body.items.map((r) => r.name)).toEqual(['a-4', 'a-3', 'a-2', 'a-1', 'a-0']);
    const bob = await list('bob');
    expect(bob.body.items.map((r) => r.name)).toEqual(['b-0']);
    // Named namespaces: the ones not listable are counted, never shown.
    const named = await list('alice', `?namespace=${nsA},${nsB},${nsC}`);
    expect(named.body.items.every((r) => r.namespace === nsA)).toBe(true);
    expect(named.body.excluded_namespace_count).toBe(2);
    const admin = await list('admin');
    expect(new Set(admin.body.items.map((r) => r.namespace))).toEqual(new Set([nsA, nsB, nsC]));
    expect(admin.body.items).toHaveLength(7);
  });

  it('reports phase, AIBOM state and the pack of each run', async () => {
    const { body } = await list('alice');
    const a0 = body.items.find((r) => r.name === 'a-0')!;
    const a1 = body.items.find((r) => r.name === 'a-1')!;
    expect(a0).toMatchObject({
      phase: 'Succeeded',
      aibom: { state: 'pending' },
      policy_pack: { name: pack, version: '2' },
    });
    expect(a1).toMatchObject({ phase: 'Running', aibom: { state: 'none' } });
  });

  it('pages with a keyset cursor bound to the filter: every run once, in order', async () => {
    const seen: string[] = [];
    let cursor: string | null = null;
    let pages = 0;
    do {
      const res: { status: number; body: ListBody } = await list(
        'alice',
        `?limit=2${cursor !== null ? `&cursor=${encodeURIComponent(cursor)}` : ''}`,
      );
      expect(res.status).toBe(200);
      seen.push(...res.body.items.map((r) => r.name));
      cursor = res.body.next_cursor;
      pages++;
    } while (cursor !== null && pages < 10);
    expect(seen).toEqual(['a-4', 'a-3', 'a-2', 'a-1', 'a-0']);
    expect(pages).toBe(3);
    const first = await list('alice', '?limit=2');
    const replayed = await list(
      'alice',
      `?limit=2&phase=Running&cursor=${encodeURIComponent(first.body.next_cursor!)}`,
    );
    expect(replayed.status).toBe(400);
    expect(replayed.body).toMatchObject({
      code: 'CURSOR_INVALID',
      errors: [{ pointer: '/querystring/cursor' }],
    });
  });

  it('filters by phase and name prefix, and refuses bad parameters with pointers', async () => {
    expect((await list('alice', '?phase=Running')).body.items.map((r) => r.name)).toEqual(['a-3', 'a-1']);
    expect((await list('admin', '?name_prefix=b-')).body.items.map((r) => r.name)).toEqual(['b-0']);
    expect((await list('alice', '?limit=0')).body).toMatchObject({
      code: 'VALIDATION_FAILED',
      errors: [{ pointer: '/querystring/limit' }],
    });
    expect((await list('alice', '?namespace=Bad_NS')).status).toBe(400);
    expect((await list('alice', '?phase=Done')).status).toBe(400);
    const many = Array.from({ length: 17 }, (_, i) => `n${i}`).join(',');
    expect((await list('alice', `?namespace=${many}`)).status).toBe(400);
  });

  it('answers 401 without a credential', async () => {
    expect((await fetch(`${url}/v1/runs`)).status).toBe(401);
  });
});

describe('GET /v1/runs/{id}: the policy pack of the run', () => {
  const detail = async (name: string, user: User = 'admin') =>
    (await (await fetch(`${url}/v1/runs/${runIds[name]}`, { headers: bearer(user) })).json()) as {
      policy_pack: Record<string, unknown> & { resource: Record<string, unknown> | null };
    };

  it('resolves the exact version first, then the resource without a version, else none', async () => {
    const v2 = (await detail('a-0', 'alice')).policy_pack;
    expect(v2).toMatchObject({
      name: pack,
      version: '2',
      status: 'resolved',
      declared_guardrails: ['pii-redaction'],
      missing_guardrails: ['secret-detection'],
      resource: {
        name: packs[0],
        version: '2',
        minimum_retention: 'P7Y',
        minimum_retention_text: '7 years',
        notice: 'Keep version 2 evidence for seven years.',
      },
    });
    const v3 = (await detail('b-0', 'bob')).policy_pack;
    expect(v3).toMatchObject({
      version: '3',
      status: 'resolved',
      resource: { name: packs[1], version: null, minimum_retention: 'P90D' },
    });
    // c-0 names no pack: baseline, described by the stack's baseline PolicyPack (manifests/policypacks).
    const c = (await detail('c-0')).policy_pack;
    expect(c).toMatchObject({
      name: 'baseline',
      version: 'unversioned',
      status: 'resolved',
      missing_guardrails: [],
    });
  });
});

/** A browser-like client: keeps cookies, sends what a form would. */
class Browser {
  readonly jar = new Map<string, string>();
  lastSetCookies: string[] = [];
  async request(
    path: string,
    init: {
      method?: string;
      form?: Record<string, string | string[]>;
      headers?: Record<string, string>;
      json?: unknown;
    } = {},
  ) {
    const headers: Record<string, string> = { ...init.headers };
    if (this.jar.size > 0) headers.cookie = [...this.jar].map(([k, v]) => `${k}=${v}`).join('; ');
    let body: string | undefined;
    if (init.form !== undefined) {
      const p = new URLSearchParams();
      for (const [k, v] of Object.entries(init.form)) for (const x of [v].flat()) p.append(k, x);
      body = p.toString();
      headers['content-type'] = 'application/x-www-form-urlencoded';
    } else if (init.json !== undefined) {
      body = JSON.stringify(init.json);
      headers['content-type'] = 'application/json';
    }
    const res = await fetch(`${url}${path}`, {
      method: init.method ?? 'GET',
      headers,
      ...(body !== undefined ? { body } : {}),
      redirect: 'manual',
    });
    this.lastSetCookies = res.headers.getSetCookie();
    for (const c of this.lastSetCookies) {
      const [pair] = c.split(';');
      const eq = pair!.indexOf('=');
      const [k, v] = [pair!.slice(0, eq), pair!.slice(eq + 1)];
      if (/Max-Age=0/.test(c)) this.jar.delete(k);
      else this.jar.set(k, v);
    }
    return {
      status: res.status,
      location: res.headers.get('location'),
      headers: res.headers,
      text: await res.text(),
    };
  }
  static csrfOf(html: string): string {
    const m = /name="_csrf" value="([^"]+)"/.exec(html);
    if (!m) throw new Error('no CSRF field in the page');
    return m[1]!;
  }
  async signIn(user: User): Promise<void> {
    const form = await this.request('/ui/sign-in');
    const res = await this.request('/ui/sign-in', {
      method: 'POST',
      form: { _csrf: Browser.csrfOf(form.text), token: token(user), next: '/ui/runs' },
    });
    expect(res.status).toBe(303);
  }
}

describe('the UI: sessions, CSRF, headers', () => {
  it('sends a browser without a session to the sign-in page, and / to the UI', async () => {
    const b = new Browser();
    expect(await b.request('/')).toMatchObject({ status: 302, location: '/ui/runs' });
    expect(await b.request('/ui/runs?phase=Running')).toMatchObject({
      status: 303,
      location: `/ui/sign-in?next=${encodeURIComponent('/ui/runs?phase=Running')}`,
    });
  });

  it('signs in with a pasted token: a sealed HttpOnly, Secure, SameSite=Strict cookie that does not hold the token', async () => {
    const b = new Browser();
    const form = await b.request('/ui/sign-in');
    expect(form.status).toBe(200);
    const res = await b.request('/ui/sign-in', {
      method: 'POST',
      form: { _csrf: Browser.csrfOf(form.text), token: token('alice'), next: '/ui/runs?phase=Running' },
    });
    expect(res).toMatchObject({ status: 303, location: '/ui/runs?phase=Running' });
    const session = b.lastSetCookies.find((c) => c.startsWith('__Host-aibom-vault-session='))!;
    expect(session).toMatch(/; Path=\/; Secure; HttpOnly; SameSite=Strict; Max-Age=28800$/);
    expect(session).not.toContain(token('alice'));
    const page = await b.request('/ui/runs');
    expect(page.status).toBe(200);
    expect(page.text).toContain('a-4');
    // By its id: the text 'b-0' also turns up inside random UUIDs on the page (…ab-0f…).
    expect(page.text).not.toContain(runIds['b-0']);
    expect(page.text).not.toContain(nsB);
  });

  it('refuses a sign-in without the form token, from another origin, or with a token the API server rejects', async () => {
    const b = new Browser();
    const form = await b.request('/ui/sign-in');
    const csrf = Browser.csrfOf(form.text);
    expect(
      (
        await b.request('/ui/sign-in', {
          method: 'POST',
          form: { _csrf: csrf, token: token('alice') },
          headers: { origin: 'http://evil.example' },
        })
      ).status,
    ).toBe(403);
    await b.request('/ui/sign-in');
    expect((await b.request('/ui/sign-in', { method: 'POST', form: { token: token('alice') } })).status).toBe(
      403,
    );
    expect(b.jar.has('__Host-aibom-vault-session')).toBe(false);
    const fresh = await b.request('/ui/sign-in');
    const bad = await b.request('/ui/sign-in', {
      method: 'POST',
      form: { _csrf: Browser.csrfOf(fresh.text), token: 'not-a-token' },
    });
    expect(bad.status).toBe(401);
    expect(bad.text).toContain('did not accept');
    expect(b.jar.has('__Host-aibom-vault-session')).toBe(false);
    // An open redirect is not possible: `next` is a path of the UI or nothing.
    const again = await b.request('/ui/sign-in');
    const res = await b.request('/ui/sign-in', {
      method: 'POST',
      form: { _csrf: Browser.csrfOf(again.text), token: token('alice'), next: '//evil.example/ui/x' },
    });
    expect(res).toMatchObject({ status: 303, location: '/ui/runs' });
  });

  it('after signing in, goes only to a normalised path under /ui/ (no dot segments, ASCII only)', async () => {
    for (const [next, location] of [
      ['/ui/runs?phase=Running', '/ui/runs?phase=Running'],
      ['/ui/../..//evil.example', '/ui/runs'],
      ['/ui/../v1/runs', '/ui/runs'],
      ['/ui/%2e%2e/v1/audit', '/ui/runs'],
      ['/ui/ru\u00dfns', '/ui/runs'],
    ] as const) {
      const b = new Browser();
      const form = await b.request(`/ui/sign-in?next=${encodeURIComponent(next)}`);
      expect(form.text, next).toContain(`value="${location}"`);
      const res = await b.request('/ui/sign-in', {
        method: 'POST',
        form: { _csrf: Browser.csrfOf(form.text), token: token('alice'), next },
      });
      expect(res, next).toMatchObject({ status: 303, location });
    }
  });

  it('opens no drawer for a key every object inherits (?drawer=constructor)', async () => {
    const b = new Browser();
    await b.signIn('alice');
    for (const drawer of ['constructor', 'toString', '__proto__']) {
      const page = await b.request(`/ui/runs/${runIds['a-0']}?drawer=${drawer}`);
      expect(page.status, drawer).toBe(200);
      expect(page.text, drawer).not.toContain('class="drawer"');
    }
  });

  it('accepts the session cookie on /v1, but a state-changing /v1 request needs the CSRF header; bearer requests do not', async () => {
    const b = new Browser();
    await b.signIn('alice');
    const runs = await b.request('/v1/runs');
    expect(runs.status).toBe(200);
    const query = { namespaces: [nsA], limit: 1 };
    const refused = await b.request('/v1/attestations/query', { method: 'POST', json: query });
    expect(refused.status).toBe(403);
    expect(JSON.parse(refused.text)).toMatchObject({ code: 'CSRF_REJECTED' });
    const page = await b.request('/ui/runs');
    const csrf = Browser.csrfOf(page.text);
    expect(
      (
        await b.request('/v1/attestations/query', {
          method: 'POST',
          json: query,
          headers: { 'x-csrf-token': csrf },
        })
      ).status,
    ).toBe(200);
    // Another session's token does not do.
    const other = new Browser();
    await other.signIn('alice');
    const otherCsrf = Browser.csrfOf((await other.request('/ui/runs')).text);
    expect(otherCsrf).not.toBe(csrf);
    expect(
      (
        await b.request('/v1/attestations/query', {
          method: 'POST',
          json: query,
          headers: { 'x-csrf-token': otherCsrf },
        })
      ).status,
    ).toBe(403);
    // The CLI's way is unchanged: a bearer token, no cookie, no CSRF header.
    const cli = await fetch(`${url}/v1/attestations/query`, {
      method: 'POST',
      headers: { ...bearer('alice'), 'content-type': 'application/json' },
      body: JSON.stringify(query),
    });
    expect(cli.status).toBe(200);
  });

  it('refuses the export and the sign-out without the form token, and signs out with it', async () => {
    const b = new Browser();
    await b.signIn('alice');
    const page = await b.request('/ui/runs');
    const csrf = Browser.csrfOf(page.text);
    const form = { run: runIds['a-0']!, ids: [randomUUID()], ack: 'yes' };
    const noToken = await b.request('/ui/export', { method: 'POST', form });
    expect(noToken.status).toBe(403);
    expect(noToken.text).toContain('CSRF_REJECTED');
    const crossSite = await b.request('/ui/export', {
      method: 'POST',
      form: { ...form, _csrf: csrf },
      headers: { 'sec-fetch-site': 'cross-site' },
    });
    expect(crossSite.status).toBe(403);
    // With the token the request gets through to the export (which finds no such attestation).
    expect((await b.request('/ui/export', { method: 'POST', form: { ...form, _csrf: csrf } })).status).toBe(
      404,
    );
    expect((await b.request('/ui/sign-out', { method: 'POST', form: {} })).status).toBe(403);
    expect(b.jar.has('__Host-aibom-vault-session')).toBe(true);
    expect(await b.request('/ui/sign-out', { method: 'POST', form: { _csrf: csrf } })).toMatchObject({
      status: 303,
      location: '/ui/sign-in',
    });
    expect(b.jar.has('__Host-aibom-vault-session')).toBe(false);
    expect((await b.request('/ui/runs')).status).toBe(303);
  });

  it('treats an altered session cookie as no session', async () => {
    const b = new Browser();
    await b.signIn('alice');
    const v = b.jar.get('__Host-aibom-vault-session')!;
    b.jar.set('__Host-aibom-vault-session', `${v.slice(0, 10)}${v[10] === 'A' ? 'B' : 'A'}${v.slice(11)}`);
    expect((await b.request('/ui/runs')).status).toBe(303);
    expect((await b.request('/v1/runs')).status).toBe(401);
  });

  it('serves pages with a strict Content-Security-Policy and its assets from itself, with no inline script or style', async () => {
    const b = new Browser();
    await b.signIn('alice');
    const page = await b.request(`/ui/runs/${runIds['a-0']}`);
    expect(page.status).toBe(200);
    const csp = page.headers.get('content-security-policy')!;
    expect(csp).toContain("default-src 'none'");
    expect(csp).toContain("script-src 'self'");
    expect(csp).toContain("style-src 'self'");
    expect(csp).not.toContain('unsafe-inline');
    expect(page.headers.get('cache-control')).toBe('no-store');
    expect(page.headers.get('x-frame-options')).toBe('DENY');
    const assets = [...page.text.matchAll(/(?:src|href)="(\/ui\/assets\/[^"]+)"/g)].map((m) => m[1]!);
    expect(assets).toHaveLength(3);
    for (const a of assets) {
      const res = await fetch(`${url}${a}`);
      expect(res.status, a).toBe(200);
      expect(res.headers.get('cache-control')).toContain('immutable');
    }
    expect(page.text).not.toMatch(/<script(?![^>]*\bsrc=)[^>]*>/);
    expect(page.text).not.toMatch(/<style/);
    expect(page.text).not.toMatch(/\sstyle="/);
    // The pack section shows the resource and the notice is in the export dialog.
    expect(page.text).toContain('Keep version 2 evidence for seven years.');
    expect(page.text).toContain('secret-detection');
  });

  it('shows a page of another namespace to nobody who may not read it', async () => {
    const b = new Browser();
    await b.signIn('alice');
    const res = await b.request(`/ui/runs/${runIds['b-0']}`);
    expect(res.status).toBe(404);
    expect(res.text).not.toContain('b-0');
    expect(res.headers.get('content-type')).toContain('text/html');
  });

  it('documents /v1/runs and the policy pack in the OpenAPI document, and no /ui route', async () => {
    const doc = (await (await fetch(`${url}/v1/openapi.json`)).json()) as {
      paths: Record<string, unknown>;
      components: { schemas: Record<string, { properties?: Record<string, unknown> }> };
    };
    expect(doc.paths['/v1/runs']).toBeDefined();
    expect(Object.keys(doc.paths).filter((p) => p.startsWith('/ui') || p === '/')).toEqual([]);
    expect(doc.components.schemas.RunDetail!.properties!.policy_pack).toBeDefined();
    expect(doc.components.schemas.RunPolicyPack).toBeDefined();
    expect(doc.components.schemas.RunList).toBeDefined();
  });
});

// Last: it adds runs in 17 more namespaces, which changes what an unnamed list reads.
describe('more than 16 namespaces holding runs', () => {
  it('asks a caller without a cluster-wide grant to name namespaces: 400 on /v1, a prompt on the page', async () => {
    for (let i = 0; i < 17; i++) {
      await vault.runs.upsert(runOf(uniqueName(`ui-many${i}`), 'x', specWith('2'), 'Pending'));
    }
    const api = await list('alice');
    expect(api.status).toBe(400);
    expect(api.body).toMatchObject({
      code: 'VALIDATION_FAILED',
      errors: [{ pointer: '/querystring/namespace' }],
    });
    expect((await list('alice', `?namespace=${nsA}`)).body.items).toHaveLength(5);
    const b = new Browser();
    await b.signIn('alice');
    const page = await b.request('/ui/runs');
    expect(page.status).toBe(200);
    expect(page.text).toContain('name the namespaces to list');
    const named = await b.request(`/ui/runs?namespace=${nsA}`);
    expect(named.text).toContain('a-4');
    // A caller allowed cluster-wide still reads every namespace without naming any.
    expect((await list('admin')).body.items.length).toBeGreaterThan(16);
  });
});
