/**
 * SHUTDOWN_DELAY_SECONDS (src/bin/lifecycle.ts, Drain): after SIGTERM the API process reports not
 * ready at once but keeps answering on new connections for the delay, and only then closes its
 * listener. Found by the e2e's rolling `helm upgrade`: a listener closed at SIGTERM refused one
 * connection kube-proxy still routed to the old pod. The process's own stop function (what
 * SIGTERM calls) runs in-process against the real stack's PostgreSQL, MinIO and kube-apiserver.
 */
import { Agent, request } from 'node:http';
import { afterAll, describe, expect, it } from 'vitest';
import type { Stop } from '../../../src/bin/lifecycle.ts';
import { startSidecarProcess } from '../../../src/bin/sidecar-process.ts';
import { loadConfig } from '../../../src/config/index.ts';
import { createLogger } from '../../../src/log/index.ts';
import { freshDatabaseLogins, stack } from '../../helpers/stack.ts';

const DELAY_SECONDS = 2;
const stops: Stop[] = [];

afterAll(async () => {
  for (const stop of stops.splice(0)) await stop();
});

async function sidecar(delay: string): Promise<{ url: string; stop: Stop; lines: string[] }> {
  const db = await freshDatabaseLogins('drain');
  const s = stack();
  const lines: string[] = [];
  const logger = createLogger('sidecar', 'info', { write: (l: string) => void lines.push(l) });
  const stop = await startSidecarProcess(
    loadConfig('sidecar', {
      ...s.settings,
      ...s.env,
      DATABASE_URL: db.runtime,
      DATABASE_MIGRATION_URL: db.owner,
      POD_NAMESPACE: 'aibom-vault-system',
      KUBECONFIG: s.kube.kubeconfigs['aibom-vault-api'],
      HTTP_HOST: '127.0.0.1',
      HTTP_PORT: '0',
      METRICS_HOST: '127.0.0.1',
      METRICS_PORT: '0',
      SHUTDOWN_DELAY_SECONDS: delay,
    }),
    logger,
  );
  const url = lines
    .map((l) => JSON.parse(l) as { msg: string; address?: string })
    .find((l) => l.msg === 'sidecar listening')!.address!;
  return { url, stop, lines };
}

/** A request on a connection of its own (no keep-alive reuse), as a client new to the pod makes it. */
async function fresh(url: string): Promise<number | string> {
  try {
    const res = await fetch(url, { headers: { connection: 'close' } });
    await res.arrayBuffer();
    return res.status;
  } catch (err) {
    const cause = (err as { cause?: { code?: string } }).cause;
    return cause?.code ?? String(err);
  }
}

describe('SHUTDOWN_DELAY_SECONDS', () => {
  it('after the stop begins: /readyz 503 at once, new connections still served for the delay, then refused', async () => {
    const { url, stop, lines } = await sidecar(String(DELAY_SECONDS));
    expect(await fresh(`${url}/readyz`)).toBe(200);

    const t0 = performance.now();
    let stopped: number | undefined;
    const stopping = stop().then(() => void (stopped = performance.now() - t0));
    // Not ready from the first request on; still serving /healthz and /readyz on new connections.
    const during: Array<{ readyz: number | string; healthz: number | string }> = [];
    while (stopped === undefined && performance.now() - t0 < (DELAY_SECONDS - 0.5) * 1000) {
      during.push({ readyz: await fresh(`${url}/readyz`), healthz: await fresh(`${url}/healthz`) });
      await new Promise((r) => setTimeout(r, 100));
    }
    await stopping;
    console.log(
      `drain: ${during.length} probes during the delay, stop resolved after ${(stopped! / 1000).toFixed(2)} s`,
    );
    expect(during.length).toBeGreaterThan(0);
    expect(during.every((d) => d.readyz === 503 && d.healthz === 200)).toBe(true);
    // The delay was kept before the listener closed (not a timing bound: a lower limit by design).
    expect(stopped!).toBeGreaterThanOrEqual(DELAY_SECONDS * 1000 - 50);
    expect(await fresh(`${url}/healthz`)).toBe('ECONNREFUSED');
    expect(lines.some((l) => l.includes('draining: not ready, still serving'))).toBe(true);
  });

  it("while draining, every answer closes its kept-alive connection, so the client's next request goes to a new connection (not one the close would race)", async () => {
    const { url, stop } = await sidecar(String(DELAY_SECONDS));
    const agent = new Agent({ keepAlive: true, maxSockets: 1 });
    const get = (
      path: string,
    ): Promise<{ status: number; connection: string | undefined; socket: unknown }> =>
      new Promise((resolve, reject) => {
        const req = request(`${url}${path}`, { agent }, (res) => {
          res.resume();
          res.on('end', () =>
            resolve({ status: res.statusCode ?? 0, connection: res.headers.connection, socket: req.socket }),
          );
        });
        req.on('error', reject);
        req.end();
      });
    try {
      const before = [await get('/healthz'), await get('/healthz')];
      expect(before.map((r) => r.connection)).toEqual(['keep-alive', 'keep-alive']);
      expect(before[1]!.socket).toBe(before[0]!.socket); // one kept-alive connection, reused
      const stopping = stop();
      const during = [await get('/healthz'), await get('/healthz')];
      expect(during.map((r) => [r.status, r.connection])).toEqual([
        [200, 'close'],
        [200, 'close'],
      ]);
      expect(during[0]!.socket).toBe(before[1]!.socket); // the kept-alive one, answered and closed
      expect(during[1]!.socket).not.toBe(during[0]!.socket); // so the next went on a new connection
      await stopping;
    } finally {
      agent.destroy();
    }
  });

  it('0 (the default outside the chart): the listener closes without a delay', async () => {
    const { url, stop, lines } = await sidecar('0');
    await stop();
    expect(await fresh(`${url}/healthz`)).toBe('ECONNREFUSED');
    expect(lines.some((l) => l.includes('draining'))).toBe(false);
  });

  it('refuses a delay the stop could not keep inside its 20 s, naming the key', () => {
    expect(() => loadConfig('sidecar', { ...stack().env, SHUTDOWN_DELAY_SECONDS: '16' })).toThrow(
      /SHUTDOWN_DELAY_SECONDS/,
    );
  });
});
