/**
 * A converged Run costs nothing: once a Run's records, AIBOM, Attestation resources, status and
 * transparency state are in place, reconciling it again (the Run reconciler after an unrelated
 * update, the transparency projection after a job notification) makes ZERO writes: no request to
 * the real kube-apiserver but reads, and no SQL write to the real PostgreSQL.
 *
 * Counted at the seams the controller is given: its KubeClient (every request, by verb and
 * resource; the leader election's Lease traffic is reported apart) and its vault's pool (every
 * statement, on the pool and on checked-out clients, classified by its SQL text).
 */
import { CustomObjectsApi } from '@kubernetes/client-node';
import pg from 'pg';
import { pino } from 'pino';
import { Registry } from 'prom-client';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { driveRun } from '../../../hack/sample-pipeline.ts';
import type { Run } from '../../../src/crd/run.ts';
import type { RunningController } from '../../../src/controller/manager.ts';
import { startTestController } from '../../helpers/controller.ts';
import { kubeClient } from '../../../src/kube/index.ts';
import { signerFromPem, type KeySigner } from '../../../src/signing/index.ts';
import { setupTransparency } from '../../../src/transparency/setup.ts';
import { migrate, openVault, type Vault } from '../../../src/vault/index.ts';
import { metricValue, sampleRunSpec } from '../../helpers/controller-process.ts';
import {
  countingPool,
  CountingClient,
  isIdle,
  reconciles as reconcileCount,
  settled as settledIn,
} from '../../helpers/counting-client.ts';
import { generateDevPki } from '../../helpers/pki.ts';
import { createNamespace } from '../../helpers/rbac.ts';
import { freshDatabase, kubeConfig, kubeAccess, uniqueName } from '../../helpers/stack.ts';
import { waitFor } from '../../helpers/wait.ts';
import { WRITE_SQL } from '../../helpers/write-sql.ts';

const GROUP = 'vault.service.dev';
const ns = uniqueName('converged');

const sqlWrites = (statements: readonly string[]): string[] => statements.filter((s) => WRITE_SQL.test(s));

let vault: Vault;
let statements: string[];
let signer: KeySigner;
let client: CountingClient;
let registry: Registry;
let controller: RunningController;
let admin: pg.Pool;

const crs = () => kubeConfig('admin').makeApiClient(CustomObjectsApi);
const getRun = async (name: string) =>
  (await crs().getNamespacedCustomObject({
    group: GROUP,
    version: 'v1',
    namespace: ns,
    plural: 'runs',
    name,
  })) as Run;

const metric = async (name: string, labels: Record<string, string>) =>
  metricValue(await registry.metrics(), name, labels);

const CONTROLLERS = ['runs', 'transparency'];

/** Both controllers idle: nothing queued, nothing being reconciled. */
async function idle(): Promise<void> {
  if (!(await isIdle(registry, CONTROLLERS))) throw new Error('a controller is busy');
}

const reconciles = (controllerName: string): Promise<number> => reconcileCount(registry, controllerName);

/** Waits until `controllerName` reconciled at least once more than `before` and both are idle again. */
const settled = (controllerName: string, before: number): Promise<void> =>
  settledIn(registry, controllerName, before, CONTROLLERS);

beforeAll(async () => {
  const url = await freshDatabase('converged');
  await migrate(url);
  const counting = countingPool(url);
  statements = counting.statements;
  vault = await openVault(counting.pool);
  admin = new pg.Pool({ connectionString: url, max: 1 });
  signer = signerFromPem(await generateDevPki());
  await createNamespace(ns);
  client = new CountingClient(kubeClient(kubeAccess('aibom-vault')));
  registry = new Registry();
  const quiet = pino({ level: 'silent' });
  controller = startTestController({
    client,
    vault,
    signer,
    registry,
    leasePrefix: 'converged',
    watchNamespace: ns,
    // SERVICE_TRANSPARENCY_WRITER=1 with the local log: the projection controller runs too.
    transparency: setupTransparency({
      vault,
      signer,
      caCertificates: signer.caCertificates,
      logSigner: signer,
      issuer: 'urn:test:converged',
      backend: 'local',
      logger: quiet,
    }),
  });
});

afterAll(async () => {
  await controller?.stop();
  await vault?.close();
  await admin?.end();
});

describe('a converged Run', () => {
  let run: Run;

  beforeAll(async () => {
    await crs().createNamespacedCustomObject({
      group: GROUP,
      version: 'v1',
      namespace: ns,
      plural: 'runs',
      body: {
        apiVersion: `${GROUP}/v1`,
        kind: 'Run',
        metadata: { name: 'quiet' },
        spec: await sampleRunSpec(),
      },
    });
    await driveRun(kubeConfig('admin'), ns, 'quiet', { stepDelayMs: 20 });
    // Converged: the AIBOM recorded, every record published and projected, both controllers idle.
    run = await waitFor('the Run converged', async () => {
      const r = await getRun('quiet');
      const ready = r.status?.conditions?.some((c) => c.type === 'AIBOMReady' && c.status === 'True');
      const aibom = r.status?.artifacts?.aibom as { transparency?: { status?: string } } | undefined;
      if (
        !ready ||
        r.status?.transparency?.state !== 'published' ||
        aibom?.transparency?.status !== 'published'
      )
        return undefined;
      if (r.status.transparency.published !== r.status.attestations?.count) return undefined;
      try {
        await idle();
      } catch {
        return undefined;
      }
      return r;
    });
  }, 180_000);

  it('is reconciled again after an unrelated update with zero writes to the API server and PostgreSQL', async () => {
    const before = await reconciles('runs');
    client.reset();
    statements.length = 0;
    // A label: a real update event for the Run (no generation change), so the reconciler runs.
    await crs().patchNamespacedCustomObject({
      group: GROUP,
      version: 'v1',
      namespace: ns,
      plural: 'runs',
      name: 'quiet',
      body: [{ op: 'add', path: '/metadata/labels', value: { touched: 'yes' } }],
    });
    await settled('runs', before);
    expect(await metric('controller_runtime_reconcile_errors_total', { controller: 'runs' })).toBe(0);
    expect(client.writes()).toEqual({});
    expect(sqlWrites(statements)).toEqual([]);
    // It did look: the vault was read (the gather), the cache answered for Kubernetes.
    expect(statements.length).toBeGreaterThan(0);
    expect(client.counts.get('GET runs') ?? 0).toBe(0);
    const after = await getRun('quiet');
    expect(after.status).toEqual(run.status);
  });

  it('a job notification for the converged Run makes the projection look, and write nothing', async () => {
    const before = await reconciles('transparency');
    client.reset();
    statements.length = 0;
    // What a worker in any replica sends when a job of this run changes (here: nothing changed).
    await admin.query(`SELECT pg_notify('aibom_vault_transparency', $1)`, [run.metadata.uid]);
    await settled('transparency', before);
    expect(await metric('controller_runtime_reconcile_errors_total', { controller: 'transparency' })).toBe(0);
    expect(client.writes()).toEqual({});
    expect(sqlWrites(statements)).toEqual([]);
    expect(client.counts.get('LIST attestations')).toBe(1);
  });

  it('counts writes when there are some (the counters are live)', async () => {
    const before = await reconciles('runs');
    client.reset();
    statements.length = 0;
    // The Run's status loses a field the reconciler owns: it must write it back.
    await crs().patchNamespacedCustomObjectStatus({
      group: GROUP,
      version: 'v1',
      namespace: ns,
      plural: 'runs',
      name: 'quiet',
      body: [{ op: 'remove', path: '/status/attestations/runAttestationId' }],
    });
    await settled('runs', before);
    expect(client.writes()).toEqual({ 'PATCH runs/status': 1 });
    expect((await getRun('quiet')).status?.attestations).toEqual(run.status?.attestations);
  });
});
