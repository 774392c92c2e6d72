/**
 * A TCP proxy that stands in for what a managed PostgreSQL gives its clients: one address (a DNS
 * name or a virtual IP) that a failover moves from the old primary to the promoted standby. It
 * also carries the replication link from the standby to the primary, so that a test can slow that
 * link down the way a congested network between two zones does (`hold`): an asynchronous standby
 * then really misses the last transactions when the primary dies.
 *
 * It runs as its own process (`node hack/stack/proxy.ts --control PORT --listen PORT --target PORT
 * [--link-listen PORT --link-target PORT]`) so that a stack started by `npm run stack -- up` keeps
 * it after the CLI exits, and is driven over a small HTTP API on a loopback control port:
 *
 *   GET  /state                      {target, linkTarget, held, clients, links}
 *   POST /target?port=N              move the address: new connections go to N; every open client
 *                                    connection is closed (as a moved VIP leaves them)
 *   POST /link?hold=1|0              hold (stop forwarding, both ways) or release the link
 *
 * Nothing here is product code: the service never knows it talks through a proxy.
 */
import { createServer as createHttpServer } from 'node:http';
import { connect, createServer, type Server, type Socket } from 'node:net';
import { join } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { freePort, startProcess, waitReady, type Launch, type Proc } from './proc.ts';

const HOST = '127.0.0.1';

export interface ProxyPorts {
  /** The address clients use (DATABASE_URL's port). */
  readonly listen: number;
  /** Where it forwards to now. */
  readonly target: number;
  /** The replication link (primary_conninfo of the standby) and where it leads (the primary). */
  readonly linkListen?: number;
  readonly linkTarget?: number;
  readonly control: number;
}

export interface ProxyState {
  readonly target: number;
  readonly linkTarget: number | null;
  readonly held: boolean;
  /** Open client connections through the address, and through the link. */
  readonly clients: number;
  readonly links: number;
}

/** One forwarded connection: the accepted socket and the one to the target. */
interface Pair {
  readonly client: Socket;
  readonly upstream: Socket;
}

function forward(client: Socket, port: number, pairs: Set<Pair>, held: () => boolean): void {
  const upstream = connect({ host: HOST, port });
  const pair = { client, upstream };
  pairs.add(pair);
  const close = (): void => {
    pairs.delete(pair);
    client.destroy();
    upstream.destroy();
  };
  client.on('error', close).on('close', close);
  upstream.on('error', close).on('close', close);
  // Not pipe(): it resumes a paused source on 'drain', which would undo a hold.
  const relay = (from: Socket, to: Socket): void => {
    from.on('data', (chunk: Buffer) => {
      if (!to.write(chunk)) from.pause();
    });
    to.on('drain', () => {
      if (!held()) from.resume();
    });
  };
  relay(client, upstream);
  relay(upstream, client);
  if (held()) {
    client.pause();
    upstream.pause();
  }
}

/** The proxy itself (the process's main). */
export async function runProxy(ports: ProxyPorts): Promise<{ close(): Promise<void> }> {
  let target = ports.target;
  let held = false;
  const clients = new Set<Pair>();
  const links = new Set<Pair>();
  const servers: (Server | ReturnType<typeof createHttpServer>)[] = [];
  const listen = async (
    server: Server | ReturnType<typeof createHttpServer>,
    port: number,
  ): Promise<void> => {
    servers.push(server);
    await new Promise<void>((resolve, reject) => {
      server.once('error', reject);
      server.listen(port, HOST, () => resolve());
    });
  };
  await listen(
    createServer((c) => forward(c, target, clients, () => false)),
    ports.listen,
  );
  if (ports.linkListen !== undefined && ports.linkTarget !== undefined) {
    const linkTarget = ports.linkTarget;
    await listen(
      createServer((c) => forward(c, linkTarget, links, () => held)),
      ports.linkListen,
    );
  }
  const state = (): ProxyState => ({
    target,
    linkTarget: ports.linkTarget ?? null,
    held,
    clients: clients.size,
    links: links.size,
  });
  const control = createHttpServer((req, res) => {
    const url = new URL(req.url ?? '/', `http://${HOST}`);
    const answer = (status: number, body: unknown): void => {
      res.writeHead(status, { 'content-type': 'application/json' });
      res.end(JSON.stringify(body));
    };
    if (req.method === 'GET' && url.pathname === '/state') return answer(200, state());
    if (req.method === 'POST' && url.pathname === '/target') {
      const port = Number(url.searchParams.get('port'));
      if (!Number.isInteger(port) || port < 1 || port > 65535) return answer(400, { error: 'port' });
      target = port;
      // A moved address leaves no connection to the old server open.
      for (const p of [...clients]) {
        p.client.destroy();
        p.upstream.destroy();
      }
      return answer(200, state());
    }
    if (req.method === 'POST' && url.pathname === '/link') {
      held = url.searchParams.get('hold') === '1';
      for (const p of links) {
        if (held) {
          p.client.pause();
          p.upstream.pause();
        } else {
          p.client.resume();
          p.upstream.resume();
        }
      }
      return answer(200, state());
    }
    answer(404, { error: 'not found' });
  });
  await listen(control, ports.control);
  return {
    async close() {
      for (const p of [...clients, ...links]) {
        p.client.destroy();
        p.upstream.destroy();
      }
      await Promise.all(servers.map((s) => new Promise<void>((r) => s.close(() => r()))));
    },
  };
}

/** A running proxy process. */
export interface Proxy {
  readonly proc: Proc;
  readonly ports: ProxyPorts;
}

/**
 * Starts the proxy process (logs in `<root>/<name>.log`) forwarding `listen` (a free port unless
 * given) to `target`, with the replication link when `linkTarget` is given.
 */
export async function startProxy(
  root: string,
  opts: { name: string; target: number; linkTarget?: number; listen?: number },
  launch: Launch = {},
): Promise<Proxy> {
  const ports: ProxyPorts = {
    listen: opts.listen ?? (await freePort()),
    target: opts.target,
    control: await freePort(),
    ...(opts.linkTarget !== undefined ? { linkListen: await freePort(), linkTarget: opts.linkTarget } : {}),
  };
  const args = [fileURLToPath(import.meta.url), '--listen', String(ports.listen), '--target'];
  args.push(String(ports.target), '--control', String(ports.control));
  if (ports.linkListen !== undefined) {
    args.push('--link-listen', String(ports.linkListen), '--link-target', String(ports.linkTarget));
  }
  const proc = await startProcess({
    name: opts.name,
    command: process.execPath,
    args,
    logFile: join(root, `${opts.name}.log`),
    ...(launch.onSpawn ? { onSpawn: launch.onSpawn } : {}),
  });
  await waitReady(proc, async () => (await proxyState(ports.control)) !== undefined, 30_000, launch.signal);
  return { proc, ports };
}

async function control(port: number, path: string, method: 'GET' | 'POST'): Promise<ProxyState> {
  const res = await fetch(`http://${HOST}:${port}${path}`, { method, signal: AbortSignal.timeout(10_000) });
  if (!res.ok) throw new Error(`proxy control ${method} ${path}: HTTP ${res.status}`);
  return (await res.json()) as ProxyState;
}

export const proxyState = (controlPort: number): Promise<ProxyState> => control(controlPort, '/state', 'GET');

/** Moves the proxied address to `port`, closing every connection open through it. */
export const moveProxy = (controlPort: number, port: number): Promise<ProxyState> =>
  control(controlPort, `/target?port=${port}`, 'POST');

/** Holds (true) or releases (false) the replication link. */
export const holdLink = (controlPort: number, held: boolean): Promise<ProxyState> =>
  control(controlPort, `/link?hold=${held ? 1 : 0}`, 'POST');

function parseArgs(argv: readonly string[]): ProxyPorts {
  const get = (flag: string): number | undefined => {
    const i = argv.indexOf(flag);
    if (i < 0) return undefined;
    const n = Number(argv[i + 1]);
    if (!Number.isInteger(n) || n < 1 || n > 65535)
      throw new Error(`${flag} needs a port, got ${argv[i + 1]}`);
    return n;
  };
  const [listen, target, control] = [get('--listen'), get('--target'), get('--control')];
  if (listen === undefined || target === undefined || control === undefined) {
    throw new Error(
      'usage: proxy.ts --listen PORT --target PORT --control PORT [--link-listen PORT --link-target PORT]',
    );
  }
  const [linkListen, linkTarget] = [get('--link-listen'), get('--link-target')];
  return {
    listen,
    target,
    control,
    ...(linkListen !== undefined && linkTarget !== undefined ? { linkListen, linkTarget } : {}),
  };
}

if (process.argv[1] !== undefined && import.meta.url === pathToFileURL(process.argv[1]).href) {
  try {
    const ports = parseArgs(process.argv.slice(2));
    await runProxy(ports);
    console.log(`proxy listening on ${HOST}:${ports.listen} → ${ports.target}; control ${ports.control}`);
  } catch (err) {
    console.error((err as Error).message);
    process.exit(2);
  }
}
