/**
 * The object store's deadline (issue 10, item 3): a store that accepts the connection and then never
 * answers (or stops half-way through a body) fails the call with OBJECT_STORE_UNAVAILABLE, and the
 * request is really aborted: the peer sees its connection closed. A client that only raced a timer
 * against the request would leave the socket open (and a keep-alive socket to a hung server in the
 * pool). The same against a real MinIO stopped with SIGSTOP: test/integration/operator/hung.test.ts.
 */
import { createServer, type Server, type Socket } from 'node:net';
import { afterEach, describe, expect, it } from 'vitest';
import { ObjectStoreError, s3BlobStore } from '../../../src/blob/store.ts';

interface HungPeer {
  readonly endpoint: string;
  /** Server-side sockets, and whether the client closed each. */
  readonly connections: { socket: Socket; closed: Promise<void> }[];
  close(): Promise<void>;
}

const peers: Server[] = [];
afterEach(async () => {
  await Promise.all(peers.splice(0).map((s) => new Promise((r) => s.close(r))));
});

/** A TCP peer that reads requests and answers `reply` (or nothing), then stalls forever. */
async function hungPeer(reply = ''): Promise<HungPeer> {
  const connections: HungPeer['connections'] = [];
  const server = createServer((socket) => {
    const closed = new Promise<void>((resolve) => socket.once('close', () => resolve()));
    socket.on('error', () => undefined);
    socket.once('data', () => {
      if (reply !== '') socket.write(reply);
    });
    connections.push({ socket, closed });
  });
  peers.push(server);
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  const { port } = server.address() as { port: number };
  return {
    endpoint: `http://127.0.0.1:${port}`,
    connections,
    close: () => new Promise((r) => server.close(() => r())),
  };
}

const store = (endpoint: string) =>
  s3BlobStore({ endpoint, accessKey: 'k', secretKey: 'secret-key', bucket: 'artifacts', timeoutMs: 300 });

async function expectUnavailable(call: Promise<unknown>): Promise<ObjectStoreError> {
  const err = await call.then(
    () => {
      throw new Error('the call succeeded against a peer that never answers');
    },
    (e: unknown) => e,
  );
  expect(err).toBeInstanceOf(ObjectStoreError);
  expect((err as ObjectStoreError).code).toBe('OBJECT_STORE_UNAVAILABLE');
  return err as ObjectStoreError;
}

describe('object store deadline', () => {
  it('a store that never answers: get, put, stat and ping fail, and each connection is closed', async () => {
    const peer = await hungPeer();
    const s = store(peer.endpoint);
    const err = await expectUnavailable(s.get('runs/x/aibom.json'));
    expect(err.message).toMatch(/did not answer GET .* within 300 ms/);
    await expectUnavailable(s.put('k', Buffer.from('x'), 'application/json'));
    await expectUnavailable(s.stat('k'));
    await expectUnavailable(s.ping());
    expect(peer.connections.length).toBeGreaterThanOrEqual(4);
    // Aborted, not abandoned: the client closed every connection it had opened.
    await Promise.all(peer.connections.map((c) => c.closed));
    expect(peer.connections.every((c) => c.socket.destroyed || c.socket.readableEnded)).toBe(true);
  });

  it('a body that stops half-way fails the read with the same error and closes the connection', async () => {
    const peer = await hungPeer(
      'HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: 1000\r\n\r\n{"partial":',
    );
    await expectUnavailable(store(peer.endpoint).get('runs/x/aibom.json'));
    await Promise.all(peer.connections.map((c) => c.closed));
  });

  it('a store that answers in time is not affected', async () => {
    const peer = await hungPeer('HTTP/1.1 404 Not Found\r\ncontent-length: 0\r\nconnection: close\r\n\r\n');
    expect(await store(peer.endpoint).stat('missing')).toBeNull();
  });
});
