/**
 * The controller's Kubernetes client reuses its TLS connections to the real kube-apiserver: many
 * requests, sequential and concurrent, cost a handful of connections, not one each. Counted at a
 * TCP relay placed between the client and the API server (the client's kubeconfig points at the
 * relay; TLS is end to end, the relay only counts connections).
 */
import { createConnection, createServer, type Server, type Socket } from 'node:net';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { kubeClient, type KubeClient } from '../../../src/kube/index.ts';
import { kubeConfig } from '../../helpers/stack.ts';

let relay: Server;
let connections = 0;
const sockets = new Set<Socket>();
let client: KubeClient;

beforeAll(async () => {
  const kc = kubeConfig('aibom-vault');
  const target = new URL(kc.getCurrentCluster()!.server);
  relay = createServer((inbound) => {
    connections++;
    const outbound = createConnection({ host: target.hostname, port: Number(target.port) });
    for (const s of [inbound, outbound]) {
      sockets.add(s);
      s.on('error', () => undefined);
      s.on('close', () => sockets.delete(s));
    }
    inbound.pipe(outbound).pipe(inbound);
  });
  await new Promise<void>((r) => relay.listen(0, '127.0.0.1', r));
  const cluster = kc.getCurrentCluster()!;
  const relayed = new URL(cluster.server);
  relayed.port = String((relay.address() as AddressInfo).port);
  // The API server's certificate names 127.0.0.1: the relay on another port still verifies.
  kc.clusters = kc.clusters.map((c) =>
    c.name === cluster.name ? { ...c, server: relayed.toString().replace(/\/$/, '') } : c,
  );
  client = kubeClient(kc);
});

afterAll(async () => {
  for (const s of sockets) s.destroy();
  await new Promise((r) => relay?.close(r));
});

const version = () => client.request<{ gitVersion: string }>({ method: 'GET', path: '/version' });

describe('the Kubernetes client', () => {
  it('sends sequential requests over one connection', async () => {
    connections = 0;
    for (let i = 0; i < 20; i++) expect((await version()).gitVersion).toMatch(/^v1\./);
    expect(connections).toBe(1);
  });

  it('opens at most one connection per concurrent request and keeps them for the next ones', async () => {
    connections = 0;
    for (let round = 0; round < 5; round++) await Promise.all(Array.from({ length: 8 }, version));
    // The first round may open up to 8 (plus the one already idle); later rounds reuse them.
    expect(connections).toBeLessThanOrEqual(8);
  });
});
