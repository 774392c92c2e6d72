/**
 * The service's own kubeconfig and in-cluster loader (src/kube/access.ts) against local HTTP(S)
 * servers: TLS is verified against the kubeconfig's CA and server name, client certificates and
 * tokens reach the server, files are resolved as kubectl resolves them and re-read as they rotate,
 * and a kubeconfig it cannot use is refused with one line saying why. The stack's kubeconfigs are
 * loaded the same way by the integration tests (test/helpers/stack.ts kubeAccess) and the
 * controller and sidecar processes they start.
 */
import { mkdir, mkdtemp, rm, writeFile } from 'node:fs/promises';
import {
  createServer as createHttpServer,
  type IncomingMessage,
  type RequestOptions,
  type ServerResponse,
} from 'node:http';
import { createServer as createHttpsServer, type AgentOptions } from 'node:https';
import type { AddressInfo, Server } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { TLSSocket } from 'node:tls';
import { afterEach, beforeAll, describe, expect, it, vi } from 'vitest';
import { stringify } from 'yaml';
import { generateDevPki, type DevPki } from '../../../hack/dev-pki.ts';
import {
  inClusterAccess,
  KubeAccessError,
  kubeconfigAccess,
  loadKubeAccess,
  type KubeAccess,
} from '../../../src/kube/access.ts';
import { kubeClient } from '../../../src/kube/client.ts';
import { hasCode } from '../../../src/errors.ts';

const SERVER_AUTH = '1.3.6.1.5.5.7.3.1';
const CLIENT_AUTH = '1.3.6.1.5.5.7.3.2';

let serverPki: DevPki;
let clientPki: DevPki;
let otherCa: DevPki;
let dir: string;
let server: Server | undefined;

beforeAll(async () => {
  // The server's certificate names no IP: the client must be told the name (tls-server-name).
  serverPki = await generateDevPki({ leafCommonName: 'kube.test', extraLeafEkus: [SERVER_AUTH] });
  clientPki = await generateDevPki({
    leafCommonName: 'system:serviceaccount:ns:ctl',
    extraLeafEkus: [CLIENT_AUTH],
  });
  otherCa = await generateDevPki({ caCommonName: 'some other CA' });
});

afterEach(async () => {
  vi.useRealTimers();
  if (server) {
    const s = server;
    server = undefined;
    await new Promise((r) => s.close(r));
  }
  if (dir) await rm(dir, { recursive: true, force: true });
});

interface Seen {
  authorization?: string;
  impersonate?: string;
  clientCn?: string;
}

function answer(seen: Seen[]) {
  return (req: IncomingMessage, res: ServerResponse) => {
    const peer = (req.socket as TLSSocket).getPeerCertificate?.();
    seen.push({
      ...(req.headers.authorization !== undefined ? { authorization: req.headers.authorization } : {}),
      ...(typeof req.headers['impersonate-user'] === 'string'
        ? { impersonate: req.headers['impersonate-user'] }
        : {}),
      ...(peer?.subject?.CN !== undefined ? { clientCn: String(peer.subject.CN) } : {}),
    });
    res.writeHead(200, { 'content-type': 'application/json' }).end('{"kind":"Status"}');
  };
}

/** An HTTPS API server stand-in that asks for (and verifies) a client certificate. */
async function httpsServer(seen: Seen[]): Promise<string> {
  const s = createHttpsServer(
    {
      cert: serverPki['tls.crt'],
      key: serverPki['tls.key'],
      ca: clientPki['ca.crt'],
      requestCert: true,
      rejectUnauthorized: false,
    },
    answer(seen),
  );
  server = s;
  await new Promise<void>((r) => s.listen(0, '127.0.0.1', r));
  return `https://127.0.0.1:${(s.address() as AddressInfo).port}`;
}

async function httpServer(seen: Seen[]): Promise<string> {
  const s = createHttpServer(answer(seen));
  server = s;
  await new Promise<void>((r) => s.listen(0, '127.0.0.1', r));
  return `http://127.0.0.1:${(s.address() as AddressInfo).port}`;
}

async function tempDir(): Promise<string> {
  dir = await mkdtemp(join(tmpdir(), 'kube-access-'));
  return dir;
}

function kubeconfig(cluster: Record<string, unknown>, user: Record<string, unknown>): string {
  return stringify({
    apiVersion: 'v1',
    kind: 'Config',
    'current-context': 'here',
    contexts: [
      { name: 'elsewhere', context: { cluster: 'other', user: 'nobody' } },
      { name: 'here', context: { cluster: 'c', user: 'u' } },
    ],
    clusters: [
      { name: 'other', cluster: { server: 'https://192.0.2.1:6443' } },
      { name: 'c', cluster },
    ],
    users: [
      { name: 'nobody', user: { token: 'not-this-one' } },
      { name: 'u', user },
    ],
  });
}

function load(text: string, file = '/nowhere/kubeconfig'): KubeAccess {
  const access = kubeconfigAccess(text, file);
  if (!access) throw new Error('expected the service to load this kubeconfig itself');
  return access;
}

const get = (access: KubeAccess) =>
  kubeClient(access, { timeoutMs: 5_000 }).request({ method: 'GET', path: '/version' });

const b64 = (s: string) => Buffer.from(s).toString('base64');

describe('kubeconfigAccess over TLS', () => {
  it('verifies the server against the CA and tls-server-name, and presents the client certificate from files relative to the kubeconfig', async () => {
    const seen: Seen[] = [];
    const server = await httpsServer(seen);
    const root = await tempDir();
    await mkdir(join(root, 'pki'));
    await writeFile(join(root, 'pki', 'ca.crt'), serverPki['ca.crt']);
    await writeFile(join(root, 'pki', 'client.crt'), clientPki['tls.crt']);
    await writeFile(join(root, 'pki', 'client.key'), clientPki['tls.key']);
    const file = join(root, 'kubeconfig');
    const access = load(
      kubeconfig(
        { server, 'certificate-authority': 'pki/ca.crt', 'tls-server-name': 'kube.test' },
        { 'client-certificate': 'pki/client.crt', 'client-key': 'pki/client.key', as: 'alice' },
      ),
      file,
    );
    expect(access.getCurrentCluster()?.server).toBe(server);
    await get(access);
    expect(seen).toEqual([{ clientCn: 'system:serviceaccount:ns:ctl', impersonate: 'alice' }]);
  });

  it('refuses a server its CA did not sign, and one whose name does not match', async () => {
    const server = await httpsServer([]);
    const wrongCa = load(
      kubeconfig(
        { server, 'certificate-authority-data': b64(otherCa['ca.crt']), 'tls-server-name': 'kube.test' },
        { token: 't' },
      ),
    );
    await expect(get(wrongCa)).rejects.toThrow(/certificate/i);
    const wrongName = load(
      kubeconfig({ server, 'certificate-authority-data': b64(serverPki['ca.crt']) }, { token: 't' }),
    );
    // No tls-server-name: the name checked is 127.0.0.1, which the certificate does not carry.
    await expect(get(wrongName)).rejects.toThrow(/127\.0\.0\.1|altnames|certificate/i);
  });

  it('sends the bearer token of the current context, from data or a token file', async () => {
    const seen: Seen[] = [];
    const server = await httpsServer(seen);
    const ca = b64(serverPki['ca.crt']);
    const cluster = { server, 'certificate-authority-data': ca, 'tls-server-name': 'kube.test' };
    await get(load(kubeconfig(cluster, { token: 'inline-token' })));
    const root = await tempDir();
    await writeFile(join(root, 'token'), 'file-token\n');
    await get(load(kubeconfig(cluster, { tokenFile: 'token' }), join(root, 'kubeconfig')));
    expect(seen.map((s) => s.authorization)).toEqual(['Bearer inline-token', 'Bearer file-token']);
  });
});

describe('kubeconfigAccess over plain HTTP', () => {
  it('is allowed only with insecure-skip-tls-verify, and sends basic auth', async () => {
    const seen: Seen[] = [];
    const server = await httpServer(seen);
    await get(
      load(kubeconfig({ server, 'insecure-skip-tls-verify': true }, { username: 'u', password: 'p' })),
    );
    expect(seen).toEqual([{ authorization: `Basic ${b64('u:p')}` }]);
    expect(() => load(kubeconfig({ server }, { token: 't' }))).toThrow(
      /plain HTTP; that needs insecure-skip-tls-verify/,
    );
  });
});

describe('kubeconfigAccess refuses what it cannot use, in one line', () => {
  const cases: [string, string, RegExp][] = [
    ['not YAML', 'clusters: [', /not YAML/],
    ['a list', '- a\n- b\n', /not a kubeconfig/],
    ['no current context', stringify({ clusters: [] }), /no current-context/],
    ['a missing context', stringify({ 'current-context': 'x', contexts: [] }), /no context named "x"/],
    [
      'a missing cluster',
      stringify({ 'current-context': 'x', contexts: [{ name: 'x', context: { cluster: 'c', user: 'u' } }] }),
      /no cluster named "c"/,
    ],
    [
      'a missing user',
      stringify({
        'current-context': 'x',
        contexts: [{ name: 'x', context: { cluster: 'c', user: 'u' } }],
        clusters: [{ name: 'c', cluster: { server: 'https://h' } }],
      }),
      /no user named "u"/,
    ],
    ['a cluster without a server', kubeconfig({}, { token: 't' }), /cluster "c" has no server/],
    [
      'a token that is not a string',
      kubeconfig({ server: 'https://h' }, { token: 42 }),
      /token must be a string/,
    ],
  ];
  it.each(cases)('%s', (_what, text, message) => {
    let thrown: unknown;
    try {
      kubeconfigAccess(text, '/etc/kc');
    } catch (err) {
      thrown = err;
    }
    expect(hasCode(thrown, 'KUBECONFIG_INVALID')).toBe(true);
    expect((thrown as Error).message).toMatch(message);
    expect((thrown as Error).message).toMatch(/^kubeconfig \/etc\/kc: /);
    expect((thrown as Error).message).not.toContain('\n');
  });

  it('names an unreadable KUBECONFIG', async () => {
    await expect(loadKubeAccess('/nonexistent/kubeconfig')).rejects.toThrow(
      /^KUBECONFIG: cannot read \/nonexistent\/kubeconfig/,
    );
  });
});

describe('kubeconfigs with exec plugins, auth providers or proxies', () => {
  it('go to client-node, whose KubeConfig is a KubeAccess too', async () => {
    const exec = kubeconfig(
      { server: 'https://h' },
      { exec: { apiVersion: 'client.authentication.k8s.io/v1', command: 'true' } },
    );
    expect(kubeconfigAccess(exec, '/k')).toBeUndefined();
    expect(
      kubeconfigAccess(kubeconfig({ server: 'https://h', 'proxy-url': 'http://p:3128' }, {}), '/k'),
    ).toBeUndefined();
    const root = await tempDir();
    await writeFile(join(root, 'kubeconfig'), exec);
    const access = await loadKubeAccess(join(root, 'kubeconfig'));
    expect(access.constructor.name).toBe('KubeConfig');
    expect(access.getCurrentCluster()?.server).toBe('https://h');
  });
});

describe('inClusterAccess', () => {
  it('needs the service environment of a pod', () => {
    let thrown: unknown;
    try {
      inClusterAccess({}, '/nonexistent');
    } catch (err) {
      thrown = err;
    }
    expect(thrown).toBeInstanceOf(KubeAccessError);
    expect(hasCode(thrown, 'NOT_IN_CLUSTER')).toBe(true);
    expect((thrown as Error).message).toMatch(/set KUBECONFIG/);
  });

  it('brackets an IPv6 service address, as client-go does', () => {
    const access = inClusterAccess(
      { KUBERNETES_SERVICE_HOST: 'fd00::1', KUBERNETES_SERVICE_PORT: '443' },
      '/x',
    );
    expect(access.getCurrentCluster()?.server).toBe('https://[fd00::1]:443');
  });

  it('uses the mounted CA and reads the rotated token again after a minute, not before', async () => {
    const sa = await tempDir();
    await writeFile(join(sa, 'ca.crt'), serverPki['ca.crt']);
    await writeFile(join(sa, 'token'), 'first');
    const access = inClusterAccess(
      { KUBERNETES_SERVICE_HOST: '10.0.0.1', KUBERNETES_SERVICE_PORT: '443' },
      sa,
    );
    vi.useFakeTimers({ toFake: ['Date'] });
    const headers = async () => {
      const opts: RequestOptions & AgentOptions = {};
      await access.applyToHTTPSOptions(opts);
      return { auth: (opts.headers as Record<string, string>).authorization, ca: String(opts.ca) };
    };
    expect(await headers()).toEqual({ auth: 'Bearer first', ca: serverPki['ca.crt'] });
    await writeFile(join(sa, 'token'), 'second');
    vi.advanceTimersByTime(30_000);
    expect((await headers()).auth, 'within the minute: the token read before').toBe('Bearer first');
    vi.advanceTimersByTime(31_000);
    expect((await headers()).auth, 'after it: the rotated token').toBe('Bearer second');
  });
});
