/**
 * POST /v1/attestations/export over a real socket: 100,000 attestations (about 400 MB of tar)
 * stream out while the process's retained heap stays flat (server and client share the process;
 * the client keeps only counters), and an independent tar reader (tar-stream) finds every record.
 */
import type { AddressInfo } from 'node:net';
import { Readable } from 'node:stream';
import type { ReadableStream as WebReadableStream } from 'node:stream/web';
import { setFlagsFromString } from 'node:v8';
import { runInNewContext } from 'node:vm';
import type { FastifyInstance } from 'fastify';
import { extract } from 'tar-stream';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { generateDevPki } from '../../../hack/dev-pki.ts';
import { signerFromPem } from '../../../src/signing/index.ts';
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
  t = await setupVault('export_mem');
  for (let b = 0; b < ROWS / BATCH; b++) {
    await t.vault.attestations.append(
      Array.from({ length: BATCH }, () => attestation({ namespace: 'bulk', padding: 1000 })),
    );
  }
  const signer = signerFromPem(await generateDevPki());
  app = await stackApp(t.vault, signer.caCertificates, { signer });
  await app.listen({ host: '127.0.0.1', port: 0 });
  url = `http://127.0.0.1:${(app.server.address() as AddressInfo).port}`;
}, 600_000);

afterAll(async () => {
  await app?.close();
  await t?.close();
});

it(`exports ${ROWS} attestations as one tar through HTTP with bounded heap growth`, async () => {
  const baseline = retainedHeap();
  let peak = baseline;
  const res = await fetch(`${url}/v1/attestations/export`, {
    method: 'POST',
    headers: { authorization: `Bearer ${stack().kube.tokens.admin}`, 'content-type': 'application/json' },
    body: JSON.stringify({ namespaces: ['bulk'] }),
  });
  expect(res.status).toBe(200);
  expect(res.headers.get('x-export-attestations')).toBe(String(ROWS));
  let bytes = 0;
  let envelopes = 0;
  let jsonlLines = 0;
  let last = '';
  const ex = extract();
  const done = new Promise<void>((resolve, reject) => {
    ex.on('entry', (header, stream, next) => {
      last = header.name;
      if (header.name.endsWith('/envelope.json') && ++envelopes % 10_000 === 0) {
        peak = Math.max(peak, retainedHeap());
      }
      stream.on('data', (c: unknown) => {
        if (header.name === 'attestations.intoto.jsonl') {
          for (const b of c as Buffer) if (b === 0x0a) jsonlLines++;
        }
      });
      stream.on('end', next);
    });
    ex.on('finish', resolve);
    ex.on('error', reject);
  });
  const body = Readable.fromWeb(res.body as WebReadableStream<Uint8Array>);
  body.on('data', (c: Buffer) => (bytes += c.length));
  body.pipe(ex);
  await done;
  peak = Math.max(peak, retainedHeap());
  const growth = peak - baseline;
  console.log(
    `exported ${envelopes} attestations (${(bytes / MiB).toFixed(0)} MiB tar) via HTTP, retained heap growth ${(growth / MiB).toFixed(1)} MiB`,
  );
  expect(envelopes).toBe(ROWS);
  expect(jsonlLines).toBe(ROWS);
  expect(last).toBe('bundle.c2pa');
  // The tar is several hundred MiB; holding it (or the records, or one index of all entries)
  // would blow far past this bound.
  expect(bytes).toBeGreaterThan(300 * MiB);
  expect(growth).toBeLessThan(64 * MiB);
}, 900_000);
