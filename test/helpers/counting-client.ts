/**
 * Counting what the controller asks of the real kube-apiserver, at the seam it is given (its
 * KubeClient), and telling when an in-process controller is idle from its own metrics.
 */
import type pg from 'pg';
import type { Registry } from 'prom-client';
import { createVaultPool } from '../../src/vault/index.ts';
import type { KubeClient, RequestSpec, StreamSpec } from '../../src/kube/index.ts';
import { metricValue } from './controller-process.ts';
import { waitFor } from './wait.ts';

/** Requests by `VERB resource`, e.g. `PATCH runs/status`, `LIST attestations`, `WATCH runs`. */
export class CountingClient implements KubeClient {
  readonly counts = new Map<string, number>();
  readonly #inner: KubeClient;
  constructor(inner: KubeClient) {
    this.#inner = inner;
  }

  private bump(method: string, path: string, watch: boolean): void {
    const parts = path.split('/').filter(Boolean);
    const at = parts.indexOf('namespaces');
    const [plural, name, sub] = at >= 0 && parts.length > at + 2 ? parts.slice(at + 2) : parts.slice(-1);
    const verb = watch ? 'WATCH' : method === 'GET' && name === undefined ? 'LIST' : method;
    const key = `${verb} ${plural}${sub !== undefined ? `/${sub}` : ''}`;
    this.counts.set(key, (this.counts.get(key) ?? 0) + 1);
  }

  request<T>(spec: RequestSpec): Promise<T> {
    this.bump(spec.method, spec.path, false);
    return this.#inner.request<T>(spec);
  }

  stream(spec: StreamSpec, onObject: (value: unknown) => void): Promise<void> {
    this.bump('GET', spec.path, true);
    return this.#inner.stream(spec, onObject);
  }

  /** Every request except reads and the leader election's Lease renewals. */
  writes(): Record<string, number> {
    return Object.fromEntries(
      [...this.counts].filter(([k]) => !/^(GET|LIST|WATCH) /.test(k) && !k.endsWith(' leases')),
    );
  }

  /** Every request about the work (reads and writes), without Lease renewals and long-lived watches. */
  work(): Record<string, number> {
    return Object.fromEntries(
      [...this.counts].filter(([k]) => !k.startsWith('WATCH ') && !k.endsWith(' leases')),
    );
  }

  reset(): void {
    this.counts.clear();
  }
}

const metric = async (registry: Registry, name: string, labels: Record<string, string>) =>
  metricValue(await registry.metrics(), name, labels);

/** The named controllers of an in-process controller have nothing queued and nothing running. */
export async function isIdle(registry: Registry, controllers: readonly string[]): Promise<boolean> {
  for (const c of controllers) {
    if ((await metric(registry, 'workqueue_depth', { name: c })) !== 0) return false;
    if ((await metric(registry, 'controller_runtime_active_workers', { controller: c })) !== 0) return false;
  }
  return true;
}

export function reconciles(registry: Registry, controller: string): Promise<number> {
  return metric(registry, 'controller_runtime_reconcile_total', { controller });
}

/**
 * Waits until `controller` reconciled at least once more than `before`, then until none of
 * `controllers` has anything queued or running.
 */
export async function settled(
  registry: Registry,
  controller: string,
  before: number,
  controllers: readonly string[] = [controller],
): Promise<void> {
  await waitFor(`${controller} reconciled and idle`, async () => {
    if ((await reconciles(registry, controller)) <= before) return undefined;
    return (await isIdle(registry, controllers)) ? true : undefined;
  });
}

/** A pool that records the text of every statement its clients run (pool.query runs on one too). */
export function countingPool(url: string): { pool: pg.Pool; statements: string[] } {
  const statements: string[] = [];
  const pool = createVaultPool(url);
  // Every physical connection, once, when the pool opens it.
  pool.on('connect', (client) => {
    const target = client as unknown as { query: (...a: unknown[]) => unknown };
    const original = target.query.bind(client);
    target.query = (config: unknown, ...rest: unknown[]) => {
      const text = typeof config === 'string' ? config : (config as { text?: string } | null)?.text;
      if (typeof text === 'string') statements.push(text);
      return original(config, ...rest);
    };
  });
  return { pool, statements };
}
