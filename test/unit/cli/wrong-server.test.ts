/**
 * service-ctl pointed at something that is not the service API (a SERVICE_API_URL naming the
 * kube-apiserver, a proxy's error page, a web server, a server that drops the connection): every
 * command fails with one line that says what answered and exits 1, and nothing is written where a
 * bundle, a trust bundle or an AIBOM was asked for. The peer is a real HTTP server on loopback,
 * answering whatever the test case says; the commands against the real API are in
 * test/integration/cli.test.ts.
 */
import { existsSync, mkdtempSync, readdirSync, rmSync } from 'node:fs';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ApiClient, ApiError, oneLine } from '../../../src/cli/client.ts';
import { cliMain } from '../../helpers/cli-main.ts';

const RUN = '0190a6c0-0000-7000-8000-000000000001';

interface Answer {
  status: number;
  type?: string;
  body: string;
  /** Declare this many bytes, send `body`, then drop the connection. */
  cutAt?: number;
}

/** What the server answers, by case; set before each request. */
let answer: Answer = { status: 200, body: '' };
let server: Server;
let base: string;
let dir: string;

beforeAll(async () => {
  server = createServer((req, res) => {
    req.resume();
    const headers: Record<string, string> = answer.type !== undefined ? { 'content-type': answer.type } : {};
    if (answer.cutAt !== undefined) {
      res.writeHead(answer.status, { ...headers, 'content-length': String(answer.cutAt) });
      res.write(answer.body);
      setTimeout(() => req.socket.destroy(), 20);
      return;
    }
    res.writeHead(answer.status, headers);
    res.end(answer.body);
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  dir = mkdtempSync(join(tmpdir(), 'aibom-vault-wrong-server-'));
});

afterAll(async () => {
  server.closeAllConnections();
  await new Promise<void>((resolve) => server.close(() => resolve()));
  rmSync(dir, { recursive: true, force: true });
});

const NGINX_502 =
  '<html>\r\n<head><title>502 Bad Gateway</title></head>\r\n<body>\r\n<center><h1>502 Bad Gateway</h1></center>\r\n</body>\r\n</html>\r\n';
// What a kube-apiserver answers for a path it does not serve: JSON, but its `code` is a number.
const KUBE_404 = JSON.stringify({
  kind: 'Status',
  apiVersion: 'v1',
  status: 'Failure',
  message: 'the server could not find the requested resource',
  reason: 'NotFound',
  code: 404,
});

const answers: [string, Answer][] = [
  [
    'a web page (200 text/html)',
    { status: 200, type: 'text/html', body: '<html>\n<body>hi</body>\n</html>\n' },
  ],
  ['a proxy error page (502 text/html)', { status: 502, type: 'text/html', body: NGINX_502 }],
  ["the kube-apiserver's 404 Status", { status: 404, type: 'application/json', body: KUBE_404 }],
  ['an empty JSON object', { status: 200, type: 'application/json', body: '{}' }],
  ['a JSON array', { status: 200, type: 'application/json', body: '[1,2]' }],
  ['JSON that is cut off', { status: 200, type: 'application/json', body: '{"id":"', cutAt: 1000 }],
  ['no content type, no body', { status: 200, body: '' }],
];

const commands: [string, string[], string | undefined][] = [
  ['get', ['get', '--run', RUN], undefined],
  ['query', ['query', '--run', RUN], undefined],
  ['query --limit', ['query', '--run', RUN, '--limit', '5'], undefined],
  ['aibom fetch', ['aibom', 'fetch', '--run', RUN, '--out', 'AIBOM'], 'AIBOM'],
  ['keys fetch', ['keys', 'fetch', '--out', 'TRUST'], 'TRUST'],
  ['attestation export', ['attestation', 'export', '--run', RUN, '--output', 'BUNDLE.tar'], 'BUNDLE.tar'],
  [
    'audit export',
    ['audit', 'export', '--run', RUN, '--artifact', 'aibom', '--output', 'EVIDENCE.tar'],
    'EVIDENCE.tar',
  ],
  ['audit log', ['audit', 'log'], undefined],
];

describe('service-ctl against a server that is not the service API', () => {
  describe.each(answers)('%s', (_name, given) => {
    it.each(commands)(
      '%s: one line on stderr naming the URL, exit 1, nothing written',
      async (_c, argv, out) => {
        answer = given;
        const target =
          out === undefined ? undefined : join(dir, `${out}-${Math.random().toString(36).slice(2)}`);
        const args = argv.map((a) => (a === out && target !== undefined ? target : a));
        const { code, stdout, stderr } = await cliMain(...args, '--api-url', base);
        expect(code).toBe(1);
        expect(stdout).toBe('');
        const lines = stderr.trimEnd().split('\n');
        expect(lines).toHaveLength(1);
        expect(lines[0]).toMatch(/^service-ctl: /);
        expect(lines[0]).toContain(base);
        // No parser's or runtime's own words reach the user.
        expect(lines[0]).not.toMatch(
          /Unexpected token|Cannot read properties|is not iterable|TypeError|"data" argument/,
        );
        if (target !== undefined) expect(existsSync(target)).toBe(false);
        // Nor a temporary file of a download left beside it.
        expect(readdirSync(dir).filter((f) => f.endsWith('.part'))).toEqual([]);
      },
    );
  });
});

describe('ApiClient', () => {
  it('a problem of the API keeps its code and detail, flattened to one visible line', async () => {
    answer = {
      status: 403,
      type: 'application/problem+json',
      body: JSON.stringify({
        code: 'FORBIDDEN',
        title: 'Forbidden',
        detail: 'no\nread \u001b[2Jon\u202Eabc',
      }),
    };
    const err = await new ApiClient({ baseUrl: base }).json('GET', '/v1/runs/x').then(
      () => undefined,
      (e: unknown) => e,
    );
    expect(err).toBeInstanceOf(ApiError);
    expect((err as ApiError).status).toBe(403);
    expect((err as ApiError).problemCode).toBe('FORBIDDEN');
    // The escape sequence and the newline cannot reach the terminal; the bidi override is shown.
    expect((err as ApiError).message).toBe('HTTP 403 FORBIDDEN: no read [2Jon[U+202E]abc');
  });

  it('a problem whose detail is not a string shows its title', async () => {
    answer = {
      status: 409,
      type: 'application/problem+json',
      body: JSON.stringify({ code: 'CONFLICT', title: 'Conflict', detail: { nested: true } }),
    };
    await expect(new ApiClient({ baseUrl: base }).json('GET', '/v1/runs/x')).rejects.toThrow(
      /^HTTP 409 CONFLICT: Conflict$/,
    );
  });

  it('a success in a media type the request did not accept is refused before its body is read', async () => {
    answer = { status: 200, type: 'application/octet-stream', body: 'x'.repeat(100) };
    await expect(
      new ApiClient({ baseUrl: base }).request('GET', '/v1/keys/x', undefined, 'application/x-pem-file'),
    ).rejects.toThrow(/answered HTTP 200 application\/octet-stream, not application\/x-pem-file/);
    // `+json` types are JSON (RFC 6839); parameters do not matter; */* takes anything.
    answer = { status: 200, type: 'application/vnd.cyclonedx+json; charset=utf-8', body: '{"a":1}' };
    expect(await new ApiClient({ baseUrl: base }).json('GET', '/v1/x')).toEqual({ a: 1 });
    answer = { status: 200, type: 'application/octet-stream', body: 'abc' };
    expect((await new ApiClient({ baseUrl: base }).bytes('GET', '/v1/x', '*/*')).toString()).toBe('abc');
  });

  it('oneLine: control characters become single spaces and long text is cut', () => {
    expect(oneLine('a\r\n\tb\u0000\u0007c   d')).toBe('a b c d');
    expect(oneLine('x'.repeat(500), 10)).toBe(`${'x'.repeat(10)}…`);
  });
});
