import { createServer, type Server } from 'node:http';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { CoreV1Api } from '@kubernetes/client-node';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { driveRun } from '../../../hack/sample-pipeline.ts';
import { freePort } from '../../../hack/stack/proc.ts';
import type { AibomMetadata } from '../../../src/recorder/index.ts';
import { createVaultPool, openVault, type Vault } from '../../../src/vault/index.ts';
import {
  aibomReady,
  conditionOf,
  createRun,
  customObjects,
  poll,
  sampleRunSpec,
  startControllerProcess,
  stopAllControllers,
  waitForCondition,
  type ControllerProcess,
} from '../../helpers/controller-process.ts';
import { generateDevPki, toSecretData } from '../../helpers/pki.ts';
import { freshDatabase, kubeConfig, stack, uniqueName } from '../../helpers/stack.ts';

/**
 * The TSA is down (docs/adr/0014-tsa-down.md): the AIBOM waits, with reason TimestampUnavailable,
 * and is retried until the TSA answers (then it is time-stamped); the Run's other records are not
 * held up and nothing is lost. A Run being deleted is not held by the TSA: its AIBOM is recorded
 * without a time-stamp and the finalizer goes.
 */
let dir: string;
let namespace: string;
let controller: ControllerProcess;
let vault: Vault;
let tsaPort: number;
let proxy: Server | undefined;

/** A forwarder to the stack's real TSA, on the port the controller was told (TSA_URL). */
async function tsaUp(): Promise<void> {
  const upstream = stack().env.TSA_URL!;
  proxy = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
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
  await new Promise<void>((r) => proxy!.listen(tsaPort, '127.0.0.1', r));
}

beforeAll(async () => {
  dir = await mkdtemp(join(tmpdir(), 'tsa-down-'));
  namespace = uniqueName('tsa-down');
  const core = kubeConfig('admin').makeApiClient(CoreV1Api);
  await core.createNamespace({ body: { metadata: { name: namespace } } });
  await core.createNamespacedSecret({
    namespace,
    body: {
      metadata: { name: 'operator-test-signer' },
      type: 'kubernetes.io/tls',
      data: toSecretData(await generateDevPki()),
    },
  });
  const databaseUrl = await freshDatabase('tsadown');
  tsaPort = await freePort();
  const lease = uniqueName('tsa-down');
  controller = await startControllerProcess({
    name: lease,
    databaseUrl,
    watchNamespace: namespace,
    lease,
    signerSecret: `${namespace}/operator-test-signer`,
    logDir: dir,
    env: {
      // Nothing listens there until tsaUp().
      TSA_URL: `http://127.0.0.1:${tsaPort}/api/v1/timestamp`,
      TSA_TRUST_ANCHORS: stack().env.TSA_TRUST_ANCHORS!,
      TSA_DEADLINE_MS: '1000',
    },
  });
  await controller.waitLeading({ timeoutMs: 90_000 });
  vault = await openVault(createVaultPool(databaseUrl));
});

afterAll(async () => {
  await stopAllControllers();
  await new Promise((r) => (proxy ? proxy.close(r) : r(undefined)));
  await vault?.close();
  await rm(dir, { recursive: true, force: true });
});

describe('the TSA is down', () => {
  it('a Run being deleted is not held: its AIBOM is recorded without a time-stamp and the finalizer goes', async () => {
    await createRun(namespace, 'deleted', await sampleRunSpec());
    await driveRun(kubeConfig('admin'), namespace, 'deleted');
    const waiting = await waitForCondition(
      namespace,
      'deleted',
      'AIBOMReady',
      (c) => c?.reason === 'TimestampUnavailable',
      'the AIBOM waiting for the TSA',
    );
    const runId = waiting.metadata.uid;
    await customObjects().deleteNamespacedCustomObject({
      group: 'vault.service.dev',
      version: 'v1',
      namespace,
      plural: 'runs',
      name: 'deleted',
    });
    await poll(
      async () =>
        customObjects()
          .getNamespacedCustomObject({
            group: 'vault.service.dev',
            version: 'v1',
            namespace,
            plural: 'runs',
            name: 'deleted',
          })
          .then(
            () => false,
            () => true,
          ),
      'the deleted Run to be gone',
    );
    const record = await vault.artifacts.get(runId, 'aibom');
    const meta = record!.metadata as unknown as AibomMetadata;
    expect(meta.signature.signature.length).toBeGreaterThan(0);
    expect(meta.signature.timestamp).toBeUndefined();
    expect(meta.c2pa_manifest.timestamp).toBeUndefined();
    await controller.waitForLog(
      (l) => l.msg === 'AIBOM recorded WITHOUT a time-stamp: the TSA failed while the Run is being deleted',
      'the warning',
    );
  });

  it('otherwise the AIBOM waits (TimestampUnavailable), the steps are recorded, and it is time-stamped once the TSA is back', async () => {
    await createRun(namespace, 'waits', await sampleRunSpec());
    await driveRun(kubeConfig('admin'), namespace, 'waits');
    const waiting = await waitForCondition(
      namespace,
      'waits',
      'AIBOMReady',
      (c) => c?.status === 'False' && c.reason === 'TimestampUnavailable',
      'the AIBOM waiting for the TSA',
    );
    expect(conditionOf(waiting, 'Attested')?.status).toBe('True');
    const runId = waiting.metadata.uid;
    // Every step, the policy and the run provenance are in the vault; only the AIBOM waits.
    const records = await vault.attestations.ofRun(namespace, runId);
    expect(records.length).toBeGreaterThan(3);
    expect(await vault.artifacts.get(runId, 'aibom')).toBeNull();

    await tsaUp();
    const ready = await waitForCondition(namespace, 'waits', 'AIBOMReady', aibomReady, 'the AIBOM');
    const meta = ready.status!.artifacts!.aibom as AibomMetadata;
    expect(meta.signature.timestamp?.tsa).toContain('time-stamping authority');
    expect(meta.c2pa_manifest.timestamp?.time).toBeDefined();
    // Nothing recorded twice, nothing lost: the records made while waiting plus the AIBOM's
    // batch: its record, its two standard views' records and its blob's artifact record (issue 22
    // item 6, docs/aibom.md "Standard views").
    const after = await vault.attestations.ofRun(namespace, runId);
    expect(after.map((r) => r.id).slice(0, records.length)).toEqual(records.map((r) => r.id));
    expect(after.length).toBe(records.length + 4);
    expect(after.slice(records.length).map((r) => r.kind)).toEqual([
      'aibom',
      'artifact',
      'artifact',
      'artifact',
    ]);
  });
});
