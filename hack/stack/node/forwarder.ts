#!/usr/bin/env node
/**
 * The node's forwarder: a plain TCP relay from the node's address to the stack's servers, which
 * listen on loopback only (kube-apiserver, PostgreSQL, the object store, the TSA).
 *
 *   node hack/stack/node/forwarder.ts LISTEN_HOST:PORT=TARGET_HOST:PORT ...
 *
 * Pods cannot reach the host's 127.0.0.1 (it is their own); in a real cluster these servers have
 * addresses of their own (a managed database's endpoint, the API server's advertise address).
 * Each accepted connection opens one to the target and pipes bytes both ways, untouched (TLS to
 * the API server is end to end); a refused or dropped target closes the client's connection, as
 * the server itself would. Started and stopped by hack/stack/node (one process per node).
 */
import { connect, createServer, type Socket } from 'node:net';

interface Route {
  readonly listenHost: string;
  readonly listenPort: number;
  readonly targetHost: string;
  readonly targetPort: number;
}

function parseRoute(arg: string): Route {
  const m = /^([0-9.]+):(\d+)=([0-9.]+):(\d+)$/.exec(arg);
  if (!m) throw new Error(`bad route ${JSON.stringify(arg)}: want LISTEN_HOST:PORT=TARGET_HOST:PORT`);
  return { listenHost: m[1]!, listenPort: Number(m[2]), targetHost: m[3]!, targetPort: Number(m[4]) };
}

/**
 * Half-closes pass through (allowHalfOpen on both sockets): a client that sends its request and
 * then FIN still gets the whole answer; either side's reset or full close ends both.
 */
function relay(client: Socket, r: Route): void {
  const upstream = connect({ host: r.targetHost, port: r.targetPort, allowHalfOpen: true });
  client.setNoDelay(true);
  upstream.setNoDelay(true);
  const close = (): void => {
    client.destroy();
    upstream.destroy();
  };
  client.on('error', close);
  upstream.on('error', close);
  client.on('close', close);
  upstream.on('close', close);
  client.pipe(upstream);
  upstream.pipe(client);
}

const routes = process.argv.slice(2).map(parseRoute);
if (routes.length === 0) {
  console.error('usage: forwarder.ts LISTEN_HOST:PORT=TARGET_HOST:PORT ...');
  process.exit(2);
}
const servers = await Promise.all(
  routes.map(
    (r) =>
      new Promise<ReturnType<typeof createServer>>((resolve, reject) => {
        const srv = createServer({ allowHalfOpen: true }, (c) => relay(c, r));
        srv.once('error', reject);
        srv.listen(r.listenPort, r.listenHost, () => resolve(srv));
      }),
  ),
);
for (const r of routes)
  console.log(`forwarding ${r.listenHost}:${r.listenPort} -> ${r.targetHost}:${r.targetPort}`);
const stop = (): void => {
  for (const s of servers) s.close();
  process.exit(0);
};
process.on('SIGTERM', stop);
process.on('SIGINT', stop);
