/**
 * The service processes as the stack (and a deployment) starts them: src/bin/controller.ts and
 * src/bin/sidecar.ts with their configuration from the environment, on this run's stack (a fresh
 * database, Runs of a namespace of their own). Issue 11 items 5 and 9: the sidecar's request
 * timeout (from its environment) cuts off a client that never finishes its body, and no server of either
 * process listens on every interface when the configuration says loopback (METRICS_HOST,
 * HTTP_HOST = 127.0.0.1 in the stack).
 */
import { mkdtemp, readdir, readFile, readlink, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startServices, type StackInfo } from '../../../hack/stack/stack.ts';
import { stopProcess, type Proc } from '../../../hack/stack/proc.ts';
import { createNamespace } from '../../helpers/rbac.ts';
import { expect408, holdOpen } from '../../helpers/sockets.ts';
import { envForOtherDatabase, freshDatabase, stack, uniqueName } from '../../helpers/stack.ts';

const REQUEST_TIMEOUT_MS = 3000;
const procs: Proc[] = [];
let root: string;
let apiUrl: URL;

beforeAll(async () => {
  root = await mkdtemp(join(tmpdir(), 'services-'));
  const ns = uniqueName('services');
  await createNamespace(ns);
  const info: StackInfo = {
    ...stack(),
    root,
    procs: [],
    env: envForOtherDatabase(await freshDatabase('services')),
  };
  const settings = {
    WATCH_NAMESPACE: ns,
    LEADER_ELECTION_LEASE: uniqueName('services'),
    LOG_LEVEL: 'info',
    // Short, so the test is quick; what is tested is that the settings reach the server.
    HTTP_REQUEST_TIMEOUT_MS: String(REQUEST_TIMEOUT_MS),
    HTTP_HEADERS_TIMEOUT_MS: '2000',
  };
  const { apiUrl: url } = await startServices(info, settings, undefined, { onSpawn: (p) => procs.push(p) });
  apiUrl = new URL(url);
}, 180_000);

afterAll(async () => {
  for (const p of procs.reverse()) await stopProcess(p.pid);
  if (root) await rm(root, { recursive: true, force: true });
});

/** Addresses (`ip:port`) the process listens on: its socket inodes matched in /proc/net/tcp{,6}. */
async function listening(pid: number): Promise<string[]> {
  const inodes = new Set<string>();
  for (const fd of await readdir(`/proc/${pid}/fd`)) {
    const link = await readlink(`/proc/${pid}/fd/${fd}`).catch(() => '');
    const m = /^socket:\[(\d+)\]$/.exec(link);
    if (m) inodes.add(m[1]!);
  }
  const out: string[] = [];
  for (const file of ['/proc/net/tcp', '/proc/net/tcp6']) {
    const lines = (await readFile(file, 'utf8').catch(() => '')).split('\n').slice(1);
    for (const line of lines) {
      const f = line.trim().split(/\s+/);
      if (f.length < 10 || f[3] !== '0A' || !inodes.has(f[9]!)) continue; // 0A = LISTEN
      const [hex, port] = f[1]!.split(':') as [string, string];
      const ip =
        hex.length === 8
          ? (hex.match(/../g) ?? [])
              .reverse()
              .map((b) => parseInt(b, 16))
              .join('.')
          : /^0+$/.test(hex)
            ? '::'
            : hex === '00000000000000000000000001000000'
              ? '::1'
              : hex;
      out.push(`${ip}:${parseInt(port, 16)}`);
    }
  }
  return out;
}

describe('controller and sidecar processes', () => {
  it('listen on loopback only, as configured (API and ops servers)', async () => {
    for (const p of procs) {
      const addrs = await listening(p.pid);
      // The sidecar: API + ops server; the controller: its ops server.
      expect(addrs.length, `${p.name}: ${addrs.join(', ')}`).toBeGreaterThanOrEqual(
        p.name === 'sidecar' ? 2 : 1,
      );
      for (const a of addrs) expect(a, `${p.name} listens on ${a}`).toMatch(/^127\.0\.0\.1:\d+$/);
    }
  });

  it('the sidecar cuts off a valid token whose body never completes (HTTP_REQUEST_TIMEOUT_MS): 408, closed', async () => {
    const ended = await holdOpen(apiUrl.hostname, Number(apiUrl.port), [
      'POST /v1/attestations/query HTTP/1.1\r\nHost: x\r\n' +
        `Authorization: Bearer ${stack().kube.tokens.admin}\r\nContent-Type: application/json\r\nContent-Length: 1000\r\n\r\n`,
      '{"namespaces": [',
    ]);
    expect408(ended);
    console.log(
      `sidecar process, body never completed: closed after ${ended.ms.toFixed(0)} ms (HTTP_REQUEST_TIMEOUT_MS=${REQUEST_TIMEOUT_MS})`,
    );
  }, 120_000);
});
