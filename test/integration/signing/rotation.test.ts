import { X509Certificate } from 'node:crypto';
import { mkdtemp, readFile, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { CoreV1Api } from '@kubernetes/client-node';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { driveRun } from '../../../hack/sample-pipeline.ts';
import type { Run } from '../../../src/api/run.ts';
import { verifyRecord } from '../../../src/attest/index.ts';
import { verifyManifest } from '../../../src/c2pa/index.ts';
import type { AibomMetadata } from '../../../src/recorder/index.ts';
import { parseCertificates, resolveSignerCertificate, signerFromPem } from '../../../src/signing/index.ts';
import {
  createVaultPool,
  openVault,
  type SignerCertificate,
  type StoredAttestation,
  type Vault,
} from '../../../src/vault/index.ts';
import { stackBlobs } from '../../helpers/blobs.ts';
import {
  aibomReady,
  createRun,
  sampleRunSpec,
  startControllerProcess,
  stopAllControllers,
  waitForCondition,
  type ControllerProcess,
} from '../../helpers/controller-process.ts';
import { generateDevPki, toSecretData, type DevPki } from '../../helpers/pki.ts';
import { freshDatabase, kubeConfig, stack, uniqueName } from '../../helpers/stack.ts';

/**
 * Done-when of issue 15 (rotation): the signer Secret is rotated to a new key (and a new CA), as
 * cert-manager would rewrite it, while the real controller process reconciles Runs. No reconcile
 * fails, Runs that start after the rotation are recorded with the new key, and every record of
 * both keys verifies against the certificate its `cert_chain_ref` names in the vault's signer
 * history (after the export branch: through the key-distribution endpoint).
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
}, 600_000);

afterAll(async () => {
  await stopAllControllers();
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

  it('every record of both keys verifies against the certificate its cert_chain_ref names in the signer history', async () => {
    const history: SignerCertificate[] = (await vault.signers.list([''])).filter((c) => c.role === 'signer');
    expect(history.map((c) => c.keyId)).toEqual([keyIdOf(before), keyIdOf(after)]);
    let verified = 0;
    for (const run of done) {
      for (const r of await recordsOf(run)) {
        const resolved = resolveSignerCertificate(
          history,
          { keyId: r.signature.key_id, certChainRef: r.signature.cert_chain_ref! },
          r.createdAt,
        );
        expect(resolved.ok, JSON.stringify(resolved)).toBe(true);
        if (!resolved.ok) continue;
        const result = verifyRecord(r, {
          certificateChain: parseCertificates(resolved.certificate.chainPem, 'chain'),
          trustAnchors: parseCertificates(resolved.certificate.caPem, 'ca'),
          at: r.createdAt,
        });
        expect(result.problems, r.id).toEqual([]);
        verified++;
      }
    }
    expect(verified).toBeGreaterThan((runsBefore.length + runsAfter.length) * 4);
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
