/**
 * Transparency end to end: deployment A (controller + API, SERVICE_TRANSPARENCY_WRITER=1,
 * SCITT_BACKEND=scrapi) publishes to deployment B (a second sidecar serving its own local log over
 * SCRAPI). B is down at first: A's jobs stay `queued` (visible on the Attestation resources and the
 * Run), then B comes up and every job goes `published`, exactly once in B's log, with receipts
 * that `service-ctl verify --log-keys` checks offline.
 */
import { execFile } from 'node:child_process';
import { X509Certificate } from 'node:crypto';
import { writeFile } from 'node:fs/promises';
import type { AddressInfo } from 'node:net';
import { promisify } from 'node:util';
import { CustomObjectsApi } from '@kubernetes/client-node';
import type { FastifyInstance } from 'fastify';
import { pino } from 'pino';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { repoRoot } from '../../../hack/stack/stack.ts';
import { freePort } from '../../../hack/stack/proc.ts';
import type { Run } from '../../../src/crd/run.ts';
import { driveRun } from '../../../hack/sample-pipeline.ts';
import type { RunningController } from '../../../src/controller/manager.ts';
import { startTestController } from '../../helpers/controller.ts';
import { generateDevPki } from '../../../hack/dev-pki.ts';
import { signerFromPem, type KeySigner } from '../../../src/signing/index.ts';
import { setupTransparency, type Transparency } from '../../../src/transparency/setup.ts';
import { runCheckpointer } from '../../../src/checkpoint/checkpointer.ts';
import { verifyReceipt } from '../../../src/transparency/receipt.ts';
import { createVaultPool, migrate, openVault, type Vault } from '../../../src/vault/index.ts';
import { stackApp } from '../../helpers/app.ts';
import { stackBlobs } from '../../helpers/blobs.ts';
import { createNamespace } from '../../helpers/rbac.ts';
import { freshDatabase, kubeConfig, stack, uniqueName } from '../../helpers/stack.ts';
import { waitFor } from '../../helpers/wait.ts';
import { eventsOf } from '../../helpers/controller-process.ts';

const run = promisify(execFile);
const ns = uniqueName('scitt-e2e');
const group = 'vault.service.dev';
const quiet = pino({ level: 'silent' });

interface Deployment {
  vault: Vault;
  signer: KeySigner;
  transparency: Transparency;
  app: FastifyInstance;
}

let a: Deployment;
let b: Deployment;
let bPort: number;
let controller: RunningController;
let aUrl: string;

async function deployment(
  label: string,
  backend: { kind: 'local' } | { kind: 'scrapi'; url: string },
  pki: Awaited<ReturnType<typeof generateDevPki>>,
  registrars: readonly string[] = [],
): Promise<Deployment> {
  const url = await freshDatabase(label);
  await migrate(url);
  const vault = await openVault(createVaultPool(url));
  const signer = signerFromPem(pki);
  const logSigner = signerFromPem(await generateDevPki());
  const transparency = setupTransparency({
    vault,
    signer,
    caCertificates: signer.caCertificates,
    logSigner,
    issuer: `urn:test:${label}`,
    backend: backend.kind,
    ...(backend.kind === 'scrapi' ? { scittUrl: backend.url, scittToken: stack().kube.tokens.admin } : {}),
    logger: quiet,
  });
  const app = await stackApp(vault, signer.caCertificates, {
    // B registers statements signed under A's CA as well as its own.
    scrapiTrustAnchors: [...signer.caCertificates, ...registrars.map((pem) => new X509Certificate(pem))],
    transparency,
    transparencyWriter: true,
  });
  return { vault, signer, transparency, app };
}

const crs = () => kubeConfig('admin').makeApiClient(CustomObjectsApi);
const getRun = async () =>
  (await crs().getNamespacedCustomObject({
    group,
    version: 'v1',
    namespace: ns,
    plural: 'runs',
    name: 'anchored',
  })) as Run;
const attestationStates = async () => {
  const list = (await crs().listNamespacedCustomObject({
    group,
    version: 'v1',
    namespace: ns,
    plural: 'attestations',
  })) as {
    items: { spec: { id: string }; status?: { transparency?: { state?: string; attempts?: number } } }[];
  };
  return list.items.map((i) => ({
    id: i.spec.id,
    state: i.status?.transparency?.state,
    attempts: i.status?.transparency?.attempts,
  }));
};

beforeAll(async () => {
  bPort = await freePort();
  const aPki = await generateDevPki();
  b = await deployment('scitt_b', { kind: 'local' }, await generateDevPki(), [aPki['ca.crt']]);
  a = await deployment('scitt_a', { kind: 'scrapi', url: `http://127.0.0.1:${bPort}` }, aPki);
  await a.app.listen({ host: '127.0.0.1', port: 0 });
  aUrl = `http://127.0.0.1:${(a.app.server.address() as AddressInfo).port}`;
  await createNamespace(ns);
  controller = startTestController({
    vault: a.vault,
    signer: a.signer,
    leasePrefix: 'scitt',
    watchNamespace: ns,
    transparency: a.transparency,
  });
});

afterAll(async () => {
  await controller?.stop();
  for (const d of [a, b]) {
    await d?.app.close();
    await d?.vault.close();
  }
});

/** `aibom.meta.json` beside the Run's AIBOM blob, as anyone reading the bucket sees it. */
async function metaInBucket(
  r: Run,
): Promise<{ transparency?: Record<string, unknown> & { status?: string; job_id?: string } }> {
  const key = (r.status?.artifacts?.aibom as { key: string }).key.replace(/aibom\.json$/, 'aibom.meta.json');
  return JSON.parse((await stackBlobs().get(key))!.toString('utf8')) as {
    transparency?: Record<string, unknown> & { status?: string; job_id?: string };
  };
}

const attestationModes = async (namespace = ns) => {
  const list = (await crs().listNamespacedCustomObject({
    group,
    version: 'v1',
    namespace,
    plural: 'attestations',
  })) as { items: { status?: { transparency?: { mode?: string } } }[] };
  return list.items.map((i) => i.status?.transparency?.mode);
};

describe('SERVICE_TRANSPARENCY_WRITER=1 publishing to a remote SCRAPI service', () => {
  it('keeps jobs queued while the log is down, then publishes each once, and receipts verify offline', async () => {
    const sample = {
      apiVersion: `${group}/v1`,
      kind: 'Run',
      metadata: { name: 'anchored', namespace: ns },
      spec: {
        policyPack: { name: 'baseline', version: '1' },
        steps: [
          {
            id: 'ask',
            model: { name: 'm', provider: 'p', version: '1', temperature: 0 },
            capabilities: [{ scope: 's', grantedBy: 'team:g' }],
          },
          { id: 'act', dependsOn: ['ask'], tool: { name: 't', command: ['t'] } },
        ],
      },
    };
    await crs().createNamespacedCustomObject({
      group,
      version: 'v1',
      namespace: ns,
      plural: 'runs',
      body: sample,
    });
    await driveRun(kubeConfig('admin'), ns, 'anchored');

    // 1 capability + 2 steps + their 2 output artifacts + 1 policy + 1 run + the AIBOM, its 2
    // standard views and its blob's artifact record = 11 records.
    // B is not listening: every record is stored, enqueued, and shown as queued after a failed attempt.
    const queued = await waitFor('queued attestations', async () => {
      const r = await getRun();
      const states = await attestationStates();
      const ready = r.status?.conditions?.some((c) => c.type === 'AIBOMReady' && c.status === 'True');
      return ready &&
        states.length === 11 &&
        states.every((s) => s.state === 'queued' && (s.attempts ?? 0) >= 1)
        ? { r, states }
        : undefined;
    });
    expect(queued.r.status?.transparency).toMatchObject({ state: 'queued', queued: 11, published: 0 });
    expect(
      (queued.r.status?.artifacts?.aibom as { transparency?: { status: string } }).transparency?.status,
    ).toBe('queued');
    // The metadata object in the bucket has the entry too, queued with the job id (not only the
    // API's view, joined at read time).
    const aibomJob = await a.vault.transparencyJobs.get({
      attestationId: queued.r.status!.attestations!.aibomAttestationId!,
    });
    await waitFor('aibom.meta.json with the queued entry', async () => {
      const t = (await metaInBucket(queued.r)).transparency;
      return t?.status === 'queued' && t.job_id === aibomJob!.id ? true : undefined;
    });

    // B comes up on the port A publishes to.
    await b.app.listen({ host: '127.0.0.1', port: bPort });
    const published = await waitFor('published', async () => {
      const r = await getRun();
      return r.status?.transparency?.state === 'published' ? r : undefined;
    });
    expect(published.status?.transparency).toMatchObject({
      published: 11,
      queued: 0,
      retrying: 0,
      notQueued: 0,
    });
    expect((await attestationStates()).every((s) => s.state === 'published')).toBe(true);
    const aibomT = (published.status?.artifacts?.aibom as { transparency: Record<string, unknown> })
      .transparency;
    expect(aibomT).toMatchObject({ status: 'published', backend: 'scrapi', mode: 'published' });
    expect(aibomT.entry_id).toEqual(expect.any(String));
    expect(aibomT.receipt).toEqual(expect.any(String));
    // A remote service: `published` beside `published`, and the Event says anchored.
    expect(published.status?.transparency?.mode).toBe('published');
    expect((await attestationModes()).every((m) => m === 'published')).toBe(true);
    const note = await waitFor('the TransparencyPublished Event', async () =>
      (await eventsOf(ns, published.metadata.uid)).find((e) => e.reason === 'TransparencyPublished'),
    );
    expect(note.message).toMatch(/anchored in the remote SCITT transparency service/);
    // The bucket's metadata object carries the final receipt, as the Run and the API show it.
    expect((await metaInBucket(published)).transparency).toEqual(aibomT);

    // Exactly one entry per attestation in B's log, whatever the retries.
    expect((await b.transparency.log.treeHead()).size).toBe(11);

    // Offline: envelopes from A's API, B's log keys, A's signer certificate.
    const token = stack().kube.tokens.admin;
    const res = await fetch(`${aUrl}/v1/attestations/query`, {
      method: 'POST',
      headers: {
        authorization: `Bearer ${token}`,
        'content-type': 'application/json',
        accept: 'application/x-ndjson',
      },
      body: JSON.stringify({ namespaces: [ns] }),
    });
    const ndjson = await res.text();
    // Eleven records and the stream's trailer line.
    expect(ndjson.trim().split('\n')).toHaveLength(12);
    const dir = stack().root;
    const keys = Buffer.from(
      await (
        await fetch(`http://127.0.0.1:${bPort}/.well-known/scitt-keys`, {
          headers: { authorization: `Bearer ${token}` },
        })
      ).arrayBuffer(),
    );
    await writeFile(`${dir}/${ns}.ndjson`, ndjson);
    await writeFile(`${dir}/${ns}-keys.cbor`, keys);
    await writeFile(`${dir}/${ns}-signer.pem`, a.signer.certificateChain![0]!.toString());
    const cli = (args: string[]) =>
      run(process.execPath, [`${repoRoot}/src/bin/service-ctl.ts`, 'verify', ...args]);
    const ok = await cli([
      `${dir}/${ns}.ndjson`,
      '--key',
      `${dir}/${ns}-signer.pem`,
      '--log-keys',
      `${dir}/${ns}-keys.cbor`,
    ]);
    expect(ok.stdout).toContain('11 verified, 0 failed');
    expect(ok.stdout.match(/receipt ok/g)).toHaveLength(11);
    // A receipt over a different statement is rejected.
    const lines = ndjson
      .trim()
      .split('\n')
      .map((l) => JSON.parse(l) as { transparency: { statement: string } });
    lines[0]!.transparency.statement = lines[1]!.transparency.statement;
    await writeFile(`${dir}/${ns}-swapped.json`, JSON.stringify(lines[0]));
    const bad = await cli([
      `${dir}/${ns}-swapped.json`,
      '--key',
      `${dir}/${ns}-signer.pem`,
      '--log-keys',
      `${dir}/${ns}-keys.cbor`,
    ]).catch((e: { code: number; stdout: string }) => e);
    expect(bad).toMatchObject({ code: 1 });
    expect((bad as { stdout: string }).stdout).toMatch(
      /STATEMENT_MISMATCH|INCLUSION_PROOF_INVALID|RECEIPT_SIGNATURE_INVALID/,
    );
  }, 300_000);

  it('POST /v1/attestations/scitt returns the receipt and log position, and refuses unknown ids', async () => {
    const token = stack().kube.tokens.admin;
    const ndjson = (await (
      await fetch(`${aUrl}/v1/attestations/query`, {
        method: 'POST',
        headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' },
        body: JSON.stringify({ namespaces: [ns], limit: 1 }),
      })
    ).json()) as { items: { id: string }[] };
    const id = ndjson.items[0]!.id;
    const res = await a.app.inject({
      method: 'POST',
      url: '/v1/attestations/scitt',
      headers: { authorization: `Bearer ${token}` },
      payload: { id },
    });
    expect(res.statusCode).toBe(200);
    const body = res.json<{ attestation_id: string; status: string; log_index: unknown; receipt: unknown }>();
    expect(body).toMatchObject({ attestation_id: id, status: 'published' });
    expect(typeof body.log_index).toBe('number');
    expect(typeof body.receipt).toBe('string');
    // Already published: the same entry, not a second one.
    expect((await b.transparency.log.treeHead()).size).toBe(11);
    const unknown = await a.app.inject({
      method: 'POST',
      url: '/v1/attestations/scitt',
      headers: { authorization: `Bearer ${token}` },
      payload: { id: '0190a5c8-1234-7abc-8def-0123456789ab' },
    });
    expect(unknown.statusCode).toBe(404);
    const alice = await a.app.inject({
      method: 'POST',
      url: '/v1/attestations/scitt',
      headers: { authorization: `Bearer ${stack().kube.tokens.alice}` },
      payload: { id },
    });
    expect(alice.statusCode).toBe(404);
  });

  it('a vault checkpoint is registered in the remote log too (SERVICE_TRANSPARENCY_WRITER=1)', async () => {
    // The leader's checkpointer as src/controller/manager.ts runs it, with A's publisher (scrapi → B).
    const stop = new AbortController();
    const running = runCheckpointer(
      {
        vault: a.vault,
        signer: a.signer,
        caCertificates: a.signer.caCertificates,
        intervalMs: 3_600_000,
        publisher: a.transparency.publisher,
        logger: quiet,
      },
      stop.signal,
    );
    try {
      const headers = { authorization: `Bearer ${stack().kube.tokens.admin}` };
      const made = await a.app.inject({ method: 'POST', url: '/v1/chain/checkpoint?wait=30', headers });
      expect(made.statusCode, made.body).toBe(200);
      expect(made.json<{ tree_size: number }>().tree_size).toBe(11);
      const view = await waitFor('checkpoint receipt', async () => {
        const v = (await a.app.inject({ url: '/v1/chain/checkpoint', headers })).json<{
          statement: string;
          transparency: { backend: string; receipt: string } | null;
        }>();
        return v.transparency !== null ? v : undefined;
      });
      expect(view.transparency!.backend).toBe('scrapi');
      const receipt = verifyReceipt({
        receipt: Buffer.from(view.transparency!.receipt, 'base64'),
        statement: Buffer.from(view.statement, 'base64'),
        logKey: b.transparency.log.keys,
      });
      expect(receipt.ok).toBe(true);
      // One entry more in B's log: the checkpoint, once.
      expect((await b.transparency.log.treeHead()).size).toBe(12);
    } finally {
      stop.abort();
      await running;
    }
  });
});

describe('SERVICE_TRANSPARENCY_WRITER=1 with the local log (a dry run)', () => {
  it('says dry_run beside published on the Run, the Attestations, kubectl, the Event, the API and the bucket', async () => {
    const local = uniqueName('scitt-dry');
    const c = await deployment('scitt_c', { kind: 'local' }, await generateDevPki());
    await createNamespace(local);
    const dry = startTestController({
      vault: c.vault,
      signer: c.signer,
      leasePrefix: 'scitt-dry',
      watchNamespace: local,
      transparency: c.transparency,
    });
    try {
      await crs().createNamespacedCustomObject({
        group,
        version: 'v1',
        namespace: local,
        plural: 'runs',
        body: {
          apiVersion: `${group}/v1`,
          kind: 'Run',
          metadata: { name: 'dry' },
          spec: { steps: [{ id: 'only', tool: { name: 't', command: ['t'] } }] },
        },
      });
      await driveRun(kubeConfig('admin'), local, 'dry');
      const done = await waitFor('published with its AIBOM entry', async () => {
        const r = (await crs().getNamespacedCustomObject({
          group,
          version: 'v1',
          namespace: local,
          plural: 'runs',
          name: 'dry',
        })) as Run;
        const entry = (r.status?.artifacts?.aibom as { transparency?: { status?: string } } | undefined)
          ?.transparency;
        return r.status?.transparency?.state === 'published' && entry?.status === 'published' ? r : undefined;
      });
      expect(done.status?.transparency).toMatchObject({ state: 'published', mode: 'dry_run' });
      expect((await attestationModes(local)).every((m) => m === 'dry_run')).toBe(true);
      const entry = (done.status?.artifacts?.aibom as { transparency: Record<string, unknown> }).transparency;
      expect(entry).toMatchObject({ status: 'published', backend: 'local', mode: 'dry_run' });
      expect((await metaInBucket(done)).transparency).toEqual(entry);
      const detail = await c.app.inject({
        method: 'GET',
        url: `/v1/runs/${done.metadata.uid}`,
        headers: { authorization: `Bearer ${stack().kube.tokens.admin}` },
      });
      expect(
        detail.json<{ artifacts: { aibom: { transparency: unknown } } }>().artifacts.aibom.transparency,
      ).toEqual(entry);
      const events = await waitFor('the TransparencyPublished Event', async () => {
        const all = await eventsOf(local, done.metadata.uid);
        return all.some((e) => e.reason === 'TransparencyPublished') ? all : undefined;
      });
      // No Event about this Run claims a dry run was anchored anywhere.
      for (const e of events) expect(e.message ?? '').not.toMatch(/anchored/);
      expect(events.find((e) => e.reason === 'TransparencyPublished')!.message).toMatch(
        /this deployment's own transparency log \(dry run/,
      );
      const table = await run(stack().tools.kubectl, [
        `--kubeconfig=${stack().kube.kubeconfigs.admin}`,
        'get',
        'runs,attestations',
        '-n',
        local,
      ]);
      expect(table.stdout).toMatch(/dry\s+Succeeded\s+True\s+AIBOMRecorded\s+\d+\s+published\s+dry_run\s/);
      expect(table.stdout).not.toMatch(/published\s+published/);
    } finally {
      await dry.stop();
      await c.app.close();
      await c.vault.close();
    }
  }, 300_000);
});
