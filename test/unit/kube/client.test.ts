import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { KubeConfig } from '@kubernetes/client-node';
import { afterEach, describe, expect, it } from 'vitest';
import {
  KubeApiError,
  isAlreadyExists,
  isConflict,
  isGone,
  isNotFound,
  kubeClient,
  microTime,
  resourcePath,
} from '../../../src/kube/client.ts';

let server: Server | undefined;
afterEach(async () => {
  server?.closeAllConnections();
  await new Promise((r) => server?.close(r) ?? r(undefined));
  server = undefined;
});

async function serve(handler: (req: IncomingMessage, res: ServerResponse) => void) {
  server = createServer(handler);
  await new Promise<void>((r) => server!.listen(0, '127.0.0.1', r));
  const kc = new KubeConfig();
  kc.loadFromOptions({
    clusters: [
      {
        name: 'c',
        server: `http://127.0.0.1:${(server.address() as AddressInfo).port}/prefix`,
        skipTLSVerify: true,
      },
    ],
    users: [{ name: 'u', token: 'tok' }],
    contexts: [{ name: 'x', cluster: 'c', user: 'u' }],
    currentContext: 'x',
  });
  return kubeClient(kc, { timeoutMs: 2000 });
}

describe('kubeClient.request', () => {
  it('sends auth, path prefix, query and body; parses JSON', async () => {
    let seen: { url?: string; auth?: string; type?: string; body: string } = { body: '' };
    const client = await serve((req, res) => {
      let body = '';
      req.on('data', (d: Buffer) => (body += d.toString()));
      req.on('end', () => {
        seen = { url: req.url!, auth: req.headers.authorization!, type: req.headers['content-type']!, body };
        res.writeHead(200, { 'content-type': 'application/json' }).end('{"ok":true}');
      });
    });
    const out = await client.request<{ ok: boolean }>({
      method: 'PATCH',
      path: '/apis/g/v1/x',
      query: { fieldManager: 'me', force: true, skip: undefined },
      body: { a: 1 },
      contentType: 'application/apply-patch+yaml',
    });
    expect(out).toEqual({ ok: true });
    expect(seen).toEqual({
      url: '/prefix/apis/g/v1/x?fieldManager=me&force=true',
      auth: 'Bearer tok',
      type: 'application/apply-patch+yaml',
      body: '{"a":1}',
    });
  });

  it('maps Status answers to KubeApiError by code and reason, with Retry-After', async () => {
    const client = await serve((req, res) => {
      const code = Number(req.url!.split('/').pop());
      const reason = code === 409 && req.method === 'POST' ? 'AlreadyExists' : 'X';
      res
        .writeHead(code, { 'retry-after': '7' })
        .end(JSON.stringify({ kind: 'Status', code, reason, message: `m${code}` }));
    });
    const fail = (path: string, method: 'GET' | 'POST' = 'GET') =>
      client.request({ method, path }).then(
        () => undefined,
        (e: unknown) => e,
      );
    const e404 = await fail('/404');
    expect(e404).toBeInstanceOf(KubeApiError);
    expect((e404 as KubeApiError).message).toBe('m404');
    expect((e404 as KubeApiError).retryAfterSeconds).toBe(7);
    expect(isNotFound(e404)).toBe(true);
    expect(isConflict(await fail('/409'))).toBe(true);
    expect(isAlreadyExists(await fail('/409'))).toBe(false);
    expect(isAlreadyExists(await fail('/409', 'POST'))).toBe(true);
    expect(isGone(await fail('/410'))).toBe(true);
    expect(isNotFound(new Error('404'))).toBe(false);
  });

  it('times out a hung request', async () => {
    const client = await serve(() => undefined);
    await expect(client.request({ method: 'GET', path: '/x', timeoutMs: 100 })).rejects.toThrow(
      /timeout|aborted/i,
    );
  });
});

describe('kubeClient.stream', () => {
  it('splits newline-delimited JSON across arbitrary chunk boundaries', async () => {
    const client = await serve((req, res) => {
      expect(req.url).toBe('/prefix/w?watch=true');
      res.writeHead(200);
      const text = '{"type":"ADDED","n":1}\n{"type":"MODI' + 'FIED","n":2}\n\n{"type":"DELETED","n":3}';
      let i = 0;
      const step = (): void => {
        if (i >= text.length) {
          res.end();
          return;
        }
        res.write(text.slice(i, i + 7));
        i += 7;
        setImmediate(step);
      };
      step();
    });
    const got: unknown[] = [];
    await client.stream({ path: '/w', query: { watch: true }, signal: new AbortController().signal }, (v) =>
      got.push(v),
    );
    expect(got).toEqual([
      { type: 'ADDED', n: 1 },
      { type: 'MODIFIED', n: 2 },
      { type: 'DELETED', n: 3 },
    ]);
  });

  it('decodes characters whose UTF-8 bytes arrive in different chunks', async () => {
    // A watch event carrying names outside the BMP (4 bytes in UTF-8), sent one byte per chunk: a
    // decoder per chunk turned each into U+FFFD, which then reached the informer cache, the run
    // mirror and the records (the property test's immutable-mirror failures).
    const names = ['user:𝣄𞤳𐅙␠ў⨹', 'café', '🛡️:x/y', 'مرحبا'];
    const client = await serve((_req, res) => {
      res.writeHead(200);
      const bytes = Buffer.from(`${JSON.stringify({ type: 'ADDED', names })}\n`, 'utf8');
      let i = 0;
      const step = (): void => {
        if (i >= bytes.length) {
          res.end();
          return;
        }
        res.write(bytes.subarray(i, i + 1));
        i += 1;
        setImmediate(step);
      };
      step();
    });
    const got: unknown[] = [];
    await client.stream({ path: '/w', signal: new AbortController().signal }, (v) => got.push(v));
    expect(got).toEqual([{ type: 'ADDED', names }]);
  });

  it('rejects with the abort reason and closes the connection on abort', async () => {
    let closed = false;
    const client = await serve((req, res) => {
      res.writeHead(200);
      res.write('{"type":"ADDED"}\n');
      req.socket.on('close', () => (closed = true));
    });
    const ac = new AbortController();
    const got: unknown[] = [];
    const p = client.stream({ path: '/w', signal: ac.signal }, (v) => {
      got.push(v);
      ac.abort(new Error('watchdog'));
    });
    await expect(p).rejects.toThrow('watchdog');
    await new Promise((r) => setTimeout(r, 50));
    expect(closed).toBe(true);
  });

  it('rejects when the server drops the connection mid-stream', async () => {
    const client = await serve((req, res) => {
      res.writeHead(200);
      res.write('{"type":"ADDED"}\n');
      setTimeout(() => req.socket.destroy(), 20);
    });
    await expect(
      client.stream({ path: '/w', signal: new AbortController().signal }, () => undefined),
    ).rejects.toThrow();
  });

  it('rejects a non-200 answer with KubeApiError', async () => {
    const client = await serve((_req, res) => {
      res
        .writeHead(403)
        .end(JSON.stringify({ kind: 'Status', code: 403, reason: 'Forbidden', message: 'no' }));
    });
    const err = await client
      .stream({ path: '/w', signal: new AbortController().signal }, () => undefined)
      .catch((e: unknown) => e);
    expect(err).toBeInstanceOf(KubeApiError);
    expect((err as KubeApiError).code).toBe(403);
    expect((err as KubeApiError).reason).toBe('Forbidden');
  });
});

describe('helpers', () => {
  it('resourcePath for core and grouped, namespaced and cluster-wide', () => {
    const runs = { group: 'vault.service.dev', version: 'v1', plural: 'runs', kind: 'Run' };
    expect(resourcePath(runs)).toBe('/apis/vault.service.dev/v1/runs');
    expect(resourcePath(runs, { namespace: 'a', name: 'r', subresource: 'status' })).toBe(
      '/apis/vault.service.dev/v1/namespaces/a/runs/r/status',
    );
    expect(resourcePath({ group: '', version: 'v1', plural: 'nodes', kind: 'Node' }, { name: 'n1' })).toBe(
      '/api/v1/nodes/n1',
    );
  });

  it('microTime has six fractional digits', () => {
    expect(microTime(new Date('2026-01-02T03:04:05.678Z'))).toBe('2026-01-02T03:04:05.678000Z');
  });
});
