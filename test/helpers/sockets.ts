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

/**
 * One keep-alive connection: sends each of `complete` and waits for its whole answer (by its
 * Content-Length), then writes `last` (a request it never finishes) and waits, sending nothing
 * more, until the server closes the connection. `received` is what came after `last` was sent.
 */
export function afterAnswers(host: string, p: number, complete: string[], last: string[]): Promise<Ended> {
  return new Promise((resolve, reject) => {
    const socket: Socket = connect({ host, port: p });
    let buffer = '';
    let answered = 0;
    let t0 = 0;
    const next = (): void => {
      if (answered < complete.length) socket.write(complete[answered]!);
      else {
        buffer = '';
        t0 = performance.now();
        for (const c of last) socket.write(c);
      }
    };
    socket.setEncoding('utf8');
    socket.on('data', (d: string) => {
      buffer += d;
      if (answered >= complete.length) return;
      const end = buffer.indexOf('\r\n\r\n');
      const length = /\r\ncontent-length: (\d+)/i.exec(buffer.slice(0, end));
      if (end < 0 || length === null || buffer.length < end + 4 + Number(length[1])) return;
      if (!/^HTTP\/1\.1 2\d\d /.test(buffer))
        reject(new Error(`request ${answered} answered ${buffer.slice(0, 40)}`));
      buffer = buffer.slice(end + 4 + Number(length[1]));
      answered += 1;
      next();
    });
    socket.on('error', (err: NodeJS.ErrnoException) => {
      if (err.code !== 'ECONNRESET') reject(err);
    });
    socket.on('close', () => {
      if (answered < complete.length) reject(new Error(`closed after ${answered} answers`));
      else resolve({ received: buffer, ms: performance.now() - t0 });
    });
    socket.on('connect', next);
  });
}
