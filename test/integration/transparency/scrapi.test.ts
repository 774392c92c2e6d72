import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { Decoder } from 'cbor-x';
import Fastify, { type FastifyInstance } from 'fastify';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import type { KeySigner } from '../../../src/signing/index.ts';
import { encodeKeySet } from '../../../src/cose/key.ts';
import { isTransparencyError, type TransparencyError } from '../../../src/transparency/errors.ts';
import type { RetryPolicy } from '../../../src/transparency/jobs.ts';
import { createLocalLog, type LocalLog } from '../../../src/transparency/local-log.ts';
import { createPublisher } from '../../../src/transparency/publisher.ts';
import { leafHash } from '../../../src/transparency/merkle.ts';
import { entryOf, verifyReceipt } from '../../../src/transparency/receipt.ts';
import { decodeProblemDetails, encodeProblemDetails } from '../../../src/transparency/problem-details.ts';
import { createScrapiClient, type ScrapiClientOptions } from '../../../src/transparency/scrapi-client.ts';
import { installErrorHandling } from '../../../src/http/error-handler.ts';
import { registerScrapiRoutes, type ScrapiRouteDeps } from '../../../src/http/routes/scrapi.ts';
import { logSigner, statementSigner } from '../../unit/transparency/fixtures.ts';
import { record, setupDb, statement, type TestDb } from './helpers.ts';

const cbor = new Decoder({ mapsAsObjects: false, useRecords: false });

/** Sleeps recorded, never slept: no test here depends on the wall clock. */
function recorder(onSleep?: (n: number) => Promise<void>): {
  sleeps: number[];
  sleep: (ms: number) => Promise<void>;
} {
  const sleeps: number[] = [];
  return {
    sleeps,
    sleep: async (ms) => {
      sleeps.push(ms);
      await onSleep?.(sleeps.length);
    },
  };
}

async function caught(p: Promise<unknown>): Promise<TransparencyError> {
  try {
    await p;
  } catch (err) {
    if (isTransparencyError(err)) return err;
    throw err;
  }
  throw new Error('expected a TransparencyError');
}

async function readBody(req: IncomingMessage): Promise<Buffer> {
  const chunks: Buffer[] = [];
  for await (const c of req) chunks.push(c as Buffer);
  return Buffer.concat(chunks);
}

type Handler = (req: IncomingMessage, body: Buffer, res: ServerResponse) => Promise<void> | void;

/** A tiny hand-written SCITT service for the paths the real one never takes. */
async function tinyServer(handler: Handler): Promise<{ url: string; server: Server; calls: string[] }> {
  const calls: string[] = [];
  const server = createServer((req, res) => {
    calls.push(`${req.method} ${req.url}`);
    readBody(req)
      .then((body) => handler(req, body, res))
      .catch((err: unknown) => {
        res.statusCode = 500;
        res.end(String(err));
      });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return { url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`, server, calls };
}

describe('SCRAPI client ↔ server', () => {
  let db: TestDb;
  let signer: KeySigner;
  let log: LocalLog;
  const apps: FastifyInstance[] = [];
  const servers: Server[] = [];

  const serve = async (deps: Partial<ScrapiRouteDeps> = {}): Promise<string> => {
    const app = Fastify({ logger: false });
    installErrorHandling(app);
    await registerScrapiRoutes(app, { log, trustAnchors: signer.caCertificates, ...deps });
    await app.listen({ port: 0, host: '127.0.0.1' });
    apps.push(app);
    return `http://127.0.0.1:${(app.server.address() as AddressInfo).port}`;
  };
  const tiny = async (handler: Handler) => {
    const t = await tinyServer(handler);
    servers.push(t.server);
    return t;
  };
  const client = (baseUrl: string, extra: Partial<ScrapiClientOptions> = {}) =>
    createScrapiClient({ baseUrl, random: () => 0.5, baseDelayMs: 100, ...extra });
  const keysRoute = (res: ServerResponse): void => {
    res.writeHead(200, { 'content-type': 'application/cbor' }).end(encodeKeySet(log.keys));
  };

  beforeAll(async () => {
    db = await setupDb('scrapi');
    signer = await statementSigner();
    log = createLocalLog({
      storage: db.vault.scittLog,
      signer: logSigner(),
      issuer: 'https://b.scitt.test.invalid',
    });
  });
  afterEach(async () => {
    await Promise.all(apps.splice(0).map((a) => a.close()));
    await Promise.all(servers.splice(0).map((s) => new Promise((r) => s.close(r))));
  });
  afterAll(async () => {
    await db.close();
  });

  it('registers synchronously (201), and a resubmission is the same entry (200)', async () => {
    const base = await serve();
    const c = client(base);
    const s = statement(signer);
    const first = await c.register(s);
    expect(first).toMatchObject({ duplicate: false, entryId: leafHash(entryOf(s)).toString('hex') });
    expect(first.location).toBe(`${base}/entries/${first.entryId}`);
    expect(verifyReceipt({ receipt: first.receipt, statement: s, logKey: log.keys })).toMatchObject({
      ok: true,
      leafIndex: first.leafIndex,
    });
    const again = await c.register(s);
    expect(again).toMatchObject({ duplicate: true, entryId: first.entryId, leafIndex: first.leafIndex });
    expect(again.receipt.equals(first.receipt)).toBe(true);
    expect((await c.fetchEntry(first.entryId))?.equals(first.receipt)).toBe(true);
    expect((await c.keys())[0]!.kid.equals(log.keys[0]!.kid)).toBe(true);

    const config = cbor.decode(
      Buffer.from(await (await fetch(`${base}/.well-known/transparency-configuration`)).arrayBuffer()),
    ) as Map<string, unknown>;
    expect(config.get('issuer')).toBe('https://b.scitt.test.invalid');
  });

  it('follows 303 + Retry-After, polls through 302 while pending, and gets the receipt (200)', async () => {
    const tasks: (() => Promise<void>)[] = [];
    const base = await serve({
      registration: { mode: 'async', retryAfterSeconds: 2, schedule: (t) => tasks.push(t) },
    });
    // The registration completes during the client's second wait.
    const { sleeps, sleep } = recorder(async (n) => {
      if (n === 2) await tasks.shift()!();
    });
    const s = statement(signer);
    const before = (await log.treeHead()).size;
    const result = await client(base, { sleep }).register(s);
    expect(sleeps).toEqual([2000, 2000]);
    expect(result).toMatchObject({ duplicate: false, leafIndex: before });
    expect(verifyReceipt({ receipt: result.receipt, statement: s, logKey: log.keys }).ok).toBe(true);
    expect((await log.treeHead()).size).toBe(before + 1);
  });

  it('waits out 429 Retry-After, backs off on 5xx and network errors, and gives up boundedly', async () => {
    let posts = 0;
    const t = await tiny(async (req, body, res) => {
      if (req.url === '/.well-known/scitt-keys') return keysRoute(res);
      if (++posts === 1) {
        res
          .writeHead(429, { 'retry-after': '7', 'content-type': 'application/concise-problem-details+cbor' })
          .end(encodeProblemDetails({ title: 'Too Many Requests', detail: 'slow down' }));
        return;
      }
      const entry = await log.append(body);
      res
        .writeHead(201, { 'content-type': 'application/cose', location: `/entries/${entry.entryId}` })
        .end(entry.receipt);
    });
    const { sleeps, sleep } = recorder();
    const s = statement(signer);
    const result = await client(t.url, { sleep }).register(s);
    expect(sleeps).toEqual([7000]);
    expect(t.calls.filter((c) => c.startsWith('POST'))).toHaveLength(2);
    expect(result.entryId).toBe(leafHash(entryOf(s)).toString('hex'));

    // A Retry-After too long to wait inline goes to the caller (the job queue) at once.
    const long = await tiny((_req, _body, res) => {
      res.writeHead(503, { 'retry-after': '3600' }).end();
    });
    const r2 = recorder();
    const e2 = await caught(client(long.url, { sleep: r2.sleep }).register(statement(signer)));
    expect(e2).toMatchObject({ code: 'REMOTE_UNAVAILABLE', retryable: true, retryAfterMs: 3_600_000 });
    expect(r2.sleeps).toEqual([]);

    // 5xx without Retry-After: exponential backoff (base 100 ms, jitter fixed at 0.5), 4 attempts.
    const down = await tiny((_req, _body, res) => void res.writeHead(502).end());
    const r3 = recorder();
    const e3 = await caught(client(down.url, { sleep: r3.sleep }).register(statement(signer)));
    expect(e3).toMatchObject({ code: 'REMOTE_UNAVAILABLE', retryable: true });
    expect(r3.sleeps).toEqual([75, 150, 300]);
    expect(down.calls).toHaveLength(4);

    // Nobody listening.
    const gone = await tiny(() => undefined);
    await new Promise((r) => gone.server.close(r));
    const r4 = recorder();
    const e4 = await caught(
      client(gone.url, { sleep: r4.sleep, maxAttempts: 2 }).register(statement(signer)),
    );
    expect(e4).toMatchObject({ code: 'REMOTE_UNAVAILABLE' });
    expect(r4.sleeps).toHaveLength(1);
  });

  it('treats 409 as already registered and fetches the existing receipt', async () => {
    const s = statement(signer);
    const existing = await log.append(s);
    const t = await tiny((req, _body, res) => {
      if (req.url === '/.well-known/scitt-keys') return keysRoute(res);
      if (req.method === 'POST') {
        res.writeHead(409, { location: `/entries/${existing.entryId}` }).end();
        return;
      }
      res.writeHead(200, { 'content-type': 'application/cose' }).end(existing.receipt);
    });
    const result = await client(t.url).register(s);
    expect(result).toMatchObject({ duplicate: true, entryId: existing.entryId, leafIndex: existing.index });
    expect(t.calls).toContain(`GET /entries/${existing.entryId}`);
  });

  it('refuses responses that are not a valid receipt for the statement', async () => {
    const s = statement(signer);
    const other = await log.append(statement(signer));
    const strangerLog = createLocalLog({ storage: db.vault.scittLog, signer: logSigner(), issuer: 'x' });
    let answer: Buffer = Buffer.from('<html>hello</html>');
    const t = await tiny((req, _body, res) => {
      if (req.url === '/.well-known/scitt-keys') return keysRoute(res);
      res.writeHead(201, { 'content-type': 'application/cose' }).end(answer);
    });
    const c = client(t.url);
    expect(await caught(c.register(s))).toMatchObject({ code: 'MALFORMED_RECEIPT' });
    // Somebody else's receipt: the log's receipts sign the tree head, not a subject, so the
    // inclusion proof applied to this statement leads to a root the signature does not cover.
    answer = other.receipt;
    expect(await caught(c.register(s))).toMatchObject({ code: 'RECEIPT_SIGNATURE_INVALID' });
    // A genuine inclusion proof for this very statement, signed by a key the service does not
    // publish (the stranger log shares our tables, not our key).
    const s3 = statement(signer);
    const entry3 = await log.append(s3);
    await log.append(statement(signer));
    answer = await strangerLog.receipt(entry3.entryId, { treeSize: entry3.index + 2 });
    expect(verifyReceipt({ receipt: answer, statement: s3, logKey: strangerLog.keys }).ok).toBe(true);
    expect(await caught(c.register(s3))).toMatchObject({ code: 'UNKNOWN_LOG_KEY' });
    // Pinned keys: a receipt by the right kid but a wrong signature is a signature failure.
    const pinned = client(t.url, { logKeys: [{ kid: strangerLog.keys[0]!.kid, key: log.keys[0]!.key }] });
    expect(await caught(pinned.register(s3))).toMatchObject({ code: 'RECEIPT_SIGNATURE_INVALID' });

    // Through the publisher: the job records the failure and nothing else.
    const [stored] = await db.vault.attestations.append([record(signer)]);
    const [queued] = await db.vault.transparencyJobs.enqueue([stored!.id]);
    answer = Buffer.from('garbage');
    const policy: RetryPolicy = {
      baseDelayMs: 10,
      maxDelayMs: 100,
      maxRetryAfterMs: 1000,
      leaseMs: 60_000,
    };
    const publisher = createPublisher({
      jobs: db.vault.transparencyJobs,
      backend: { kind: 'scrapi', client: c },
      signer,
      caCertificates: signer.caCertificates,
      loadAttestation: (id) => db.vault.attestations.get(id),
      policy,
    });
    const after = await publisher.publishNow(stored!.id);
    expect(after).toMatchObject({
      id: queued!.id,
      state: 'queued',
      attempts: 1,
      receipt: null,
      entryId: null,
      backend: null,
    });
    expect(after.lastError).toMatch(/^MALFORMED_RECEIPT/);
    expect((await db.vault.transparencyJobs.get({ id: queued!.id }))!.statement).not.toBeNull();
  });

  it('answers errors as CBOR problem details; the client maps them to REMOTE_REJECTED', async () => {
    const outsider = await statementSigner({ caCommonName: 'outsider CA' });
    const denyReads = await serve({
      authorize: (_req, action) => {
        if (action === 'read') throw Object.assign(new Error('reading is not allowed'), { statusCode: 403 });
      },
    });
    const c = client(denyReads);

    const bad = await caught(c.register(Buffer.from('definitely not COSE')));
    expect(bad).toMatchObject({ code: 'REMOTE_REJECTED', retryable: false });
    expect(bad.message).toMatch(/400/);
    const untrusted = await caught(c.register(statement(outsider)));
    expect(untrusted.message).toMatch(/400 \(Bad Request: .*trust anchor/);

    const raw = await fetch(`${denyReads}/entries`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: '{}',
    });
    expect(raw.status).toBe(415);
    expect(raw.headers.get('content-type')).toBe('application/concise-problem-details+cbor');
    const problem = decodeProblemDetails(Buffer.from(await raw.arrayBuffer()));
    expect(problem).toMatchObject({ title: 'Unsupported Media Type' });
    expect(problem?.extra?.get('code')).toBe('UNSUPPORTED_MEDIA_TYPE');

    const denied = await fetch(`${denyReads}/entries/${'a'.repeat(64)}`);
    expect(denied.status).toBe(403);
    const missing = await fetch(`${await serve()}/entries/${'a'.repeat(64)}`);
    expect(missing.status).toBe(404);
    expect(decodeProblemDetails(Buffer.from(await missing.arrayBuffer()))?.extra?.get('code')).toBe(
      'ENTRY_NOT_FOUND',
    );
  });
});
