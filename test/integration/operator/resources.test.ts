/**
 * Kubernetes holds projections, the vault holds evidence (docs/runs.md "Attestation resources"):
 * against the real kube-apiserver + etcd, PostgreSQL and MinIO, one namespace's Runs under a
 * controller restarted with each ATTESTATION_RESOURCES mode and then a retention.
 *
 * - perRecord: one Attestation resource per vault record of the Run, nothing on the status.
 * - perRun: exactly one, the Run's provenance record's, whose status counts every record (and
 *   `kubectl get attestations` shows that count); Runs recorded under perRecord converge to it.
 * - none: no resource at all; the status names the mode and where the records are.
 * - switching back to perRecord recreates every record's resource from the vault: nothing lost.
 * - a retention: every resource goes (Runs recorded before and after the switch), while the vault
 *   still answers GET for every record, and the query the Run's status.attestations.evidence names
 *   lists them all.
 * - a bad mode or retention: the controller process refuses to start, naming the key.
 */
import { execFile } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { CustomObjectsApi } from '@kubernetes/client-node';
import type { FastifyInstance } from 'fastify';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { driveRun } from '../../../hack/sample-pipeline.ts';
import type { RunningController } from '../../../src/controller/manager.ts';
import { startTestController } from '../../helpers/controller.ts';
import type { ResourcePolicy } from '../../../src/controller/run/resources.ts';
import type { Run } from '../../../src/crd/run.ts';
import { signerFromPem, type KeySigner } from '../../../src/signing/index.ts';
import { createVaultPool, migrate, openVault, type Vault } from '../../../src/vault/index.ts';
import { stackApp } from '../../helpers/app.ts';
import { aibomReady, sampleRunSpec, startControllerProcess } from '../../helpers/controller-process.ts';
import { generateDevPki } from '../../helpers/pki.ts';
import { createNamespace } from '../../helpers/rbac.ts';
import { freshDatabase, kubeConfig, stack, uniqueName } from '../../helpers/stack.ts';
import { waitFor } from '../../helpers/wait.ts';

const exec = promisify(execFile);
const GROUP = 'vault.service.dev';
const ns = uniqueName('resources');

let vault: Vault;
let signer: KeySigner;
let app: FastifyInstance;
let controller: RunningController | undefined;

const crs = () => kubeConfig('admin').makeApiClient(CustomObjectsApi);

async function getRun(name: string): Promise<Run> {
  return (await crs().getNamespacedCustomObject({
    group: GROUP,
    version: 'v1',
    namespace: ns,
    plural: 'runs',
    name,
  })) as Run;
}

interface AttestationResource {
  metadata: { name: string; labels?: Record<string, string> };
  spec: { id: string; kind: string };
  status?: { records?: { count?: number; kinds?: Record<string, number> } };
}

/** The namespace's Attestation resources, or those of one Run (by the controller's label). */
async function attestations(run?: string): Promise<AttestationResource[]> {
  const list = (await crs().listNamespacedCustomObject({
    group: GROUP,
    version: 'v1',
    namespace: ns,
    plural: 'attestations',
    ...(run !== undefined ? { labelSelector: `vault.service.dev/run=${run}` } : {}),
  })) as { items: AttestationResource[] };
  return list.items;
}

/** The record ids the vault holds for a Run, in insert order. */
async function vaultIds(run: Run): Promise<string[]> {
  return (await vault.attestations.ofRun(ns, run.metadata.uid)).map((a) => a.id);
}

/** A controller of this namespace with `policy`, replacing the one before (a restart with new settings). */
async function restartWith(policy: ResourcePolicy): Promise<void> {
  await controller?.stop();
  controller = startTestController({
    vault,
    signer,
    leasePrefix: 'resources',
    watchNamespace: ns,
    attestationResources: policy,
  });
  await controller.ready();
}

/** Creates the sample Run `name`, drives it to Succeeded and waits for its AIBOM. */
async function recordedRun(name: string): Promise<Run> {
  await crs().createNamespacedCustomObject({
    group: GROUP,
    version: 'v1',
    namespace: ns,
    plural: 'runs',
    body: { apiVersion: `${GROUP}/v1`, kind: 'Run', metadata: { name }, spec: await sampleRunSpec() },
  });
  await driveRun(kubeConfig('admin'), ns, name, { stepDelayMs: 10 });
  return waitFor(`${name} AIBOMReady`, async () => {
    const r = await getRun(name);
    return aibomReady(r.status?.conditions?.find((c) => c.type === 'AIBOMReady')) ? r : undefined;
  });
}

/** Waits until every Run in `names` shows `resources` (undefined: perRecord) with its count final. */
async function converged(names: readonly string[], resources: string | undefined): Promise<Run[]> {
  return waitFor(`${names.join(', ')} at ${resources ?? 'perRecord'}`, async () => {
    const runs = await Promise.all(names.map(getRun));
    return runs.every((r) => r.status?.attestations?.resources === resources) ? runs : undefined;
  });
}

/** One page of POST /v1/attestations/query through the real API (TokenReview, SubjectAccessReview). */
async function queryPage(
  url: string,
  payload: object,
): Promise<{ items: { id: string }[]; next_cursor: string | null }> {
  const page = await app.inject({
    method: 'POST',
    url,
    headers: { authorization: `Bearer ${stack().kube.tokens.admin}`, 'content-type': 'application/json' },
    payload,
  });
  if (page.statusCode !== 200) throw new Error(`${url}: ${page.statusCode} ${page.body}`);
  return page.json<{ items: { id: string }[]; next_cursor: string | null }>();
}

/** The first row's value in `column` of kubectl's table (aligned: a value starts where its header does). */
function cell(table: string, column: string): string | undefined {
  const [header, row] = table.split('\n');
  const at = header?.search(new RegExp(`\\b${column}\\b`)) ?? -1;
  if (at < 0 || row === undefined) return undefined;
  return row.slice(at).split(/\s/)[0];
}

const names: string[] = [];
/** Every record id of every Run, as the vault held them when each Run was recorded. */
const recorded = new Map<string, string[]>();

beforeAll(async () => {
  const url = await freshDatabase('resources');
  await migrate(url);
  vault = await openVault(createVaultPool(url));
  signer = signerFromPem(await generateDevPki());
  await createNamespace(ns);
  app = await stackApp(vault, signer.caCertificates);
});

afterAll(async () => {
  await controller?.stop();
  await app?.close();
  await vault?.close();
});

describe('ATTESTATION_RESOURCES on the real API server', () => {
  it('perRecord: one Attestation resource per vault record, nothing new on the status', async () => {
    await restartWith({ mode: 'perRecord' });
    const run = await recordedRun('per-record');
    names.push('per-record');
    const ids = await vaultIds(run);
    recorded.set('per-record', ids);
    expect(ids.length).toBeGreaterThanOrEqual(10);
    const resources = await waitFor('all resources', async () => {
      const items = await attestations('per-record');
      return items.length === ids.length ? items : undefined;
    });
    expect(resources.map((a) => a.metadata.name).sort()).toEqual([...ids].sort());
    expect(run.status?.attestations?.count).toBe(ids.length);
    expect(run.status?.attestations?.resources).toBeUndefined();
    expect(run.status?.attestations?.evidence).toBeUndefined();
  });

  it('perRun: exactly one resource per Run, its provenance record, counting every record', async () => {
    await restartWith({ mode: 'perRun' });
    const run = await recordedRun('per-run');
    names.push('per-run');
    recorded.set('per-run', await vaultIds(run));
    // The Run recorded under perRecord converges too: its other resources are deleted.
    const runs = await converged(names, 'perRun');
    for (const r of runs) {
      const ids = recorded.get(r.metadata.name)!;
      const items = await waitFor(`${r.metadata.name}: one resource`, async () => {
        const list = await attestations(r.metadata.name);
        return list.length === 1 ? list : undefined;
      });
      const [summary] = items;
      expect(summary!.metadata.name).toBe(r.status?.attestations?.runAttestationId);
      expect(summary!.spec.kind).toBe('run');
      expect(summary!.status?.records?.count).toBe(ids.length);
      const kinds = summary!.status?.records?.kinds ?? {};
      expect(Object.values(kinds).reduce((a, b) => a + b, 0)).toBe(ids.length);
      expect(kinds).toMatchObject({ run: 1, aibom: 1 });
      expect(r.status?.attestations).toMatchObject({
        count: ids.length,
        resources: 'perRun',
        evidence: `POST /v1/attestations/query {"run_id":"${r.metadata.uid}"}`,
      });
    }
    expect(await attestations()).toHaveLength(names.length);
    // What a kubectl user sees: the count in the RECORDS column, the mode in the Run's wide view.
    const kc = (...args: string[]) =>
      exec(stack().tools.kubectl, [`--kubeconfig=${stack().kube.kubeconfigs.admin}`, '-n', ns, ...args]);
    const att = (await kc('get', 'attestations', '-l', 'vault.service.dev/run=per-run')).stdout;
    expect(cell(att, 'RECORDS')).toBe(String(recorded.get('per-run')!.length));
    const wide = (await kc('get', 'runs', 'per-run', '-o', 'wide')).stdout;
    expect(cell(wide, 'RESOURCES')).toBe('perRun');
  });

  it('none: no Attestation resource at all; every Run says where its records are', async () => {
    await restartWith({ mode: 'none' });
    await recordedRun('none');
    names.push('none');
    recorded.set('none', await vaultIds(await getRun('none')));
    const runs = await converged(names, 'none');
    await waitFor('no resources', async () => ((await attestations()).length === 0 ? true : undefined));
    for (const r of runs) {
      expect(r.status?.attestations).toMatchObject({
        count: recorded.get(r.metadata.name)!.length,
        resources: 'none',
        evidence: `POST /v1/attestations/query {"run_id":"${r.metadata.uid}"}`,
      });
    }
  });

  it('switching back to perRecord recreates every record resource from the vault: nothing was lost', async () => {
    await restartWith({ mode: 'perRecord' });
    await converged(names, undefined);
    for (const name of names) {
      const ids = recorded.get(name)!;
      const items = await waitFor(`${name}: every record`, async () => {
        const list = await attestations(name);
        return list.length === ids.length ? list : undefined;
      });
      expect(items.map((a) => a.metadata.name).sort()).toEqual([...ids].sort());
    }
  });

  it('a retention deletes every Attestation resource; the vault still serves every record', async () => {
    // Long enough for the Run recorded now to be seen with its resources first.
    await restartWith({ mode: 'perRun', retentionMs: 30_000 });
    const late = await recordedRun('late');
    names.push('late');
    recorded.set('late', await vaultIds(late));
    // Seen with its one resource: the retention counts from its AIBOM, a moment ago (a machine that
    // took the whole retention since finds it pruned already, which the waits below then check).
    const before = await attestations('late');
    if (before.length > 0) {
      expect(before.map((a) => a.metadata.name)).toEqual([late.status?.attestations?.runAttestationId]);
    }
    const runs = await converged(names, 'pruned');
    await waitFor('no resources', async () => ((await attestations()).length === 0 ? true : undefined));
    const token = stack().kube.tokens.admin;
    for (const r of runs) {
      const ids = recorded.get(r.metadata.name)!;
      expect(r.status?.attestations?.count).toBe(ids.length);
      // Follow the status to the evidence: the request it names lists every record of the Run.
      const evidence = /^POST (\S+) (\{.*\})$/.exec(r.status?.attestations?.evidence ?? '');
      expect(evidence, r.status?.attestations?.evidence).not.toBeNull();
      const listed: string[] = [];
      let cursor: string | null = null;
      do {
        const body = await queryPage(evidence![1]!, {
          ...(JSON.parse(evidence![2]!) as object),
          ...(cursor !== null ? { cursor } : {}),
        });
        listed.push(...body.items.map((i) => i.id));
        cursor = body.next_cursor;
      } while (cursor !== null);
      expect([...listed].sort()).toEqual([...ids].sort());
      for (const id of ids) {
        const res = await app.inject({
          url: `/v1/attestations/${id}`,
          headers: { authorization: `Bearer ${token}` },
        });
        expect(res.statusCode, id).toBe(200);
      }
    }
    // Records only appended: the vault holds exactly what it held when each Run was recorded.
    for (const r of runs) expect(await vaultIds(r)).toEqual(recorded.get(r.metadata.name));
  });
});

describe('bad settings', () => {
  const start = async (env: Record<string, string>) => {
    const proc = await startControllerProcess({
      name: `resources-bad-${randomBytes(3).toString('hex')}`,
      databaseUrl: 'postgres://nobody@127.0.0.1:1/none',
      watchNamespace: ns,
      lease: 'resources-bad',
      signerSecret: `${ns}/none`,
      logDir: join(stack().root, 'resources-bad'),
      env,
    });
    const exit = await proc.exited;
    const { readFile } = await import('node:fs/promises');
    return { exit, log: await readFile(proc.logFile, 'utf8') };
  };

  it('a controller with an unknown mode or a bad retention refuses to start, naming the key', async () => {
    const mode = await start({ ATTESTATION_RESOURCES: 'perNamespace' });
    expect(mode.exit.code).toBe(2);
    expect(mode.log).toContain(
      'ATTESTATION_RESOURCES: must be one of perRecord, perRun, none, got "perNamespace"',
    );
    const retention = await start({ ATTESTATION_RESOURCE_RETENTION: '30 days' });
    expect(retention.exit.code).toBe(2);
    expect(retention.log).toContain('ATTESTATION_RESOURCE_RETENTION: must be a duration like');
  });
});
