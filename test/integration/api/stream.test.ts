/**
 * POST /v1/attestations/query with Accept: application/x-ndjson over a real socket: 100,000 records
 * (~300 MB of NDJSON) stream through the API in id order while the process's retained heap stays
 * flat (server and client share the process; the client keeps only a running count).
 */
import type { AddressInfo } from 'node:net';
import { setFlagsFromString } from 'node:v8';
import { runInNewContext } from 'node:vm';
import type { FastifyInstance } from 'fastify';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { StreamReader } from '../../../src/attest/index.ts';
import { stackApp } from '../../helpers/app.ts';
import { stack } from '../../helpers/stack.ts';
import { attestation, setupVault, type TestVault } from '../vault/helpers.ts';

const ROWS = 100_000;
const BATCH = 1000;
const MiB = 1024 * 1024;

setFlagsFromString('--expose-gc');
const gc = runInNewContext('gc') as () => void;
const retainedHeap = (): number => {
  gc();
  return process.memoryUsage().heapUsed;
};

let t: TestVault;
let app: FastifyInstance;
let url: string;

beforeAll(async () => {
  t = await setupVault('ndjson');
  for (let b = 0; b < ROWS / BATCH; b++) {
    await t.vault.attestations.append(
      Array.from({ length: BATCH }, () => attestation({ namespace: 'bulk', padding: 1000 })),
    );
  }
  app = await stackApp(t.vault, []);
  await app.listen({ host: '127.0.0.1', port: 0 });
  url = `http://127.0.0.1:${(app.server.address() as AddressInfo).port}`;
}, 600_000);

afterAll(async () => {
  await app?.close();
  await t?.close();
});

it(`streams ${ROWS} envelopes as NDJSON through HTTP with bounded heap growth`, async () => {
  const baseline = retainedHeap();
  let peak = baseline;
  const res = await fetch(`${url}/v1/attestations/query`, {
    method: 'POST',
    headers: {
      authorization: `Bearer ${stack().kube.tokens.admin}`,
      'content-type': 'application/json',
      accept: 'application/x-ndjson',
    },
    body: JSON.stringify({ namespaces: ['bulk'] }),
  });
  expect(res.status).toBe(200);
  expect(res.headers.get('content-type')).toContain('application/x-ndjson');
  const decoder = new TextDecoder();
  // Counts and digests the lines as they pass; end() checks them against the trailer.
  const reader = new StreamReader();
  let rest = '';
  let count = 0;
  let bytes = 0;
  let prev = '';
  let ordered = true;
  for await (const chunk of res.body!) {
    bytes += (chunk as Uint8Array).byteLength;
    const text = rest + decoder.decode(chunk as Uint8Array, { stream: true });
    const lines = text.split('\n');
    rest = lines.pop() ?? '';
    for (const line of lines) {
      const record = reader.line(line) as { id: string } | undefined;
      if (record === undefined) continue; // the trailer
      const id = record.id;
      if (id <= prev) ordered = false;
      prev = id;
      count += 1;
      if (count % 10_000 === 0) peak = Math.max(peak, retainedHeap());
    }
  }
  const growth = peak - baseline;
  console.log(
    `streamed ${count} envelopes (${(bytes / MiB).toFixed(0)} MiB) via HTTP, retained heap growth ${(growth / MiB).toFixed(1)} MiB`,
  );
  expect(rest).toBe('');
  expect(reader.end().count).toBe(ROWS);
  expect(count).toBe(ROWS);
  expect(ordered).toBe(true);
  // The body is several hundred MiB; holding it (or the rows) would blow far past this bound.
  expect(bytes).toBeGreaterThan(200 * MiB);
  expect(growth).toBeLessThan(64 * MiB);
}, 600_000);
