import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { DependenciesUnavailable } from '../health/dependencies.ts';
import { Registry, collectDefaultMetrics } from 'prom-client';
import type { Logger } from '../log/index.ts';

export interface OpsServer {
  readonly port: number;
  readonly registry: Registry;
  close(): Promise<void>;
}

export interface OpsOptions {
  readonly logger: Logger;
  /** METRICS_HOST and METRICS_PORT: bound exactly as configured. */
  readonly host: string;
  readonly port: number;
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
        (err: unknown) => {
          opts.logger.error({ err }, 'collecting metrics failed');
          send(500, 'text/plain', 'internal error');
        },
      );
    } else if (req.url === '/healthz') {
      send(200, 'text/plain', 'ok');
    } else if (req.url === '/readyz') {
      // Unauthenticated: ready or not, and which dependency is down by name; never why or where
      // (the underlying error may name internal addresses: it goes to the log).
      (opts.ready ?? (() => Promise.resolve()))().then(
        () => send(200, 'text/plain', 'ok'),
        (err: unknown) => {
          opts.logger.warn({ err }, 'not ready');
          send(
            503,
            'text/plain',
            err instanceof DependenciesUnavailable
              ? `not ready: ${err.dependencies.join(', ')} unavailable`
              : 'not ready',
          );
        },
      );
    } else {
      send(404, 'text/plain', 'not found');
    }
  });
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(opts.port, opts.host, resolve);
  });
  const port = (server.address() as AddressInfo).port;
  opts.logger.info({ host: opts.host, port }, 'ops server listening');
  return {
    port,
    registry,
    close: () => new Promise<void>((resolve, reject) => server.close((e) => (e ? reject(e) : resolve()))),
  };
}
