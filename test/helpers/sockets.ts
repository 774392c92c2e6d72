import { connect, type Socket } from 'node:net';
import { expect } from 'vitest';

/** Raw-socket clients for what fetch cannot do: requests that never finish, malformed HTTP. */

/** What the server sent before it closed the connection, and when that was. */
export interface Ended {
  readonly received: string;
  readonly ms: number;
}

/** Opens a connection, writes `chunks`, then waits (sending nothing more) until the server closes it. */
export function holdOpen(host: string, p: number, chunks: string[]): Promise<Ended> {
  return new Promise((resolve, reject) => {
    const t0 = performance.now();
    const socket: Socket = connect({ host, port: p });
    let received = '';
    socket.setEncoding('utf8');
    socket.on('data', (d: string) => (received += d));
    socket.on('error', (err: NodeJS.ErrnoException) => {
      // A reset after the answer is a close too.
      if (err.code !== 'ECONNRESET') reject(err);
    });
    socket.on('close', () => resolve({ received, ms: performance.now() - t0 }));
    socket.on('connect', () => {
      for (const c of chunks) socket.write(c);
    });
  });
}

export function expect408(ended: Ended): void {
  expect(ended.received).toMatch(/^HTTP\/1\.1 408 /);
  expect(ended.received).toMatch(/content-type: application\/problem\+json/i);
  const body = JSON.parse(ended.received.slice(ended.received.indexOf('\r\n\r\n') + 4)) as { code: string };
  expect(body.code).toBe('REQUEST_TIMEOUT');
}
