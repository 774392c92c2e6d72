/**
 * EXPORT_CONCURRENCY against the real stack (real TokenReview/SubjectAccessReview, PostgreSQL, a
 * real socket): a tenant starting exports in parallel gets 429 EXPORT_BUSY with Retry-After for
 * the ones past its share, another tenant still gets one, everyone past the replica's total is
 * refused, and a slot comes back however its export ends: the client going away mid-stream, a
 * refusal after the slot was taken (nothing to export), the last byte, and a client that stops
 * reading (closed after the idle time instead of holding the slot for ever), and a client that reads
 * a steady trickle (closed once it falls below the floor it was told, EXPORT_MIN_BYTES_PER_SECOND).
 */
import { request } from 'node:http';
import type { AddressInfo } from 'node:net';
import type { FastifyInstance } from 'fastify';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { generateDevPki } from '../../../hack/dev-pki.ts';
import { signerFromPem } from '../../../src/signing/index.ts';
import { stackApp } from '../../helpers/app.ts';
import { bindUser, createNamespace } from '../../helpers/rbac.ts';
import { stack, uniqueName } from '../../helpers/stack.ts';
import { poll } from '../../helpers/controller-process.ts';
import { attestation, setupVault, type TestVault } from '../vault/helpers.ts';

/** Enough records that an unread response cannot fit in the socket buffers (about 30 MB of tar). */
const ROWS = 4000;
const namespace = uniqueName('export-slots');
let t: TestVault;
let app: FastifyInstance;
let url: string;
/** A second app with a short idle time and a high floor, for the trickling reader. */
let paced: FastifyInstance | undefined;

type User = 'admin' | 'alice' | 'bob';

function exportAs(
  user: User,
  body: Record<string, unknown> = { namespaces: [namespace] },
): Promise<Response> {
  return fetch(`${url}/v1/attestations/export`, {
    method: 'POST',
    headers: { authorization: `Bearer ${stack().kube.tokens[user]}`, 'content-type': 'application/json' },
    body: JSON.stringify(body),
  });
}

/**
 * An export whose client reads nothing: node:http with the response paused, so TCP backpressure
 * stops the server after the socket buffers (fetch may read ahead into memory, which would let a
 * 30 MB export finish and free its slot). `drop` destroys the connection, as a client going away.
 */
function heldExport(user: User): Promise<{ status: number; drop: () => void }> {
  return new Promise((resolve, reject) => {
    const req = request(
      `${url}/v1/attestations/export`,
      {
        method: 'POST',
        headers: { authorization: `Bearer ${stack().kube.tokens[user]}`, 'content-type': 'application/json' },
      },
      (res) => {
        res.pause();
        resolve({ status: res.statusCode ?? 0, drop: () => req.destroy() });
      },
    );
    req.on('error', () => undefined);
    req.once('error', reject);
    req.end(JSON.stringify({ namespaces: [namespace] }));
  });
}

async function problemOf(res: Response): Promise<{ code: string; detail: string }> {
  expect(res.headers.get('content-type')).toContain('application/problem+json');
  return (await res.json()) as { code: string; detail: string };
}

beforeAll(async () => {
  await createNamespace(namespace);
  await bindUser('alice', 'aibom-vault-auditor', namespace);
  await bindUser('bob', 'aibom-vault-auditor', namespace);
  t = await setupVault('export_slots');
  for (let b = 0; b < ROWS / 1000; b++) {
    await t.vault.attestations.append(
      Array.from({ length: 1000 }, () => attestation({ namespace, padding: 1000 })),
    );
  }
  const signer = signerFromPem(await generateDevPki());
  // A client that takes no byte for 10 s is closed (the default is a minute); the first tests
  // finish their held exports well within that.
  app = await stackApp(t.vault, signer.caCertificates, {
    signer,
    exportConcurrency: 2,
    exportIdleMs: 10_000,
  });
  await app.listen({ host: '127.0.0.1', port: 0 });
  url = `http://127.0.0.1:${(app.server.address() as AddressInfo).port}`;
}, 300_000);

afterAll(async () => {
  await paced?.close();
  await app?.close();
  await t?.close();
});

describe('exports streaming at once (EXPORT_CONCURRENCY=2: one per caller)', () => {
  it('refuses a second export of the same caller and a third of anyone, and frees the slots of exports whose clients went away', async () => {
    const first = await heldExport('admin');
    expect(first.status).toBe(200);
    // Its body is not read: the export holds its slot while it waits for the client.
    const again = await exportAs('admin');
    expect(again.status).toBe(429);
    expect(again.headers.get('retry-after')).toBe('30');
    const own = await problemOf(again);
    expect(own.code).toBe('EXPORT_BUSY');
    expect(own.detail).toContain('of yours');

    const alice = await heldExport('alice');
    expect(alice.status).toBe(200);
    const bob = await exportAs('bob');
    expect(bob.status).toBe(429);
    expect((await problemOf(bob)).detail).toContain('at most 2 at once');

    // Both clients go away mid-stream: their slots come back.
    first.drop();
    alice.drop();
    let last: Response | undefined;
    await poll(async () => {
      const res = await exportAs('bob');
      if (res.status === 200) {
        last = res;
        return true;
      }
      await res.body?.cancel();
      return false;
    }, 'a slot released by the abandoned exports');
    // Read to the end: the last byte frees the slot too, so bob may export again at once.
    const bytes = (await last!.arrayBuffer()).byteLength;
    expect(bytes).toBeGreaterThan(4 * 1024 * 1024);
    const next = await exportAs('bob');
    expect(next.status).toBe(200);
    await next.arrayBuffer();
  });

  it('frees the slot of an export refused after it was taken (nothing to export)', async () => {
    for (let i = 0; i < 3; i++) {
      const res = await exportAs('alice', { namespaces: [namespace], run_id: crypto.randomUUID() });
      expect(res.status).toBe(422);
      expect((await problemOf(res)).code).toBe('EMPTY_SELECTION');
    }
    const res = await exportAs('alice');
    expect(res.status).toBe(200);
    await res.arrayBuffer();
  });

  it('closes an export whose client stops reading, so two idle clients cannot hold every slot', async () => {
    const held = [await heldExport('alice'), await heldExport('bob')];
    for (const h of held) expect(h.status).toBe(200);
    const refused = await exportAs('admin');
    expect(refused.status).toBe(429);
    await refused.body?.cancel();
    // Nobody reads: once the idle time has passed the server closes both responses, and the slots
    // come back. (A paused client does not see the close: it reads nothing, not even the FIN.)
    const served = await poll(
      async () => {
        const res = await exportAs('admin');
        if (res.status === 200) return res;
        await res.body?.cancel();
        return undefined;
      },
      'a slot freed by the closed idle exports',
      { timeoutMs: 30_000, intervalMs: 200 },
    );
    expect((await served.arrayBuffer()).byteLength).toBeGreaterThan(4 * 1024 * 1024);
    for (const h of held) h.drop();
  });
});

/**
 * An export read at about `bytesPerSecond`: node:http, the response paused and resumed for a
 * ration of bytes every 100 ms. Resolves with what arrived and how the response ended.
 */
function trickleExport(
  base: string,
  bytesPerSecond: number,
): Promise<{ status: number; pace: string | undefined; received: number; ended: 'complete' | 'cut' }> {
  return new Promise((resolve, reject) => {
    const req = request(
      `${base}/v1/attestations/export`,
      {
        method: 'POST',
        headers: { authorization: `Bearer ${stack().kube.tokens.alice}`, 'content-type': 'application/json' },
      },
      (res) => {
        let received = 0;
        let allowance = 0;
        const ration = setInterval(() => {
          allowance += bytesPerSecond / 10;
          if (received < allowance) res.resume();
        }, 100);
        res.pause();
        res.on('data', (c: Buffer) => {
          received += c.length;
          if (received >= allowance) res.pause();
        });
        const done = (ended: 'complete' | 'cut') => {
          clearInterval(ration);
          resolve({
            status: res.statusCode ?? 0,
            pace: res.headers['x-export-min-rate'] as string,
            received,
            ended,
          });
        };
        res.once('end', () => done(res.complete ? 'complete' : 'cut'));
        res.once('aborted', () => done('cut'));
        res.once('error', () => done('cut'));
      },
    );
    req.once('error', reject);
    req.end(JSON.stringify({ namespaces: [namespace] }));
  });
}

describe('a reader that trickles (EXPORT_MIN_BYTES_PER_SECOND)', () => {
  it('is closed once it reads slower than the floor it was told, its slot comes back, and the audit log says why', async () => {
    // Idle 5 s (so the rate is judged over 10 s of waiting), floor 2 MiB/s. The reader takes
    // 400 KB/s: fast enough that no 1 MiB chunk waits the idle time (the old watchdog never closed
    // it: it would have held the slot for the whole 30 MB, and a larger export for hours), far
    // below the floor. A reader above the floor is the one of the tests above (fetch reads all).
    const signer = signerFromPem(await generateDevPki());
    paced = await stackApp(t.vault, signer.caCertificates, {
      signer,
      exportConcurrency: 2,
      exportIdleMs: 5_000,
      exportMinBytesPerSecond: 2 * 1024 * 1024,
    });
    await paced.listen({ host: '127.0.0.1', port: 0 });
    const base = `http://127.0.0.1:${(paced.server.address() as AddressInfo).port}`;
    const before = (await t.vault.audit.list({ namespaces: [namespace], limit: 100_000 })).at(-1)?.id ?? 0;

    const started = Date.now();
    const trickle = await trickleExport(base, 400_000);
    console.log(
      `[export-pace] trickling reader at 400 KB/s against a 2 MiB/s floor: ${trickle.ended} after ` +
        `${((Date.now() - started) / 1000).toFixed(1)} s and ${(trickle.received / 1024 / 1024).toFixed(1)} MiB ` +
        `(x-export-min-rate: ${trickle.pace})`,
    );
    expect(trickle.status).toBe(200);
    expect(trickle.pace).toBe('2097152; window=10; idle=5');
    expect(trickle.ended).toBe('cut');
    // Closed before its end: the whole bundle is over 4 MiB per 1,000 records.
    expect(trickle.received).toBeLessThan(ROWS * 4096);

    // Its slot is back: alice (the same caller, one slot of two) exports again at once, read fast.
    const again = await fetch(`${base}/v1/attestations/export`, {
      method: 'POST',
      headers: { authorization: `Bearer ${stack().kube.tokens.alice}`, 'content-type': 'application/json' },
      body: JSON.stringify({ namespaces: [namespace] }),
    });
    expect(again.status).toBe(200);
    expect((await again.arrayBuffer()).byteLength).toBeGreaterThan(4 * 1024 * 1024);

    const rows = await t.vault.audit.list({ namespaces: [namespace], after: before, limit: 100_000 });
    const aborted = rows.filter((r) => r.action === 'attestations.export.aborted');
    expect(aborted).toHaveLength(1);
    expect(aborted[0]!.details?.reason).toMatch(
      /^the client read \d+ bytes\/s over \d+ s of waiting, below the floor of 2097152 bytes\/s$/,
    );
  }, 180_000);
});
