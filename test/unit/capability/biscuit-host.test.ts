import { execFile } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { promisify } from 'node:util';
import { afterEach, describe, expect, it, vi } from 'vitest';
import { BiscuitHost } from '../../../src/capability/biscuit-host.ts';
import { readWithKey, rootKeyOfSeed, type BiscuitClaims } from '../../../src/capability/biscuit-wasm.ts';
import { CapabilityError } from '../../../src/capability/errors.ts';

/**
 * The Biscuit worker (src/capability/biscuit-host.ts): what it answers is what the in-thread
 * operations answer, it is replaced after its number of calls without losing one in flight, it
 * stops when idle and never keeps a process alive, and a stopped worker's calls fail with
 * BISCUIT_UNAVAILABLE while the next call gets a new one.
 */

const seed = randomBytes(32);
const claims = (n: number): BiscuitClaims => ({
  namespace: 'team-a',
  runId: `run-${n}`,
  step: `step:run-${n}:tool`,
  capability: `capability:run-${n}:tool:0`,
  attestations: [`0190a6c0-0000-7000-8000-${String(n).padStart(12, '0')}`],
  links: [
    { grantedBy: 'user:alice', scope: 'kb:read', approvedBy: 'user:bob' },
    { grantedBy: 'agent:x', scope: 'kb:read:faq', approvedBy: null },
  ],
  validUntil: new Date('2030-01-01T00:00:00.000Z'),
});

const hosts: BiscuitHost[] = [];
function hostOf(options: ConstructorParameters<typeof BiscuitHost>[0]): BiscuitHost {
  const h = new BiscuitHost(options);
  hosts.push(h);
  return h;
}
afterEach(async () => {
  await Promise.all(hosts.splice(0).map((h) => h.close()));
});

describe('the Biscuit worker', () => {
  it('mints what this thread reads back under the same root, and derives the same root key', async () => {
    const host = hostOf({});
    const root = await host.call({ op: 'rootKey', seed });
    expect(root).toBe(await rootKeyOfSeed(seed));
    const minted = await host.call({ op: 'mint', seed, claims: claims(1) });
    const here = await readWithKey(minted.token, root);
    expect(here.id).toBe(minted.id);
    expect(here.claims).toEqual(claims(1));
    // And the other way round: the worker reads what it minted, Dates and nulls intact.
    expect(await host.call({ op: 'read', token: minted.token, rootKey: root })).toEqual(here);
  });

  it('is replaced after callsPerWorker calls, and every call in flight across the change is answered', async () => {
    // Idle workers stop only after ten minutes here: what stops the retired ones is retirement.
    const host = hostOf({ callsPerWorker: 3, idleMs: 600_000 });
    const root = await host.call({ op: 'rootKey', seed });
    const minted = await Promise.all(
      Array.from({ length: 10 }, (_, i) => host.call({ op: 'mint', seed, claims: claims(i) })),
    );
    // 11 calls at 3 a worker: 4 workers.
    expect(host.workersStarted).toBe(4);
    const read = await Promise.all(minted.map((m) => readWithKey(m.token, root)));
    expect(read.map((r) => r.claims.runId)).toEqual(Array.from({ length: 10 }, (_, i) => `run-${i}`));
    expect(new Set(minted.map((m) => m.id)).size).toBe(10);
    // The three retired workers are stopped once their answers are in; the fourth stays.
    await vi.waitFor(() => expect(host.live).toBe(1), { timeout: 20_000, interval: 20 });
    expect(host.running).toBe(true);
  });

  it('passes CapabilityError codes through, and the library’s own errors as it threw them', async () => {
    const host = hostOf({});
    const root = await rootKeyOfSeed(seed);
    const bad = await host.call({ op: 'read', token: 'not a token', rootKey: root }).catch((e: unknown) => e);
    expect(bad).toBeInstanceOf(CapabilityError);
    expect(bad).toMatchObject({ code: 'TOKEN_MALFORMED', message: 'not a Biscuit token' });
    const other = await rootKeyOfSeed(randomBytes(32));
    const untrusted = await host
      .call({
        op: 'read',
        token: (await host.call({ op: 'mint', seed, claims: claims(2) })).token,
        rootKey: other,
      })
      .catch((e: unknown) => e);
    expect(untrusted).toMatchObject({ code: 'TOKEN_UNTRUSTED' });
    // A policy that does not match: biscuit-wasm throws its error object, not a CapabilityError.
    const { token } = await host.call({ op: 'mint', seed, claims: claims(3) });
    const denied = await host
      .call({
        op: 'authorize',
        token,
        rootKey: root,
        authorizer: 'time(2029-01-01T00:00:00Z); allow if step("nobody");',
      })
      .catch((e: unknown) => e);
    expect(denied).not.toBeInstanceOf(CapabilityError);
    expect(JSON.stringify(denied)).toMatch(/NoMatchingPolicy|FailedLogic/);
    await expect(
      host.call({
        op: 'authorize',
        token,
        rootKey: root,
        authorizer: `time(2029-01-01T00:00:00Z); operation("kb:read:faq"); allow if step("step:run-3:tool");`,
      }),
    ).resolves.toBe(0);
  });

  it('stops when idle, and the next call starts another', async () => {
    const host = hostOf({ idleMs: 20 });
    await host.call({ op: 'rootKey', seed });
    expect(host.running).toBe(true);
    await vi.waitFor(() => expect(host.running).toBe(false), { timeout: 30_000, interval: 20 });
    expect(await host.call({ op: 'rootKey', seed })).toBe(await rootKeyOfSeed(seed));
    expect(host.workersStarted).toBe(2);
  });

  it('a worker stopped with calls in flight fails them with BISCUIT_UNAVAILABLE; the host goes on', async () => {
    const host = hostOf({});
    const inFlight = host.call({ op: 'mint', seed, claims: claims(4) }).catch((e: unknown) => e);
    await host.close();
    expect(await inFlight).toMatchObject({ code: 'BISCUIT_UNAVAILABLE' });
    expect(await host.call({ op: 'rootKey', seed })).toBe(await rootKeyOfSeed(seed));
  });

  it('never keeps a process alive, and prints nothing on its stdout', async () => {
    // A child that mints through the module-level host and returns: it must exit by itself.
    const script = [
      "const { mintBiscuit } = await import('./src/capability/biscuit.ts');",
      "const { signerFromPem } = await import('./src/signing/index.ts');",
      "const { generateDevPki } = await import('./hack/dev-pki.ts');",
      'const signer = signerFromPem(await generateDevPki());',
      "const m = await mintBiscuit(signer, { namespace: 'n', runId: 'r', step: 'step:r:s', capability: 'capability:r:s:0', attestations: [], links: [{ grantedBy: 'user:a', scope: '*', approvedBy: null }], validUntil: new Date() });",
      "process.stdout.write(typeof m.token === 'string' ? 'minted' : 'no token');",
      // What would keep it alive: the idle worker and its port (the idle timer is unref'd).
      "process.stdout.write(' ' + JSON.stringify(process.getActiveResourcesInfo().filter((r) => /Message|Worker|Timeout/.test(r))));",
    ].join('\n');
    const r = await promisify(execFile)(process.execPath, ['--input-type=module', '-e', script], {
      cwd: process.cwd(),
    });
    expect(r.stdout).toBe('minted []');
  });
});
