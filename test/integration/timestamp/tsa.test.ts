import { execFile } from 'node:child_process';
import { X509Certificate } from 'node:crypto';
import { createServer, type Server } from 'node:http';
import { mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { freePort, stopProcess } from '../../../hack/stack/proc.ts';
import { startTsa } from '../../../hack/stack/tsa.ts';
import {
  createTsaClient,
  TimestampError,
  timestampRequest,
  verifyTimestamp,
  type TimestampErrorCode,
} from '../../../src/timestamp/index.ts';
import { generateTsaPki } from '../../helpers/pki.ts';
import { stack } from '../../helpers/stack.ts';

/**
 * The RFC 3161 client against the stack's real time-stamping authority (the Sigstore timestamp
 * authority, hack/stack/tsa.ts), its answers cross-checked by an independent verifier (OpenSSL's
 * `ts -verify`), and every way an answer can be wrong rejected with its own code.
 */
const run = promisify(execFile);
let dir: string;
let anchors: X509Certificate[];
let caFile: string;

beforeAll(async () => {
  dir = await mkdtemp(join(tmpdir(), 'tsa-test-'));
  caFile = stack().env.TSA_TRUST_ANCHORS!;
  anchors = [new X509Certificate(await readFile(caFile))];
});
afterAll(async () => {
  await rm(dir, { recursive: true, force: true });
});

const client = (url = stack().env.TSA_URL!, deadlineMs = 20_000) =>
  createTsaClient({ url, trustAnchors: anchors, deadlineMs });

async function codeOf(p: Promise<unknown> | (() => unknown)): Promise<TimestampErrorCode | 'none'> {
  try {
    await (typeof p === 'function' ? p() : p);
    return 'none';
  } catch (err) {
    if (err instanceof TimestampError) return err.code;
    throw err;
  }
}

describe('RFC 3161 client against the stack TSA', () => {
  it('gets a verified token for the data; OpenSSL verifies the same answer against the TSA CA', async () => {
    const data = Buffer.from('the AIBOM signature bytes');
    const before = Date.now();
    const t = await client().timestamp(data);
    const after = Date.now();
    expect(t.tsa).toContain('time-stamping authority');
    expect(t.hashAlgorithm).toBe('sha256');
    // genTime has one-second precision; the TSA's clock is this machine's.
    expect(t.genTime.getTime()).toBeGreaterThanOrEqual(Math.floor(before / 1000) * 1000 - 1000);
    expect(t.genTime.getTime()).toBeLessThanOrEqual(after + 1000);
    await writeFile(join(dir, 'data'), data);
    await writeFile(join(dir, 'resp.tsr'), t.response);
    const ok = await run('openssl', [
      'ts',
      '-verify',
      '-data',
      join(dir, 'data'),
      '-in',
      join(dir, 'resp.tsr'),
      '-CAfile',
      caFile,
    ]);
    expect(ok.stdout).toContain('Verification: OK');
    await writeFile(join(dir, 'other'), 'other bytes');
    await expect(
      run('openssl', [
        'ts',
        '-verify',
        '-data',
        join(dir, 'other'),
        '-in',
        join(dir, 'resp.tsr'),
        '-CAfile',
        caFile,
      ]),
    ).rejects.toThrow();
  });

  it('a request OpenSSL reads as SHA-256 of the data, with our nonce and certReq', async () => {
    const req = timestampRequest(Buffer.from('x'), 0x8000_0000_0000_0001n);
    await writeFile(join(dir, 'req.tsq'), req.der);
    const { stdout } = await run('openssl', ['ts', '-query', '-in', join(dir, 'req.tsq'), '-text']);
    expect(stdout).toContain('Hash Algorithm: sha256');
    expect(stdout).toMatch(/Nonce: 0x8000000000000001/i);
    expect(stdout).toContain('Certificate required: yes');
  });

  it('rejects an answer for other data (IMPRINT_MISMATCH), another nonce, another TSA and a damaged token', async () => {
    const data = Buffer.from('mine');
    const t = await client().timestamp(data);
    expect(
      await codeOf(() => verifyTimestamp(t.response, { data: Buffer.from('theirs'), trustAnchors: anchors })),
    ).toBe('IMPRINT_MISMATCH');
    expect(
      await codeOf(() => verifyTimestamp(t.response, { data, trustAnchors: anchors, nonce: t.nonce! + 1n })),
    ).toBe('NONCE_MISMATCH');
    const foreign = await generateTsaPki({ caCommonName: 'someone else TSA CA' });
    expect(
      await codeOf(() =>
        verifyTimestamp(t.response, { data, trustAnchors: [new X509Certificate(foreign['ca.crt'])] }),
      ),
    ).toBe('UNTRUSTED_TSA');
    expect(await codeOf(() => verifyTimestamp(t.response, { data, trustAnchors: [] }))).toBe('UNTRUSTED_TSA');
    // One byte of the signed TSTInfo (inside the serial number) changed: the CMS messageDigest no
    // longer matches, so the signature does not cover it.
    const serial = Buffer.from(t.serial, 'hex');
    const at = t.response.indexOf(serial);
    expect(at).toBeGreaterThan(0);
    const damaged = Buffer.from(t.response);
    damaged[at + 1]! ^= 0x01;
    expect(await codeOf(() => verifyTimestamp(damaged, { data, trustAnchors: anchors }))).toBe(
      'TIMESTAMP_SIGNATURE_INVALID',
    );
    // The signature value itself changed (its last byte).
    const sig = Buffer.from(t.response);
    sig[sig.length - 1]! ^= 0x01;
    expect(await codeOf(() => verifyTimestamp(sig, { data, trustAnchors: anchors }))).toBe(
      'TIMESTAMP_SIGNATURE_INVALID',
    );
    expect(await codeOf(() => verifyTimestamp(Buffer.from('not DER'), { data, trustAnchors: anchors }))).toBe(
      'MALFORMED_TIMESTAMP',
    );
  });

  it('TSA down: TSA_UNAVAILABLE once the deadline has passed, after retrying', async () => {
    const port = await freePort();
    expect(
      await codeOf(client(`http://127.0.0.1:${port}/api/v1/timestamp`, 1_500).timestamp(Buffer.from('x'))),
    ).toBe('TSA_UNAVAILABLE');
  });

  it('retries 503 answers within the deadline and succeeds when the TSA answers', async () => {
    let calls = 0;
    const upstream = stack().env.TSA_URL!;
    const server: Server = createServer((req, res) => {
      calls++;
      const chunks: Buffer[] = [];
      req.on('data', (c: Buffer) => chunks.push(c));
      req.on('end', () => {
        if (calls <= 2) {
          res.writeHead(503).end('busy');
          return;
        }
        // From the third attempt on, forward to the real TSA.
        void fetch(upstream, {
          method: 'POST',
          headers: { 'content-type': 'application/timestamp-query' },
          body: Buffer.concat(chunks),
        }).then(async (r) => {
          res.writeHead(r.status, { 'content-type': r.headers.get('content-type') ?? '' });
          res.end(Buffer.from(await r.arrayBuffer()));
        });
      });
    });
    await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
    try {
      const { port } = server.address() as { port: number };
      const t = await client(`http://127.0.0.1:${port}/`, 30_000).timestamp(Buffer.from('retry me'));
      expect(t.imprint.length).toBe(32);
      expect(calls).toBe(3);
    } finally {
      await new Promise((r) => server.close(r));
    }
  });

  it('an answer that is not a timestamp reply: TSA_REJECTED (4xx) or MALFORMED_TIMESTAMP (200 garbage)', async () => {
    const base = new URL(stack().env.TSA_URL!);
    expect(await codeOf(client(`${base.origin}/api/v1/nothing-here`).timestamp(Buffer.from('x')))).toBe(
      'TSA_REJECTED',
    );
    const server = createServer((_req, res) => res.writeHead(200).end('<html>proxy login</html>'));
    await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
    try {
      const { port } = server.address() as { port: number };
      expect(await codeOf(client(`http://127.0.0.1:${port}/`).timestamp(Buffer.from('x')))).toBe(
        'MALFORMED_TIMESTAMP',
      );
    } finally {
      await new Promise((r) => server.close(r));
    }
  });

  it('a TSA whose certificate expired before the genTime: TSA_CERTIFICATE_EXPIRED', async () => {
    // A second, throwaway TSA whose leaf is valid for a few seconds from now; once that has passed,
    // it still signs (it does not check its own certificate), and the answer must be refused.
    const root = await mkdtemp(join(tmpdir(), 'tsa-expired-'));
    const notAfter = new Date(Date.now() + 4_000);
    const tsa = await startTsa(root, stack().tools['timestamp-authority'], {}, { notAfter });
    try {
      const ca = [new X509Certificate(await readFile(tsa.trustAnchor))];
      const short = createTsaClient({ url: tsa.url, trustAnchors: ca, deadlineMs: 20_000 });
      expect((await short.timestamp(Buffer.from('in time'))).genTime.getTime()).toBeLessThanOrEqual(
        notAfter.getTime(),
      );
      while (Date.now() < notAfter.getTime() + 1_500) await new Promise((r) => setTimeout(r, 250));
      expect(await codeOf(short.timestamp(Buffer.from('too late')))).toBe('TSA_CERTIFICATE_EXPIRED');
    } finally {
      await stopProcess(tsa.proc.pid);
      await rm(root, { recursive: true, force: true });
    }
  });
});
