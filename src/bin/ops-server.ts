import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { Registry, collectDefaultMetrics } from 'prom-client';
import type { Logger } from '../log/index.ts';

export interface OpsServer {
  readonly port: number;
  readonly registry: Registry;
  close(): Promise<void>;
}

export interface OpsOptions {
  readonly logger: Logger;
  readonly port: number;
  readonly host?: string;
  readonly registry?: Registry;
  /** Throws when the process should not receive work (e.g. informers not synced). */
  readonly ready?: () => Promise<void>;
}

/** Plain node:http server for /metrics, /healthz and /readyz: kept apart from the API on purpose. */
export async function startOpsServer(opts: OpsOptions): Promise<OpsServer> {
  const registry = opts.registry ?? new Registry();
  if (!opts.registry) collectDefaultMetrics({ register: registry });
  const server = createServer((req, res) => {
    const send = (code: number, type: string, body: string): void => {
      res.writeHead(code, { 'content-type': type }).end(body);
    };
    if (req.url === '/metrics') {
      registry.metrics().then(
        (text) => send(200, registry.contentType, text),
        (err: unknown) => send(500, 'text/plain', String(err)),
      );
    } else if (req.url === '/healthz') {
      send(200, 'text/plain', 'ok');
    } else if (req.url === '/readyz') {
      (opts.ready ?? (() => Promise.resolve()))().then(
        () => send(200, 'text/plain', 'ok'),
        (err: unknown) => send(503, 'text/plain', (err as Error).message),
      );
    } else {
      send(404, 'text/plain', 'not found');
    }
  });
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(opts.port, opts.host ?? '0.0.0.0', resolve);
  });
  const port = (server.address() as AddressInfo).port;
  opts.logger.debug({ port }, 'ops server listening');
  return {
    port,
    registry,
    close: () => new Promise<void>((resolve, reject) => server.close((e) => (e ? reject(e) : resolve()))),
  };
}
