/**
 * Witnessed logs on the real stack (docs/transparency.md "Witnessed logs"): the leader's witnessing
 * loop (runWitnesser, as the controller runs it) signs C2SP checkpoints of both trees (the vault's
 * records and the local SCITT log) and pushes them to a real witness, litewitness from
 * filippo.io/torchwood, whose cosignatures an independent verifier (transparency-dev/formats
 * note.NewVerifierForCosignatureV1) accepts; a new leader after a crash recovers from a 409; an
 * independent tiles client (torchwood's) verifies the exported records' inclusion against the
 * served checkpoint and tiles; the RFC 9942 receipts prove the same SCITT tree the notes state;
 * and the tiles keep the API's tenancy rules.
 */
import { generateKeyPairSync, type KeyObject } from 'node:crypto';
import { writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import type { AddressInfo } from 'node:net';
import { RbacAuthorizationV1Api } from '@kubernetes/client-node';
import type { FastifyInstance } from 'fastify';
import { pino } from 'pino';
import { Registry } from 'prom-client';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { generateDevPki } from '../../../hack/dev-pki.ts';
import { leafEntry } from '../../../src/checkpoint/leaf.ts';
import { leafFieldsOf, makeCheckpoint } from '../../../src/checkpoint/tree.ts';
import { signerFromPem, type KeySigner } from '../../../src/signing/index.ts';
import { signCheckpoint } from '../../../src/tlog/checkpoint.ts';
import { cosigner, parseWitnessVkey } from '../../../src/tlog/cosignature.ts';
import { ed25519NoteSigner, parseNote } from '../../../src/tlog/note.ts';
import { decodeEntryBundle } from '../../../src/tlog/tiles.ts';
import { sign1Entry, verifyReceipt } from '../../../src/transparency/receipt.ts';
import { decodeSign1 } from '../../../src/transparency/statement.ts';
import { setupTransparency, type Transparency } from '../../../src/transparency/setup.ts';
import { createVaultPool, openVault, type StoredAttestation, type Vault } from '../../../src/vault/index.ts';
import { createWitnessClient } from '../../../src/witness/client.ts';
import { originOf, scittLog, vaultLog } from '../../../src/witness/logs.ts';
import { pushCheckpoint, type PushOutcome } from '../../../src/witness/push.ts';
import { runWitnesser, type WitnessAlarm } from '../../../src/witness/witnesser.ts';
import { stackApp } from '../../helpers/app.ts';
import { cliMain } from '../../helpers/cli-main.ts';
import { bindUser, createNamespace } from '../../helpers/rbac.ts';
import { runRecords } from '../../helpers/records.ts';
import { freshDatabase, kubeConfig, stack, uniqueName } from '../../helpers/stack.ts';
import { waitFor } from '../../helpers/wait.ts';
import { goCheck, serviceAccountToken, testWitness } from './witness-helpers.ts';

const nsA = uniqueName('wit-a');
const nsB = uniqueName('wit-b');
const prefix = `${nsA}.witness.test`;
const VAULT = originOf(prefix, 'vault');
const SCITT = originOf(prefix, 'scitt');
let vault: Vault;
let signer: KeySigner;
let noteKey: KeyObject;
let transparency: Transparency;
let witness: Awaited<ReturnType<typeof testWitness>>;
let app: FastifyInstance;
let publicApp: FastifyInstance;
let apiUrl: string;
let verifierToken: string;
const stored: StoredAttestation[] = [];
const outcomes: { log: string; outcome: PushOutcome }[] = [];
const alarms: WitnessAlarm[] = [];
const registry = new Registry();
let term = new AbortController();
let witnessing: Promise<void> = Promise.resolve();

const noteSigner = (origin: string) => ed25519NoteSigner(origin, noteKey);
const admin = () => ({ authorization: `Bearer ${stack().kube.tokens.admin}` });

/** A leadership term of the witnessing loop: on notifications only (a long interval). */
function startTerm(): void {
  term = new AbortController();
  witnessing = runWitnesser(
    {
      vault,
      logs: [vaultLog(vault, VAULT), scittLog(vault, SCITT)],
      signer: noteSigner,
      witnesses: [
        {
          key: parseWitnessVkey(witness.vkey),
          client: createWitnessClient({ url: witness.url, timeoutMs: 10_000 }),
        },
      ],
      intervalMs: 3_600_000,
      logger: pino({ level: 'silent' }),
      registry,
      onOutcome: (log, _w, outcome) => outcomes.push({ log, outcome }),
      onAlarm: (a) => alarms.push(a),
    },
    term.signal,
  );
}

async function endTerm(): Promise<void> {
  term.abort();
  await witnessing;
}

async function appendAndPublish(namespace: string): Promise<void> {
  const added = await vault.attestations.append(runRecords(signer, namespace).records, {
    enqueueTransparency: true,
  });
  stored.push(...added);
  for (const r of added) await transparency.publisher.publishNow(r.id);
}

/** The served checkpoint, once it is of `size` and carries the witness's cosignature. */
async function cosignedCheckpoint(log: 'vault' | 'scitt', size?: number): Promise<string> {
  return waitFor(`a cosigned ${log} checkpoint${size === undefined ? '' : ` of ${size}`}`, async () => {
    const res = await app.inject({ url: `/v1/tlog/${log}/checkpoint`, headers: admin() });
    if (res.statusCode !== 200) return undefined;
    const note = parseNote(res.body);
    if (size !== undefined && !note.text.includes(`\n${size}\n`)) return undefined;
    return note.signatures.some((s) => s.name === witness.name) ? res.body : undefined;
  });
}

beforeAll(async () => {
  vault = await openVault(createVaultPool(await freshDatabase('witness')));
  signer = signerFromPem(await generateDevPki());
  noteKey = generateKeyPairSync('ed25519').privateKey;
  await createNamespace(nsA);
  await createNamespace(nsB);
  await bindUser('alice', 'aibom-vault-viewer', nsA);
  verifierToken = await serviceAccountToken(nsA, 'chain-verifier', 'aibom-vault-chain-verifier');
  witness = await testWitness([VAULT, SCITT], (o) => noteSigner(o).vkey);
  transparency = setupTransparency({
    vault,
    signer,
    caCertificates: signer.caCertificates,
    logSigner: signer,
    issuer: 'witness-test',
    backend: 'local',
    logger: pino({ level: 'silent' }),
  });
  await appendAndPublish(nsA);
  await appendAndPublish(nsA);
  await appendAndPublish(nsB);
  await makeCheckpoint(vault.checkpoints, { signer, caCertificates: signer.caCertificates });
  app = await stackApp(vault, signer.caCertificates);
  await app.listen({ host: '127.0.0.1', port: 0 });
  apiUrl = `http://127.0.0.1:${(app.server.address() as AddressInfo).port}`;
  publicApp = await stackApp(vault, signer.caCertificates, { tlogPublic: true });
  startTerm();
});

afterAll(async () => {
  await endTerm();
  await app?.close();
  await publicApp?.close();
  await witness?.stop();
  await vault?.close();
});

describe('checkpoints a real witness cosigns', () => {
  it('litewitness cosigns both logs; transparency-dev/formats verifies the cosignatures', async () => {
    const vaultCp = await cosignedCheckpoint('vault', 9);
    const scittCp = await cosignedCheckpoint('scitt');
    console.log(`GET /v1/tlog/vault/checkpoint (cosigned by litewitness):\n${vaultCp}`);
    for (const [origin, cp] of [
      [VAULT, vaultCp],
      [SCITT, scittCp],
    ] as const) {
      const r = await goCheck(
        'tlog-cosign-check',
        ['-log-key', noteSigner(origin).vkey, '-witness-key', witness.vkey],
        cp,
      );
      console.log(`tlog-cosign-check (transparency-dev/formats) on ${origin}:\n${r.stdout}${r.stderr}`);
      expect(r.code, r.stderr).toBe(0);
      expect(r.stdout).toContain(`cosignature/v1 of ${witness.name}`);
    }
    // The independent check fails a checkpoint whose root changed (the cosignature covers it).
    const lines = vaultCp.split('\n');
    lines[2] = Buffer.alloc(32, 7).toString('base64');
    const forged = await goCheck(
      'tlog-cosign-check',
      ['-log-key', noteSigner(VAULT).vkey, '-witness-key', witness.vkey],
      lines.join('\n'),
    );
    expect(forged.code).toBe(1);
    // The API's witness condition and the metrics say the same.
    const status = await app.inject({ url: '/v1/tlog/vault/witnesses', headers: admin() });
    expect(status.json()).toMatchObject({
      checkpoint: { origin: VAULT, tree_size: 9, cosigned_by: [witness.name] },
      witnesses: [
        {
          name: witness.name,
          cosigned_size: 9,
          conditions: [{ type: 'Consistent', status: 'True', reason: 'Cosigned' }],
        },
      ],
    });
    const metrics = await registry.getSingleMetricAsString('aibom_vault_tlog_witness_consistent');
    expect(metrics).toContain(`aibom_vault_tlog_witness_consistent{log="vault",witness="${witness.name}"} 1`);
    expect(alarms).toEqual([]);
    // GET /v1/keys names the note key of each log.
    const keys = (await app.inject({ url: '/v1/keys', headers: admin() })).json<{ note_keys: unknown[] }>();
    expect(keys.note_keys).toEqual(
      expect.arrayContaining([
        { log: 'vault', vkey: noteSigner(VAULT).vkey },
        { log: 'scitt', vkey: noteSigner(SCITT).vkey },
      ]),
    );
  });

  it('the witnesses route lists a configured witness that never answered: Unknown, NoAnswer', async () => {
    const silent = cosigner('silent.test/w', generateKeyPairSync('ed25519').privateKey).vkey;
    const listed = await stackApp(vault, signer.caCertificates, {
      tlogWitnesses: [
        { url: witness.url, vkey: witness.vkey },
        { url: 'http://127.0.0.1:9', vkey: silent },
      ],
    });
    try {
      const body = (await listed.inject({ url: '/v1/tlog/vault/witnesses', headers: admin() })).json<{
        witnesses: { name: string; conditions: { status: string; reason: string }[] }[];
      }>();
      expect(body.witnesses.map((w) => [w.name, w.conditions[0]!.status, w.conditions[0]!.reason])).toEqual([
        [witness.name, 'True', 'Cosigned'],
        ['silent.test/w', 'Unknown', 'NoAnswer'],
      ]);
    } finally {
      await listed.close();
    }
  });

  it('a new leader after a crash: 409 from the witness, sent again from its size, cosigned', async () => {
    await cosignedCheckpoint('vault', 9);
    await endTerm(); // the leader's term ends ...
    await appendAndPublish(nsA);
    const { checkpoint: twelve } = await makeCheckpoint(vault.checkpoints, {
      signer,
      caCertificates: signer.caCertificates,
    });
    // ... after it pushed the checkpoint of 12 and before it stored the cosignature (a crash).
    const tree12 = vaultLog(vault, VAULT);
    const lost = await pushCheckpoint({
      client: createWitnessClient({ url: witness.url, timeoutMs: 10_000 }),
      witness: parseWitnessVkey(witness.vkey),
      note: signCheckpoint({ origin: VAULT, treeSize: 12, rootHash: twelve!.rootHash }, noteSigner(VAULT)),
      treeSize: 12,
      knownSize: 9,
      consistencyProof: (m) => tree12.consistencyProof(m, 12),
    });
    expect(lost.kind).toBe('cosigned');
    await appendAndPublish(nsB);
    await makeCheckpoint(vault.checkpoints, { signer, caCertificates: signer.caCertificates });
    outcomes.length = 0;
    startTerm(); // the next leader believes the witness holds 9
    const cp = await cosignedCheckpoint('vault', 15);
    const vaultPushes = outcomes.filter((o) => o.log === 'vault').map((o) => o.outcome);
    console.log(
      `409 round trip: pushed 15 from old 9, witness answered 409 with ${vaultPushes[0]?.conflicts.join(',')}, ` +
        `sent again from old ${vaultPushes[0]?.oldSize}: ${vaultPushes[0]?.kind}\n${cp}`,
    );
    expect(vaultPushes).toEqual([
      expect.objectContaining({ kind: 'cosigned', oldSize: 12, conflicts: [12] }),
    ]);
    expect(alarms).toEqual([]);
  });
});

describe('the database keeps the notes to the stored trees', () => {
  it('refuses a note of a root the tree does not have, beyond the log, a second note of a size, and any change', async () => {
    const good = (await vault.tlog.checkpoint('vault', 9))!;
    const note = (rootHash: Buffer, treeSize = 9) => ({
      log: 'vault' as const,
      treeSize,
      rootHash,
      origin: VAULT,
      note: signCheckpoint({ origin: VAULT, treeSize, rootHash }, noteSigner(VAULT)),
      vkey: noteSigner(VAULT).vkey,
    });
    const refused = { code: '23001' };
    await expect(vault.tlog.addCheckpoint(note(Buffer.alloc(32, 1)))).rejects.toMatchObject(refused);
    // A size no vault checkpoint has.
    await expect(vault.tlog.addCheckpoint(note(good.rootHash, 10))).rejects.toMatchObject(refused);
    // The same size and root, another note (another key): not the stored one.
    const other = ed25519NoteSigner(VAULT, generateKeyPairSync('ed25519').privateKey);
    await expect(
      vault.tlog.addCheckpoint({
        ...note(good.rootHash),
        note: signCheckpoint({ origin: VAULT, treeSize: 9, rootHash: good.rootHash }, other),
      }),
    ).rejects.toMatchObject(refused);
    // The same note again: idempotent.
    await vault.tlog.addCheckpoint({ ...note(good.rootHash), note: good.note });
    // The SCITT log: beyond its head.
    const head = await vault.scittLog.head();
    await expect(
      vault.tlog.addCheckpoint({ ...note(head.root, head.size + 1), log: 'scitt', origin: SCITT }),
    ).rejects.toMatchObject(refused);
  });
});

describe('tiles an independent client reads', () => {
  it("torchwood's tile client verifies every exported record's inclusion against /checkpoint and the tiles", async () => {
    const cp = parseNote(await cosignedCheckpoint('vault', 15));
    expect(cp.text.split('\n')[1]).toBe('15');
    const records = (await vault.checkpoints.leaves(0, 15, 15)).filter((r) => r.namespace === nsA);
    const input = records
      .map((r) => `${r.seq - 1} ${leafEntry(leafFieldsOf(r)).toString('base64')}`)
      .join('\n');
    const ok = await goCheck(
      'tlog-tiles-check',
      [
        '-url',
        `${apiUrl}/v1/tlog/vault`,
        '-token',
        stack().kube.tokens.admin,
        '-log-key',
        noteSigner(VAULT).vkey,
      ],
      input,
    );
    console.log(`tlog-tiles-check (torchwood) on /v1/tlog/vault:\n${ok.stdout}${ok.stderr}`);
    expect(ok.code, ok.stderr).toBe(0);
    expect(ok.stdout).toContain(`OK ${records.length} entries verified`);
    // A record changed after the fact does not match what the tiles prove.
    const wrong = input.replace(
      /^(\d+) (\S+)/,
      (_m, i: string) => `${i} ${Buffer.from('{"tampered":true}').toString('base64')}`,
    );
    const bad = await goCheck(
      'tlog-tiles-check',
      [
        '-url',
        `${apiUrl}/v1/tlog/vault`,
        '-token',
        stack().kube.tokens.admin,
        '-log-key',
        noteSigner(VAULT).vkey,
      ],
      wrong,
    );
    expect(bad.code).toBe(1);
    // Another log key: the checkpoint is refused before any tile is read.
    const other = ed25519NoteSigner(VAULT, generateKeyPairSync('ed25519').privateKey);
    const refused = await goCheck(
      'tlog-tiles-check',
      ['-url', `${apiUrl}/v1/tlog/vault`, '-token', stack().kube.tokens.admin, '-log-key', other.vkey],
      input,
    );
    expect(refused.code).toBe(1);
  });

  it('the SCITT log: the same client verifies its entries, and the receipts prove the root the note states', async () => {
    const cp = parseNote(await cosignedCheckpoint('scitt'));
    const [, size, root] = cp.text.split('\n');
    const jobs = await Promise.all(
      stored.slice(0, 3).map((r) => vault.transparencyJobs.get({ attestationId: r.id })),
    );
    const entries = jobs.map((j) => {
      const statement = j!.statement!;
      return {
        index: j!.logIndex!,
        entry: sign1Entry(statement, decodeSign1(statement, 'MALFORMED_STATEMENT')),
      };
    });
    const ok = await goCheck(
      'tlog-tiles-check',
      [
        '-url',
        `${apiUrl}/v1/tlog/scitt`,
        '-token',
        stack().kube.tokens.admin,
        '-log-key',
        noteSigner(SCITT).vkey,
      ],
      entries.map((e) => `${e.index} ${e.entry.toString('base64')}`).join('\n'),
    );
    expect(ok.code, ok.stderr).toBe(0);
    // A fresh RFC 9942 receipt for the note's tree size proves the same root (RFC 9162 = RFC 6962).
    const job = jobs[0]!;
    const receipt = await transparency.log.receipt(job.entryId!, { treeSize: Number(size) });
    const verified = verifyReceipt({ receipt, statement: job.statement!, logKey: transparency.log.keys });
    expect(verified.ok).toBe(true);
    expect(verified.ok && verified.root.toString('base64')).toBe(root);
  });
});

describe('proofs in the bundle', () => {
  /** An export of nsA's records, written next to the stack, with the CA the CLI trusts. */
  async function exportA(name: string): Promise<{ bundle: string; ca: string }> {
    const exporting = await stackApp(vault, signer.caCertificates, { signer, transparency });
    try {
      const res = await exporting.inject({
        method: 'POST',
        url: '/v1/attestations/export',
        headers: admin(),
        payload: { namespaces: [nsA] },
      });
      expect(res.statusCode, res.body.slice(0, 300)).toBe(200);
      const bundle = join(stack().root, `${nsA}-${name}.tar`);
      const ca = join(stack().root, `${nsA}-ca.pem`);
      await writeFile(bundle, res.rawPayload);
      await writeFile(ca, signer.caCertificates.map((c) => c.toString()).join(''));
      return { bundle, ca };
    } finally {
      await exporting.close();
    }
  }

  it('every record carries a tlog-proof to the witnessed checkpoint; verify --witness accepts it', async () => {
    await cosignedCheckpoint('vault', 15);
    const { bundle, ca } = await exportA('witnessed');
    const r = await cliMain(
      'verify',
      bundle,
      '--trust-anchor',
      ca,
      '--witness',
      witness.vkey,
      '--tlog-key',
      noteSigner(VAULT).vkey,
    );
    console.log(`service-ctl verify --witness --tlog-key:\n${r.stdout}${r.stderr}`);
    expect(r.code, r.stdout + r.stderr).toBe(0);
    expect(r.stdout).toContain(`9 records with inclusion proofs to ${VAULT} size 15 (cosigned by w1)`);
  });

  it('records newer than the witnessed checkpoint: TLOG_PROOF_MISSING under a policy, fine without one', async () => {
    await appendAndPublish(nsA); // 3 records no checkpoint covers yet
    const { bundle, ca } = await exportA('newer');
    const policy = join(stack().root, `${nsA}-policy.txt`);
    await writeFile(
      policy,
      `# the vault log and its witness\nlog ${noteSigner(VAULT).vkey}\nwitness W ${witness.vkey}\nquorum W\n`,
    );
    const strict = await cliMain('verify', bundle, '--trust-anchor', ca, '--witness-policy', policy);
    const fails = strict.stdout.split('\n').filter((l) => l.startsWith('FAIL'));
    expect(strict.code).toBe(1);
    expect(fails).toHaveLength(3);
    for (const l of fails) expect(l).toMatch(/vault\.tlog-proof {2}TLOG_PROOF_MISSING/);
    expect(strict.stdout).toContain(`9 records with inclusion proofs to ${VAULT} size 15 (cosigned by W)`);
    const lenient = await cliMain('verify', bundle, '--trust-anchor', ca);
    expect(lenient.code, lenient.stdout).toBe(0);
    // Without a key from the caller, the bundle's own note keys check the log signature.
    expect(lenient.stdout).toContain('(no policy witness checked)');
  });

  it('bad witness flags are usage errors (exit 2)', async () => {
    const { bundle, ca } = await exportA('flags');
    const quorum = await cliMain(
      'verify',
      bundle,
      '--trust-anchor',
      ca,
      '--witness',
      witness.vkey,
      '--witness-quorum',
      '2',
    );
    expect([quorum.code, quorum.stderr]).toEqual([2, expect.stringMatching(/quorum must be 1…1/)]);
    const logKeyAsWitness = await cliMain(
      'verify',
      bundle,
      '--trust-anchor',
      ca,
      '--witness',
      noteSigner(VAULT).vkey,
    );
    expect([logKeyAsWitness.code, logKeyAsWitness.stderr]).toEqual([
      2,
      expect.stringMatching(/not a cosignature\/v1 witness key/),
    ]);
    const policy = join(stack().root, `${nsA}-bad-policy.txt`);
    await writeFile(policy, 'quorum nobody\n');
    const badPolicy = await cliMain('verify', bundle, '--trust-anchor', ca, '--witness-policy', policy);
    expect([badPolicy.code, badPolicy.stderr]).toEqual([2, expect.stringMatching(/unknown quorum nobody/)]);
  });
});

describe('who may read the tiles', () => {
  const get = (url: string, token?: string, target = app) =>
    target.inject({ url, headers: token === undefined ? {} : { authorization: `Bearer ${token}` } });

  it('without a token: 401; a namespace viewer without the chain role: 403', async () => {
    for (const url of [
      '/v1/tlog/vault/checkpoint',
      '/v1/tlog/vault/tile/0/000.p/15',
      '/v1/tlog/vault/tile/entries/000.p/15',
    ]) {
      expect((await get(url)).statusCode, url).toBe(401);
      expect((await get(url, stack().kube.tokens.alice)).statusCode, url).toBe(403);
    }
  });

  it('the chain verifier reads the checkpoint and hashes, not the entries (they name records)', async () => {
    const cp = await get('/v1/tlog/vault/checkpoint', verifierToken);
    expect(cp.statusCode).toBe(200);
    expect(cp.headers['content-type']).toBe('text/plain; charset=utf-8');
    expect(cp.headers['cache-control']).toBe('private, max-age=5');
    const tile = await get('/v1/tlog/vault/tile/0/000.p/15', verifierToken);
    expect(tile.statusCode).toBe(200);
    expect(tile.rawPayload).toHaveLength(15 * 32);
    expect(tile.headers['cache-control']).toBe('private, max-age=31536000, immutable');
    const hashes = (
      await vault.checkpoints.nodes(Array.from({ length: 15 }, (_, i) => ({ level: 0, index: i })))
    )
      .sort((a, b) => a.index - b.index)
      .map((n) => n.hash);
    expect(tile.rawPayload.equals(Buffer.concat(hashes))).toBe(true);
    const entries = await get('/v1/tlog/vault/tile/entries/000.p/15', verifierToken);
    expect(entries.statusCode).toBe(403);
    expect(entries.body).not.toContain(nsA);
  });

  it("entries need get on attestations in every namespace of the bundle: alice's namespace alone is not enough", async () => {
    // The chain role cluster-wide, and the viewer role in nsA only.
    const aliceChain = await serviceAccountToken(nsA, 'alice-like', 'aibom-vault-chain-verifier');
    await bindServiceAccountViewer(nsA, 'alice-like');
    const mixed = await get('/v1/tlog/vault/tile/entries/000.p/15', aliceChain);
    expect(mixed.statusCode).toBe(403);
    expect(mixed.body).not.toContain(nsB);
    // The first six records are all nsA's: that bundle is hers to read.
    const own = await get('/v1/tlog/vault/tile/entries/000.p/6', aliceChain);
    expect(own.statusCode).toBe(200);
    expect(
      decodeEntryBundle(own.rawPayload).map(
        (e) => (JSON.parse(e.toString()) as { namespace: string }).namespace,
      ),
    ).toEqual(Array.from({ length: 6 }, () => nsA));
    const full = await get('/v1/tlog/vault/tile/entries/000.p/15', stack().kube.tokens.admin);
    expect(full.statusCode).toBe(200);
    const bundle = decodeEntryBundle(full.rawPayload);
    expect(bundle).toHaveLength(15);
    expect(JSON.parse(bundle[0]!.toString())).toMatchObject({ seq: 1, namespace: nsA });
    const gz = await app.inject({
      url: '/v1/tlog/vault/tile/entries/000.p/15',
      headers: { ...admin(), 'accept-encoding': 'gzip' },
    });
    expect(gz.headers['content-encoding']).toBe('gzip');
  });

  it('TLOG_PUBLIC=1: checkpoint and hash tiles for anyone (public caching), entries still need a token', async () => {
    const cp = await get('/v1/tlog/vault/checkpoint', undefined, publicApp);
    expect(cp.statusCode).toBe(200);
    expect(cp.headers['cache-control']).toBe('public, max-age=5');
    const tile = await get('/v1/tlog/scitt/tile/0/000.p/1', undefined, publicApp);
    expect(tile.statusCode).toBe(200);
    expect(tile.headers['cache-control']).toBe('public, max-age=31536000, immutable');
    expect((await get('/v1/tlog/vault/tile/entries/000.p/15', undefined, publicApp)).statusCode).toBe(401);
  });

  it('bad paths: 400; tiles beyond the checkpoint: 404', async () => {
    expect((await get('/v1/tlog/vault/tile/0/x000/001', stack().kube.tokens.admin)).statusCode).toBe(400);
    expect((await get('/v1/tlog/vault/tile/0/000.p/0', stack().kube.tokens.admin)).statusCode).toBe(400);
    expect((await get('/v1/tlog/other/checkpoint', stack().kube.tokens.admin)).statusCode).toBe(400);
    expect((await get('/v1/tlog/vault/tile/0/000', stack().kube.tokens.admin)).statusCode).toBe(404);
    expect((await get('/v1/tlog/vault/tile/0/000.p/16', stack().kube.tokens.admin)).statusCode).toBe(404);
    expect((await get('/v1/tlog/vault/tile/1/000.p/1', stack().kube.tokens.admin)).statusCode).toBe(404);
  });
});

/** `aibom-vault-viewer` in `ns` for a ServiceAccount of `ns`. */
async function bindServiceAccountViewer(ns: string, name: string): Promise<void> {
  await kubeConfig('admin')
    .makeApiClient(RbacAuthorizationV1Api)
    .createNamespacedRoleBinding({
      namespace: ns,
      body: {
        metadata: { name: `${name}-viewer` },
        roleRef: { apiGroup: 'rbac.authorization.k8s.io', kind: 'ClusterRole', name: 'aibom-vault-viewer' },
        subjects: [{ kind: 'ServiceAccount', name, namespace: ns }],
      },
    });
}
