/**
 * Deletions, reorderings and relabellings detectable by a client (ADR 0008, docs/chain.md), on the
 * real stack: the controller's checkpointer (runCheckpointer, as the leader runs it) signs
 * checkpoints on request and registers them in the transparency log; `service-ctl verify --chain`
 * checks the whole vault against them through the API; then the database superuser removes,
 * reorders and relabels records behind the triggers, including the removal the old chain walk
 * cannot see (later seqs renumbered and the next row's prev_digest rewritten), and each is
 * reported.
 */
import { execFile } from 'node:child_process';
import { writeFile } from 'node:fs/promises';
import type { AddressInfo } from 'node:net';
import { promisify } from 'node:util';
import { CoreV1Api, RbacAuthorizationV1Api } from '@kubernetes/client-node';
import type { FastifyInstance } from 'fastify';
import pg from 'pg';
import { pino } from 'pino';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { generateDevPki } from '../../../hack/dev-pki.ts';
import { repoRoot } from '../../../hack/stack/stack.ts';
import { envelopeDigest } from '../../../src/attest/index.ts';
import { runCheckpointer } from '../../../src/checkpoint/checkpointer.ts';
import { verifyCheckpoint } from '../../../src/checkpoint/statement.ts';
import { makeCheckpoint } from '../../../src/checkpoint/tree.ts';
import { assertConsistent } from '../../../src/checkpoint/verify.ts';
import { signerFromPem, type KeySigner } from '../../../src/signing/index.ts';
import { verifyReceipt } from '../../../src/transparency/receipt.ts';
import { setupTransparency, type Transparency } from '../../../src/transparency/setup.ts';
import { createVaultPool, openVault, type StoredAttestation, type Vault } from '../../../src/vault/index.ts';
import { stackApp } from '../../helpers/app.ts';
import { serviceCtlEnv } from '../../helpers/cli-main.ts';
import { bindUser, createNamespace } from '../../helpers/rbac.ts';
import { runRecords } from '../../helpers/records.ts';
import { freshDatabaseLogins, kubeConfig, stack, uniqueName } from '../../helpers/stack.ts';

const ns = uniqueName('chain');
let superuser: string;
let vault: Vault;
let signer: KeySigner;
let transparency: Transparency;
let app: FastifyInstance;
let apiUrl: string;
let verifierToken: string;
const stop = new AbortController();
let checkpointer: Promise<void>;
const stored: StoredAttestation[] = [];
let dir: string;
let keyFile: string;

const admin = () => ({ authorization: `Bearer ${stack().kube.tokens.admin}` });

/** A ServiceAccount bound cluster-wide to aibom-vault-chain-verifier (manifests/rbac.yaml), and its token. */
async function chainVerifierToken(): Promise<string> {
  const kc = kubeConfig('admin');
  const name = 'chain-verifier';
  await kc
    .makeApiClient(CoreV1Api)
    .createNamespacedServiceAccount({ namespace: ns, body: { metadata: { name } } });
  await kc.makeApiClient(RbacAuthorizationV1Api).createClusterRoleBinding({
    body: {
      metadata: { name: `${ns}-chain-verifier` },
      roleRef: {
        apiGroup: 'rbac.authorization.k8s.io',
        kind: 'ClusterRole',
        name: 'aibom-vault-chain-verifier',
      },
      subjects: [{ kind: 'ServiceAccount', name, namespace: ns }],
    },
  });
  const tr = await kc
    .makeApiClient(CoreV1Api)
    .createNamespacedServiceAccountToken({ name, namespace: ns, body: { spec: { audiences: [] } } });
  return tr.status!.token!;
}

beforeAll(async () => {
  const db = await freshDatabaseLogins('chain');
  superuser = db.superuser;
  vault = await openVault(createVaultPool(db.runtime));
  signer = signerFromPem(await generateDevPki());
  await createNamespace(ns);
  await bindUser('alice', 'aibom-vault-viewer', ns);
  verifierToken = await chainVerifierToken();
  for (let i = 0; i < 3; i++)
    stored.push(...(await vault.attestations.append(runRecords(signer, ns).records)));
  transparency = setupTransparency({
    vault,
    signer,
    caCertificates: signer.caCertificates,
    logSigner: signer,
    issuer: 'chain-test',
    backend: 'local',
    logger: pino({ level: 'silent' }),
  });
  // The leader's checkpointer, with SERVICE_TRANSPARENCY_WRITER=1: on request only (long interval).
  checkpointer = runCheckpointer(
    {
      vault,
      signer,
      caCertificates: signer.caCertificates,
      intervalMs: 3_600_000,
      publisher: transparency.publisher,
      logger: pino({ level: 'silent' }),
    },
    stop.signal,
  );
  app = await stackApp(vault, signer.caCertificates);
  await app.listen({ host: '127.0.0.1', port: 0 });
  apiUrl = `http://127.0.0.1:${(app.server.address() as AddressInfo).port}`;
  dir = stack().root;
  keyFile = `${dir}/chain-key-${ns}.pem`;
  await writeFile(keyFile, signer.publicKey.export({ type: 'spki', format: 'pem' }));
});

afterAll(async () => {
  stop.abort();
  await checkpointer;
  await app?.close();
  await vault?.close();
});

const service = (args: string[]) =>
  promisify(execFile)(process.execPath, [
    `${repoRoot}/src/bin/service-ctl.ts`,
    ...args,
    '--api-url',
    apiUrl,
    '--token',
    verifierToken,
  ]).then(
    (r) => ({ code: 0, stdout: r.stdout, stderr: r.stderr }),
    (e: { code: number; stdout: string; stderr: string }) => e,
  );

/** POST /v1/chain/checkpoint as the verifier: the controller's checkpointer answers. */
async function requestCheckpoint(): Promise<{ tree_size: number; statement: string; root_hash: string }> {
  const res = await app.inject({
    method: 'POST',
    url: '/v1/chain/checkpoint?wait=30',
    headers: { authorization: `Bearer ${verifierToken}` },
  });
  expect(res.statusCode, res.body).toBe(200);
  return res.json();
}

/** As the superuser, every trigger off for the session (replica role): what the issue did. */
async function asSuperuser(fn: (c: pg.Client) => Promise<unknown>): Promise<void> {
  const c = new pg.Client({ connectionString: superuser });
  await c.connect();
  try {
    await c.query('BEGIN');
    await c.query('SET LOCAL session_replication_role = replica');
    await fn(c);
    await c.query('COMMIT');
  } finally {
    await c.end();
  }
}

describe('the chain through the API and service-ctl', () => {
  let first: { tree_size: number; statement: string };
  const firstFile = () => `${dir}/checkpoint-9-${ns}.cose`;
  const exportFile = () => `${dir}/records-${ns}.ndjson`;

  it('needs get on attestations/chain cluster-wide: a namespace viewer is refused', async () => {
    const res = await app.inject({
      url: '/v1/chain/checkpoint',
      headers: { authorization: `Bearer ${stack().kube.tokens.alice}` },
    });
    expect(res.statusCode).toBe(403);
    expect(res.json()).toMatchObject({ code: 'FORBIDDEN' });
    const post = await app.inject({
      method: 'POST',
      url: '/v1/chain/checkpoint',
      headers: { authorization: `Bearer ${stack().kube.tokens.alice}` },
    });
    expect(post.statusCode).toBe(403);
  });

  it('the controller signs a checkpoint on request; it verifies and is registered in the transparency log', async () => {
    first = await requestCheckpoint();
    expect(first.tree_size).toBe(9);
    const signed = verifyCheckpoint(Buffer.from(first.statement, 'base64'), {
      trustAnchors: signer.caCertificates,
    });
    expect(signed).toMatchObject({ treeSize: 9, lastId: stored[8]!.id });
    // A checkpoint asked for again without new records is the same one.
    expect((await requestCheckpoint()).tree_size).toBe(9);
    // Registered by the checkpointer after signing: poll the view until the receipt is there.
    let view: { transparency: { backend: string; receipt: string } | null } = { transparency: null };
    for (let i = 0; i < 120 && view.transparency === null; i++) {
      view = (await app.inject({ url: '/v1/chain/checkpoint?tree_size=9', headers: admin() })).json();
      if (view.transparency === null) await new Promise((r) => setTimeout(r, 250));
    }
    expect(view.transparency?.backend).toBe('local');
    const receipt = verifyReceipt({
      receipt: Buffer.from(view.transparency!.receipt, 'base64'),
      statement: Buffer.from(first.statement, 'base64'),
      logKey: transparency.log.keys,
    });
    expect(receipt.ok).toBe(true);
  });

  it('service-ctl verify --chain: the records fold to the signed root; the checkpoint is saved', async () => {
    // The tenant's own export, kept with the checkpoint.
    const exported = await app.inject({
      method: 'POST',
      url: '/v1/attestations/query',
      headers: { ...admin(), accept: 'application/x-ndjson' },
      payload: { namespaces: [ns] },
    });
    await writeFile(exportFile(), exported.body);
    const r = await service([
      'verify',
      '--chain',
      '--key',
      keyFile,
      '--save-checkpoint',
      firstFile(),
      '--records',
      exportFile(),
    ]);
    expect(r.stdout).toContain('9 records, gapless, fold to the signed root');
    expect(r.stdout).toContain('9 records you hold are where they were');
    expect(r.stdout).toContain('chain verified');
    expect(r.code).toBe(0);
  });

  it('--chain trusts a CA as --aibom does: --trust-bundle, SERVICE_TRUST_ANCHOR; another CA fails; none is a usage error', async () => {
    const trust = `${dir}/chain-trust-${ns}`;
    expect((await service(['keys', 'fetch', '--out', trust])).code).toBe(0);
    const viaBundle = await service(['verify', '--chain', '--trust-bundle', trust]);
    expect(viaBundle.stdout).toMatch(/^OK {4}checkpoint of \d+ records signed \(the trust anchor\)/m);
    expect(viaBundle.stdout).toContain('chain verified');
    expect(viaBundle.code).toBe(0);
    const withEnv = (env: Record<string, string | undefined>, args: string[]) =>
      promisify(execFile)(
        process.execPath,
        [`${repoRoot}/src/bin/service-ctl.ts`, ...args, '--api-url', apiUrl, '--token', verifierToken],
        { env: serviceCtlEnv(apiUrl, verifierToken, env) },
      ).then(
        (r) => ({ code: 0, stdout: r.stdout, stderr: r.stderr }),
        (e: { code: number; stdout: string; stderr: string }) => e,
      );
    const viaEnv = await withEnv({ SERVICE_TRUST_ANCHOR: `${trust}/ca.pem` }, ['verify', '--chain']);
    expect(viaEnv.stdout).toContain('chain verified');
    expect(viaEnv.code).toBe(0);
    // A CA that did not issue the signer: the checkpoint's signature is not believed.
    const other = `${dir}/chain-other-ca-${ns}.pem`;
    await writeFile(other, (await generateDevPki())['ca.crt']);
    const foreign = await withEnv({ SERVICE_TRUST_ANCHOR: other }, ['verify', '--chain']);
    expect(foreign.code).toBe(1);
    expect(foreign.stdout).not.toContain('chain verified');
    // Nothing to trust: one line, exit 2.
    const none = await withEnv({ SERVICE_TRUST_ANCHOR: undefined }, ['verify', '--chain']);
    expect(none.code).toBe(2);
    expect(none.stderr.trim().split('\n')).toEqual([
      expect.stringMatching(/--chain needs --key .*--trust-bundle/) as unknown,
    ]);
  });

  it('an older checkpoint + the current one: consistency verified (API proof and service-ctl)', async () => {
    stored.push(...(await vault.attestations.append(runRecords(signer, ns).records)));
    // Before any checkpoint covers the new records: an export holding them is not "verified", and
    // only the 9 a signed root covers are counted where they were.
    const heldFile = `${dir}/records-uncovered-${ns}.ndjson`;
    const all = await app.inject({
      method: 'POST',
      url: '/v1/attestations/query',
      headers: { ...admin(), accept: 'application/x-ndjson' },
      payload: { namespaces: [ns] },
    });
    await writeFile(heldFile, all.body);
    const early = await service(['verify', '--chain', '--key', keyFile, '--records', heldFile]);
    expect(early.stdout).toMatch(
      /FAIL {2}NOT_COVERED: 3 record\(s\) you hold \(seq 10…12\) are beyond the newest checkpoint \(9 records\)/,
    );
    expect(early.stdout).toContain('OK    9 records, gapless, fold to the signed root');
    expect(early.stdout).toContain('OK    9 records you hold are where they were');
    expect(early.stdout).not.toContain('12 records you hold');
    expect(early.stdout).toContain('chain NOT verified (1 problem(s))');
    expect(early.code).toBe(1);
    const second = await requestCheckpoint();
    expect(second.tree_size).toBe(12);
    const proof = (await app.inject({ url: '/v1/chain/consistency?from=9', headers: admin() })).json<{
      from: number;
      to: number;
      proof: string[];
    }>();
    expect(proof).toMatchObject({ from: 9, to: 12 });
    const trust = { publicKeys: [signer.publicKey] };
    const older = verifyCheckpoint(Buffer.from(first.statement, 'base64'), trust);
    const newer = verifyCheckpoint(Buffer.from(second.statement, 'base64'), trust);
    const hashes = proof.proof.map((h) => Buffer.from(h, 'hex'));
    expect(() => assertConsistent(older, newer, hashes)).not.toThrow();
    // The proof binds: a changed hash, or the roots swapped, fail.
    const bent = hashes.map((h, i) => (i === 0 ? Buffer.from(h.map((b) => b ^ 1)) : h));
    expect(() => assertConsistent(older, newer, bent)).toThrow(
      expect.objectContaining({ code: 'INCONSISTENT' }),
    );
    const r = await service([
      'verify',
      '--chain',
      '--key',
      keyFile,
      '--checkpoint',
      firstFile(),
      '--records',
      exportFile(),
    ]);
    expect(r.stdout).toContain('checkpoint 12 extends your checkpoint 9 (RFC 9162 consistency)');
    expect(r.stdout).toContain('12 records, gapless, fold to the signed roots');
    expect(r.code).toBe(0);
    // An inclusion proof of a record in the newest checkpoint.
    const inc = await app.inject({ url: `/v1/chain/inclusion?seq=${stored[4]!.seq}`, headers: admin() });
    expect(inc.json<{ proof: string[] }>().proof.length).toBeGreaterThan(0);
  });

  it('a record relabelled after the checkpoint: ROOT_MISMATCH (its leaf no longer matches)', async () => {
    const victim = stored[1]!;
    await asSuperuser((c) =>
      c.query(`UPDATE attestations SET namespace = 'elsewhere' WHERE id = $1`, [victim.id]),
    );
    const r = await service(['verify', '--chain', '--key', keyFile, '--checkpoint', firstFile()]);
    expect(r.code).toBe(1);
    expect(r.stdout).toMatch(/FAIL {2}ROOT_MISMATCH: the first 9 records/);
    expect(r.stdout).toMatch(/FAIL {2}ROOT_MISMATCH: the first 12 records/);
    await asSuperuser((c) =>
      c.query('UPDATE attestations SET namespace = $1 WHERE id = $2', [ns, victim.id]),
    );
    expect((await service(['verify', '--chain', '--key', keyFile])).code).toBe(0);
  });

  it('two records swapped (reordered): ROOT_MISMATCH; the tenant sees its records moved', async () => {
    const [x, y] = [stored[2]!, stored[3]!];
    const swap = (c: pg.Client, s1: number, s2: number) =>
      c
        .query('UPDATE attestations SET seq = 999999 WHERE seq = $1', [s1])
        .then(() => c.query('UPDATE attestations SET seq = $1 WHERE seq = $2', [s1, s2]))
        .then(() => c.query('UPDATE attestations SET seq = $1 WHERE seq = 999999', [s2]));
    await asSuperuser((c) => swap(c, x.seq, y.seq));
    const r = await service(['verify', '--chain', '--key', keyFile, '--records', exportFile()]);
    expect(r.code).toBe(1);
    expect(r.stdout).toContain('ROOT_MISMATCH');
    expect(r.stdout).toContain(`LEAF_MISMATCH: the record you hold at seq ${x.seq}`);
    await asSuperuser((c) => swap(c, x.seq, y.seq));
    expect((await service(['verify', '--chain', '--key', keyFile])).code).toBe(0);
  });

  it('a subtree changed in the database: the checkpointer refuses to sign over it (TREE_DIVERGED)', async () => {
    stored.push(...(await vault.attestations.append(runRecords(signer, ns).records)));
    // The subtree of the first 8 records: part of every later tree's frontier and of the 9 → 12 proof.
    let saved: Buffer | undefined;
    await asSuperuser(async (c) => {
      const { rows } = await c.query<{ hash: Buffer }>(
        'SELECT hash FROM vault_tree_nodes WHERE level = 3 AND idx = 0',
      );
      saved = rows[0]!.hash;
      await c.query(`UPDATE vault_tree_nodes SET hash = sha256('x') WHERE level = 3 AND idx = 0`);
    });
    await expect(
      makeCheckpoint(vault.checkpoints, { signer, caCertificates: signer.caCertificates }),
    ).rejects.toMatchObject({
      code: 'TREE_DIVERGED',
    });
    // And the API's proofs over it no longer verify for a client.
    const proof = (await app.inject({ url: '/v1/chain/consistency?from=9', headers: admin() })).json<{
      proof: string[];
    }>();
    const trust = { publicKeys: [signer.publicKey] };
    const older = verifyCheckpoint(Buffer.from(first.statement, 'base64'), trust);
    const newest = (await app.inject({ url: '/v1/chain/checkpoint', headers: admin() })).json<{
      statement: string;
    }>();
    expect(() =>
      assertConsistent(
        older,
        verifyCheckpoint(Buffer.from(newest.statement, 'base64'), trust),
        proof.proof.map((h) => Buffer.from(h, 'hex')),
      ),
    ).toThrow(expect.objectContaining({ code: 'INCONSISTENT' }));
    await asSuperuser((c) =>
      c.query('UPDATE vault_tree_nodes SET hash = $1 WHERE level = 3 AND idx = 0', [saved]),
    );
    expect((await requestCheckpoint()).tree_size).toBe(15);
  });

  it('a middle record deleted, later seqs renumbered and the next link rewritten: the old walk passes, the chain does not', async () => {
    const victim = stored[4]!; // seq 5
    await asSuperuser(async (c) => {
      await c.query('DELETE FROM attestations WHERE id = $1', [victim.id]);
      await c.query('UPDATE attestations SET seq = seq - 1 WHERE seq > $1', [victim.seq]);
      await c.query('UPDATE attestations SET prev_digest = $1 WHERE seq = $2', [
        victim.prevDigest,
        victim.seq,
      ]);
      await c.query('UPDATE vault_head SET last_seq = last_seq - 1');
    });
    // What the issue found: the hash chain alone is consistent again.
    expect((await vault.attestations.verifyChain({ digestOf: envelopeDigest })).ok).toBe(true);
    const r = await service([
      'verify',
      '--chain',
      '--key',
      keyFile,
      '--checkpoint',
      firstFile(),
      '--records',
      exportFile(),
    ]);
    expect(r.code).toBe(1);
    expect(r.stdout).toMatch(/FAIL {2}CHAIN_GAP: the vault serves 14 records but checkpoint 15 covers 15/);
    expect(r.stdout).toMatch(/FAIL {2}ROOT_MISMATCH: the first 9 records/);
    expect(r.stdout).toContain(`LEAF_MISMATCH: the record you hold at seq ${victim.seq}`);
    // Deleted without renumbering: a gap at its seq.
    const next = stored[9]!;
    await asSuperuser((c) => c.query('DELETE FROM attestations WHERE id = $1', [next.id]));
    const gap = await service(['verify', '--chain', '--key', keyFile]);
    expect(gap.code).toBe(1);
    expect(gap.stdout).toMatch(/CHAIN_GAP: record seq \d+ follows seq \d+: records are missing/);
  });
});
