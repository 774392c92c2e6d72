/**
 * Labels bound to what is signed (ADR 0007), attacked as the database superuser: with the
 * append-only trigger off, one tenant's record is moved into another tenant's namespace (and another
 * run), where that tenant's queries would find it. The API must not serve it to anyone, and
 * `service-ctl verify` must fail on it, whether it asks the API or is handed the relabelled record.
 */
import { execFile } from 'node:child_process';
import { writeFile } from 'node:fs/promises';
import type { AddressInfo } from 'node:net';
import { promisify } from 'node:util';
import type { FastifyInstance } from 'fastify';
import pg from 'pg';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { generateDevPki } from '../../../hack/dev-pki.ts';
import { repoRoot } from '../../../hack/stack/stack.ts';
import { signerFromPem, type KeySigner } from '../../../src/signing/index.ts';
import { createVaultPool, openVault, type StoredAttestation, type Vault } from '../../../src/vault/index.ts';
import { stackApp } from '../../helpers/app.ts';
import { bindUser, createNamespace } from '../../helpers/rbac.ts';
import { runRecords } from '../../helpers/records.ts';
import { freshDatabaseLogins, stack, uniqueName } from '../../helpers/stack.ts';

const nsA = uniqueName('relabel-a');
const nsB = uniqueName('relabel-b');
let superuser: string;
let vault: Vault;
let signer: KeySigner;
let app: FastifyInstance;
let apiUrl: string;
let a: { runId: string; stored: StoredAttestation[] };
let b: { runId: string; stored: StoredAttestation[] };

const token = (u: 'admin' | 'alice') => ({ authorization: `Bearer ${stack().kube.tokens[u]}` });

beforeAll(async () => {
  const db = await freshDatabaseLogins('relabel');
  superuser = db.superuser;
  vault = await openVault(createVaultPool(db.runtime));
  signer = signerFromPem(await generateDevPki());
  await Promise.all([createNamespace(nsA), createNamespace(nsB)]);
  // alice is tenant A: she may read namespace A only.
  await bindUser('alice', 'aibom-vault-viewer', nsA);
  const ra = runRecords(signer, nsA);
  const rb = runRecords(signer, nsB);
  a = { runId: ra.runId, stored: await vault.attestations.append(ra.records) };
  b = { runId: rb.runId, stored: await vault.attestations.append(rb.records) };
  app = await stackApp(vault, signer.caCertificates);
  await app.listen({ host: '127.0.0.1', port: 0 });
  apiUrl = `http://127.0.0.1:${(app.server.address() as AddressInfo).port}`;
});

afterAll(async () => {
  await app?.close();
  await vault?.close();
});

/** As the superuser, with the append-only trigger off for the statement: what the issue did. */
async function asSuperuser(sql: string, values: unknown[]): Promise<void> {
  const c = new pg.Client({ connectionString: superuser });
  await c.connect();
  try {
    await c.query('BEGIN');
    await c.query('ALTER TABLE attestations DISABLE TRIGGER attestations_append_only');
    await c.query(sql, values);
    await c.query('ALTER TABLE attestations ENABLE TRIGGER attestations_append_only');
    await c.query('COMMIT');
  } finally {
    await c.end();
  }
}

const service = (args: string[]) =>
  promisify(execFile)(process.execPath, [`${repoRoot}/src/bin/service-ctl.ts`, ...args]).catch(
    (e: { code: number; stdout: string; stderr: string }) => e,
  );

it("tenant B's record moved into tenant A's namespace and run is served to nobody, and verify fails", async () => {
  const victim = b.stored[1]!; // B's step record
  // Before: alice sees exactly her three records.
  const before = await app.inject({
    method: 'POST',
    url: '/v1/attestations/query',
    headers: token('alice'),
    payload: { namespaces: [nsA] },
  });
  expect(before.statusCode).toBe(200);
  expect(before.json<{ items: { id: string }[] }>().items.map((i) => i.id)).toEqual(
    a.stored.map((s) => s.id),
  );
  // The good record, for the CLI check below: exactly as served.
  const good = (await app.inject({ url: `/v1/attestations/${victim.id}`, headers: token('admin') })).json<
    Record<string, unknown>
  >();

  await asSuperuser('UPDATE attestations SET namespace = $1, run_id = $2 WHERE id = $3', [
    nsA,
    a.runId,
    victim.id,
  ]);

  // Tenant A's queries would now find it: every read path refuses instead of serving it.
  for (const payload of [{ namespaces: [nsA] }, { run_id: a.runId }, {}]) {
    const res = await app.inject({
      method: 'POST',
      url: '/v1/attestations/query',
      headers: token('alice'),
      payload,
    });
    expect(res.statusCode, JSON.stringify(payload)).toBe(500);
    expect(res.json()).toMatchObject({ code: 'RECORD_TAMPERED' });
    expect(res.body).not.toContain(victim.digest);
  }
  const get = await app.inject({ url: `/v1/attestations/${victim.id}`, headers: token('alice') });
  expect(get.statusCode).toBe(500);
  expect(get.json()).toMatchObject({ code: 'RECORD_TAMPERED' });
  expect(get.json<{ detail: string }>().detail).toMatch(/namespace, run_id/);
  // The admin too: a relabelled record is nobody's to read.
  expect(
    (await app.inject({ url: `/v1/attestations/${victim.id}`, headers: token('admin') })).statusCode,
  ).toBe(500);
  // A stream cannot change its status once started: it is cut, never completed with the record.
  const stream = await fetch(`${apiUrl}/v1/attestations/query`, {
    method: 'POST',
    headers: { ...token('alice'), 'content-type': 'application/json', accept: 'application/x-ndjson' },
    body: JSON.stringify({ namespaces: [nsA] }),
  });
  const text = await stream.text().catch((e: unknown) => `cut: ${String(e)}`);
  expect(text).not.toContain(victim.digest);
  // SCITT publication is refused too (authorised by the stored namespace).
  const scitt = await app.inject({
    method: 'POST',
    url: '/v1/attestations/scitt',
    headers: token('admin'),
    payload: { id: victim.id },
  });
  expect(scitt.json()).toMatchObject({ code: 'RECORD_TAMPERED' });

  // service-ctl verify by id: the API's refusal is the verdict (exit 1, the problem's code).
  const key = `${stack().root}/relabel-key-${victim.id}.pem`;
  await writeFile(key, signer.publicKey.export({ type: 'spki', format: 'pem' }));
  const byId = await service([
    'verify',
    victim.id,
    '--key',
    key,
    '--api-url',
    apiUrl,
    '--token',
    stack().kube.tokens.admin,
  ]);
  // Code and stderr together: a wrong exit code shows what the CLI said.
  const answer = byId as { code?: number; stderr: string };
  expect(`${String(answer.code)} ${answer.stderr}`).toMatch(/^1 .*RECORD_TAMPERED/s);
  // Handed the relabelled record (an API that served it): LABEL_MISMATCH, exit 1.
  const file = `${stack().root}/relabelled-${victim.id}.json`;
  await writeFile(file, JSON.stringify({ ...good, namespace: nsA, run_id: a.runId }));
  const offline = await service(['verify', file, '--key', key]);
  expect(offline).toMatchObject({ code: 1 });
  expect((offline as { stdout: string }).stdout).toMatch(/LABEL_MISMATCH: namespace, run_id differ/);
  // The record as signed still verifies.
  await writeFile(file, JSON.stringify(good));
  const ok = await service(['verify', file, '--key', key]);
  expect((ok as { stdout: string }).stdout).toContain('1 verified, 0 failed');

  // Put back: served again.
  await asSuperuser('UPDATE attestations SET namespace = $1, run_id = $2 WHERE id = $3', [
    nsB,
    b.runId,
    victim.id,
  ]);
  expect(
    (await app.inject({ url: `/v1/attestations/${victim.id}`, headers: token('admin') })).statusCode,
  ).toBe(200);
});

it('each other relabelled column (subjects, kind, step, policy pack, capability tokens) is refused too', async () => {
  const victim = a.stored[1]!;
  for (const [column, value] of [
    ['subjects', [`step:${b.runId}:summarise`]],
    ['kind', 'run'],
    ['step_id', 'other'],
    ['policy_pack', 'strict'],
    ['capability_token_ids', []],
  ] as const) {
    const c = new pg.Client({ connectionString: superuser });
    await c.connect();
    const saved = (
      await c.query<{ v: unknown }>(`SELECT ${column} AS v FROM attestations WHERE id = $1`, [victim.id])
    ).rows[0]!.v;
    await c.end();
    await asSuperuser(`UPDATE attestations SET ${column} = $1 WHERE id = $2`, [value, victim.id]);
    const res = await app.inject({ url: `/v1/attestations/${victim.id}`, headers: token('admin') });
    expect(res.statusCode, column).toBe(500);
    expect(res.json(), column).toMatchObject({ code: 'RECORD_TAMPERED' });
    await asSuperuser(`UPDATE attestations SET ${column} = $1 WHERE id = $2`, [saved, victim.id]);
    expect(
      (await app.inject({ url: `/v1/attestations/${victim.id}`, headers: token('admin') })).statusCode,
    ).toBe(200);
  }
});
