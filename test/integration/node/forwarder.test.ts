/**
 * The node's forwarder (hack/stack/node/forwarder.ts): pods reach the stack's loopback servers
 * through it, so it must relay bytes untouched both ways (TLS to the API server goes through it)
 * and pass a refused or vanished server on as a closed connection, never hang. Real sockets, the
 * forwarder as its own process, as the node starts it.
 */
import { createHash, randomBytes } from 'node:crypto';
import { mkdtemp, readFile, rm } from 'node:fs/promises';
import { connect, createServer, type Server, type Socket } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { freePort, startProcess, stopProcess, waitReady, type Proc } from '../../../hack/stack/proc.ts';
import { repoRoot } from '../../../hack/stack/stack.ts';

let work: string;
let fwd: Proc;
let echo: Server;
const [echoPort, deadPort, listenEcho, listenDead] = [0, 0, 0, 0];
const ports = { echo: echoPort, dead: deadPort, listenEcho, listenDead };

beforeAll(async () => {
  work = await mkdtemp(join(tmpdir(), 'forwarder-test-'));
  ports.echo = await freePort();
  ports.dead = await freePort(); // nothing listens here
  ports.listenEcho = await freePort();
  ports.listenDead = await freePort();
  echo = createServer({ allowHalfOpen: true }, (s) => s.pipe(s));
  await new Promise<void>((r) => echo.listen(ports.echo, '127.0.0.1', r));
  fwd = await startProcess({
    name: 'node-forwarder',
    command: process.execPath,
    args: [
      join(repoRoot, 'hack/stack/node/forwarder.ts'),
      `127.0.0.1:${ports.listenEcho}=127.0.0.1:${ports.echo}`,
      `127.0.0.1:${ports.listenDead}=127.0.0.1:${ports.dead}`,
    ],
    logFile: join(work, 'forwarder.log'),
  });
  await waitReady(fwd, async () => (await readFile(fwd.logFile, 'utf8')).includes('forwarding'), 30_000);
});

afterAll(async () => {
  if (fwd) await stopProcess(fwd.pid);
  echo?.close();
  if (work) await rm(work, { recursive: true, force: true });
});

/** Sends `data`, half-closes, and collects everything until the other side closes. */
function exchange(port: number, data: Buffer): Promise<{ got: Buffer; error?: string }> {
  return new Promise((resolve) => {
    const chunks: Buffer[] = [];
    const s: Socket = connect({ host: '127.0.0.1', port }, () => s.end(data));
    s.on('data', (c: Buffer) => chunks.push(c));
    s.on('error', (e) => resolve({ got: Buffer.concat(chunks), error: e.message }));
    s.on('close', () => resolve({ got: Buffer.concat(chunks) }));
  });
}

it('relays 4 MiB both ways byte for byte, for several connections at once', async () => {
  const payloads = Array.from({ length: 4 }, () => randomBytes(1024 * 1024));
  const results = await Promise.all(payloads.map((p) => exchange(ports.listenEcho, p)));
  for (const [i, r] of results.entries()) {
    expect(createHash('sha256').update(r.got).digest('hex'), `connection ${i}`).toBe(
      createHash('sha256').update(payloads[i]!).digest('hex'),
    );
  }
});

it('closes the client connection when the server refuses it (as the server would), and keeps serving', async () => {
  const r = await exchange(ports.listenDead, Buffer.from('hello'));
  expect(r.got.length).toBe(0);
  const again = await exchange(ports.listenEcho, Buffer.from('still here'));
  expect(again.got.toString()).toBe('still here');
});

it('refuses a malformed route with a usage error, before listening', async () => {
  const bad = await startProcess({
    name: 'bad-forwarder',
    command: process.execPath,
    args: [join(repoRoot, 'hack/stack/node/forwarder.ts'), 'not-a-route'],
    logFile: join(work, 'bad.log'),
  });
  await expect(waitReady(bad, () => Promise.resolve(false), 30_000)).rejects.toThrow(/exited/);
  expect(await readFile(bad.logFile, 'utf8')).toMatch(/bad route "not-a-route"/);
});
