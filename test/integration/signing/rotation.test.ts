import { X509Certificate } from 'node:crypto';
import { mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { CoreV1Api } from '@kubernetes/client-node';
import type { AddressInfo } from 'node:net';
import { execFile } from 'node:child_process';
import { promisify } from 'node:util';
import type { FastifyInstance } from 'fastify';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { repoRoot } from '../../../hack/stack/stack.ts';
import { driveRun } from '../../../hack/sample-pipeline.ts';
import type { Run } from '../../../src/crd/run.ts';
import { verifyRecord } from '../../../src/attest/index.ts';
import { verifyManifest } from '../../../src/c2pa/index.ts';
import type { AibomMetadata } from '../../../src/recorder/index.ts';
import {
  parseCertificates,
  resolveSignerCertificate,
  signedAtOf,
  signerFromPem,
} from '../../../src/signing/index.ts';
import { createVaultPool, openVault, type StoredAttestation, type Vault } from '../../../src/vault/index.ts';
import { stackApp } from '../../helpers/app.ts';
import { stackBlobs } from '../../helpers/blobs.ts';
import {
  aibomReady,
  createRun,
  poll,
  sampleRunSpec,
  startControllerProcess,
  stopAllControllers,
  waitForCondition,
  type ControllerProcess,
} from '../../helpers/controller-process.ts';
import { generateDevPki, toSecretData, type DevPki } from '../../helpers/pki.ts';
import { bindUser } from '../../helpers/rbac.ts';
import { freshDatabase, kubeConfig, stack, uniqueName } from '../../helpers/stack.ts';

/**
 * Done-when of issue 15 (rotation): the signer Secret is rotated to a new key (and a new CA), as
 * cert-manager would rewrite it, while the real controller process reconciles Runs. No reconcile
 * fails, Runs that start after the rotation are recorded with the new key, and every record of
 * both keys verifies through the key-distribution endpoint: a tenant who may only get/list
 * attestations resolves each record's `cert_chain_ref` with GET /v1/keys/{ref}, checks it against
 * the signer history GET /v1/keys serves (no key rotated away before the record), and verifies the
 * record with the chain and CAs the endpoint returned, at the record's RFC 3161 time-stamp (the
 * controller's stamper time-stamps the records of both keys); `service-ctl keys fetch` +
 * `service-ctl verify --trust-bundle` do the same offline.
 */
let dir: string;
let namespace: string;
let controller: ControllerProcess;
let vault: Vault;
let before: DevPki;
let after: DevPki;
const runsBefore = ['rot-a', 'rot-b', 'rot-c', 'rot-d'];
const runsAfter = ['rot-e', 'rot-f', 'rot-g'];
let done: Run[];
let app: FastifyInstance;
let tsaCa: X509Certificate;

const SIGNER = 'operator-test-signer';
const core = () => kubeConfig('admin').makeApiClient(CoreV1Api);
const keyIdOf = (pki: DevPki) => signerFromPem(pki).keyId;

beforeAll(async () => {
  dir = await mkdtemp(join(tmpdir(), 'rotation-'));
  namespace = uniqueName('rotation');
  [before, after] = await Promise.all([generateDevPki(), generateDevPki({ caCommonName: 'renewed CA' })]);
  await core().createNamespace({ body: { metadata: { name: namespace } } });
  await core().createNamespacedSecret({
    namespace,
    body: { metadata: { name: SIGNER }, type: 'kubernetes.io/tls', data: toSecretData(before) },
  });
  const databaseUrl = await freshDatabase('rotation');
  const lease = uniqueName('rotation');
  controller = await startControllerProcess({
    name: lease,
    databaseUrl,
    watchNamespace: namespace,
    lease,
    signerSecret: `${namespace}/${SIGNER}`,
    logDir: dir,
    env: { TSA_URL: stack().env.TSA_URL!, TSA_TRUST_ANCHORS: stack().env.TSA_TRUST_ANCHORS! },
  });
  await controller.waitLeading({ timeoutMs: 90_000 });
  const spec = await sampleRunSpec();
  const pipeline = kubeConfig('admin');

  // Four Runs move through their steps; the Secret is rewritten while they do.
  await Promise.all(runsBefore.map((n) => createRun(namespace, n, spec)));
  const driving = runsBefore.map((n, i) => driveRun(pipeline, namespace, n, { stepDelayMs: 300 + 150 * i }));
  await controller.waitForLog((l) => l.msg === 'AIBOM recorded', 'a first AIBOM', { timeoutMs: 120_000 });
  await core().replaceNamespacedSecret({
    namespace,
    name: SIGNER,
    body: { metadata: { name: SIGNER }, type: 'kubernetes.io/tls', data: toSecretData(after) },
  });
  await controller.waitForLog((l) => l.msg === 'signer rotated to a new key', 'the rotation', {
    timeoutMs: 60_000,
  });
  // Runs that start after the controller saw the rotation.
  await Promise.all(runsAfter.map((n) => createRun(namespace, n, spec)));
  driving.push(...runsAfter.map((n) => driveRun(pipeline, namespace, n, { stepDelayMs: 100 })));
  await Promise.all(driving);
  done = await Promise.all(
    [...runsBefore, ...runsAfter].map((n) =>
      waitForCondition(namespace, n, 'AIBOMReady', aibomReady, `${n} AIBOM`),
    ),
  );
  vault = await openVault(createVaultPool(databaseUrl));
  // The records of both keys are time-stamped by the controller's stamper (ADR 0015).
  const ids = (
    await Promise.all(done.map((r) => vault.attestations.ofRun(namespace, r.metadata.uid)))
  ).flat();
  await poll(async () => {
    const got = await vault.attestations.getMany(ids.map((r) => r.id));
    return ids.every((r) => got.get(r.id)?.timestamp !== undefined);
  }, 'a time-stamp on every record');
  // The API a tenant talks to: alice may get/list attestations in the namespace, nothing else.
  tsaCa = new X509Certificate(await readFile(stack().env.TSA_TRUST_ANCHORS!));
  app = await stackApp(vault, [new X509Certificate(before['ca.crt'])], { tsaTrustAnchors: [tsaCa] });
  await app.listen({ host: '127.0.0.1', port: 0 });
  await bindUser('alice', 'aibom-vault-viewer', namespace);
}, 600_000);

afterAll(async () => {
  await stopAllControllers();
  await app?.close();
  await vault?.close();
  await core()
    .deleteNamespace({ name: namespace })
    .catch(() => undefined);
  await rm(dir, { recursive: true, force: true });
});

async function recordsOf(run: Run): Promise<StoredAttestation[]> {
  const summaries = await vault.attestations.ofRun(namespace, run.metadata.uid);
  return Promise.all(summaries.map(async (s) => (await vault.attestations.get(s.id))!));
}

describe('signer Secret rotated while Runs are reconciled', () => {
  it('no reconcile failed, and the controller kept running on one process', async () => {
    const logs = await controller.logs();
    expect(logs.filter((l) => /reconcile failed/.test(l.msg)).map((l) => l.msg)).toEqual([]);
    expect(controller.alive).toBe(true);
    expect(logs.filter((l) => l.msg === 'signer rotated to a new key')).toHaveLength(1);
  });

  it('Runs started after the rotation are recorded with the new key only; records of both keys exist', async () => {
    const newKey = keyIdOf(after);
    const oldKey = keyIdOf(before);
    const seen = new Set<string>();
    for (const run of done) {
      const records = await recordsOf(run);
      const meta = run.status!.artifacts!.aibom as AibomMetadata;
      for (const r of records) seen.add(r.signature.key_id);
      if (runsAfter.includes(run.metadata.name)) {
        expect(new Set(records.map((r) => r.signature.key_id)), run.metadata.name).toEqual(new Set([newKey]));
        expect(meta.signature.key_id).toBe(newKey);
      }
    }
    expect(seen).toEqual(new Set([oldKey, newKey]));
  });

  it('every record of both keys verifies through the key-distribution endpoint, as a tenant with only get/list', async () => {
    const alice = { authorization: `Bearer ${stack().kube.tokens.alice}` };
    const get = async <T>(url: string, accept?: string) => {
      const res = await app.inject({ url, headers: { ...alice, ...(accept ? { accept } : {}) } });
      expect(res.statusCode, `${url}: ${res.body}`).toBe(200);
      return (accept === undefined ? res.json() : res.body) as T;
    };
    // The signer history the endpoint serves: both keys, in the order they were first used.
    type Entry = {
      cert_chain_ref: string;
      key_id: string;
      chain_pem: string;
      ca_pem: string;
      first_used_at: string;
    };
    const bundle = await get<{ signers: (Entry & { namespace: string; role: string })[] }>('/v1/keys');
    const history = bundle.signers
      .filter((e) => e.namespace === '' && e.role === 'signer')
      .map((e) => ({ certRef: e.cert_chain_ref, keyId: e.key_id, firstUsedAt: new Date(e.first_used_at) }));
    expect(history.map((c) => c.keyId)).toEqual([keyIdOf(before), keyIdOf(after)]);
    const anchors = parseCertificates(
      await get<string>('/v1/keys/ca.pem', 'application/x-pem-file'),
      'ca.pem',
    );
    // Both CAs: the renewed Secret brought a new one, and the old one still anchors its records.
    expect(anchors.length).toBeGreaterThanOrEqual(2);
    let verified = 0;
    const keys = new Set<string>();
    for (const run of done) {
      for (const id of (await vault.attestations.ofRun(namespace, run.metadata.uid)).map((r) => r.id)) {
        const record = await get<{
          created_at: string;
          signature: { key_id: string; cert_chain_ref: string; timestamp?: { time: string } };
        }>(`/v1/attestations/${id}`);
        const { key_id: keyId, cert_chain_ref: ref } = record.signature;
        const { items } = await get<{ items: Entry[] }>(`/v1/keys/${ref}`);
        expect(items.map((e) => e.cert_chain_ref)).toEqual([ref]);
        const signedAt = signedAtOf(
          new Date(record.created_at),
          record.signature.timestamp ? new Date(record.signature.timestamp.time) : undefined,
        );
        const resolved = resolveSignerCertificate(history, { keyId, certChainRef: ref }, signedAt);
        expect(resolved, id).toMatchObject({ ok: true });
        const result = verifyRecord(record, {
          certificateChain: parseCertificates(items[0]!.chain_pem, 'chain_pem'),
          trustAnchors: [...anchors, ...parseCertificates(items[0]!.ca_pem, 'ca_pem')],
          tsaTrustAnchors: [tsaCa],
        });
        expect(result.problems, id).toEqual([]);
        // Judged at the record's own time-stamp, whichever key signed it.
        expect(result.timestamp?.trusted, id).toBe(true);
        keys.add(keyId);
        verified++;
      }
    }
    expect(keys).toEqual(new Set([keyIdOf(before), keyIdOf(after)]));
    expect(verified).toBeGreaterThan((runsBefore.length + runsAfter.length) * 4);
  });

  it('service-ctl keys fetch + verify --trust-bundle: every record of the namespace, both keys, as the tenant', async () => {
    const url = `http://127.0.0.1:${(app.server.address() as AddressInfo).port}`;
    const env: NodeJS.ProcessEnv = {
      ...process.env,
      SERVICE_API_URL: url,
      SERVICE_TOKEN: stack().kube.tokens.alice,
    };
    delete env.TSA_TRUST_ANCHORS;
    const cli = (args: string[]) =>
      promisify(execFile)(process.execPath, [join(repoRoot, 'src/bin/service-ctl.ts'), ...args], {
        env,
        maxBuffer: 64 * 1024 * 1024,
      }).then(
        (r) => ({ code: 0, out: r.stdout + r.stderr }),
        (e: { code?: number; stdout?: string; stderr?: string }) => ({
          code: e.code ?? -1,
          out: `${e.stdout ?? ''}${e.stderr ?? ''}`,
        }),
      );
    const trust = join(dir, 'trust');
    expect(await cli(['keys', 'fetch', '--out', trust])).toMatchObject({ code: 0 });
    const res = await app.inject({
      method: 'POST',
      url: '/v1/attestations/query',
      headers: { authorization: `Bearer ${stack().kube.tokens.alice}`, accept: 'application/x-ndjson' },
      payload: { namespaces: [namespace] },
    });
    expect(res.statusCode).toBe(200);
    const ndjson = join(dir, 'records.ndjson');
    await writeFile(ndjson, res.body);
    const total = res.body.split('\n').filter((l) => l.startsWith('{"id"')).length;
    const ok = await cli(['verify', ndjson, '--trust-bundle', join(trust, 'trust-bundle.json')]);
    expect(ok.out).toContain(`${total} verified, 0 failed`);
    expect(ok.code).toBe(0);
    expect(ok.out.split('\n').filter((l) => l.includes('the time of its RFC 3161 time-stamp'))).toHaveLength(
      total,
    );
  });

  it("every AIBOM's C2PA manifest verifies with both CAs as anchors, each time-stamped", async () => {
    const tsa = [new X509Certificate(await readFile(stack().env.TSA_TRUST_ANCHORS!))];
    const blobs = stackBlobs();
    for (const run of done) {
      const meta = run.status!.artifacts!.aibom as AibomMetadata;
      const [asset, store] = await Promise.all([blobs.get(meta.key), blobs.get(meta.c2pa_manifest.key)]);
      const result = verifyManifest({
        store: store!,
        asset: asset!,
        trustAnchors: before['ca.crt'] + after['ca.crt'],
        tsaTrustAnchors: tsa,
      });
      expect(result.problems, run.metadata.name).toEqual([]);
      expect(result.signerKeyId).toBe(meta.signature.key_id);
      expect(result.timestamp?.trusted).toBe(true);
    }
  });
});
