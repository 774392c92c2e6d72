/**
 * A SCITT job that cannot publish (the remote transparency service refuses the statements: it does
 * not trust this deployment's CA) stays `queued` in every field the spec names: the AIBOM metadata
 * (`aibom.meta.json` in the bucket), the run detail (`GET /v1/runs/{id}` `artifacts.aibom`), the
 * Run's status (`status.transparency`, `status.artifacts.aibom.transparency`) and the Attestation
 * resources; the spec allows `queued` and `published` only. Why it waits is said elsewhere: the
 * job view (attempts, last error, next attempt), the Run's `TransparencyPublished` condition and
 * the metrics. The job is never given up: once the remote trusts the CA, a push publishes it
 * without any operator reset.
 */
import { X509Certificate } from 'node:crypto';
import { isDeepStrictEqual } from 'node:util';
import { CustomObjectsApi } from '@kubernetes/client-node';
import type { FastifyInstance } from 'fastify';
import { pino } from 'pino';
import { Registry } from 'prom-client';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { generateDevPki } from '../../../hack/dev-pki.ts';
import { freePort } from '../../../hack/stack/proc.ts';
import { driveRun } from '../../../hack/sample-pipeline.ts';
import type { RunningController } from '../../../src/controller/manager.ts';
import { startTestController } from '../../helpers/controller.ts';
import type { Condition, Run } from '../../../src/crd/run.ts';
import { signerFromPem, type KeySigner } from '../../../src/signing/index.ts';
import { setupTransparency, type Transparency } from '../../../src/transparency/setup.ts';
import { createVaultPool, migrate, openVault, type Vault } from '../../../src/vault/index.ts';
import { stackApp } from '../../helpers/app.ts';
import { stackBlobs } from '../../helpers/blobs.ts';
import { createNamespace } from '../../helpers/rbac.ts';
import { freshDatabase, kubeConfig, stack, uniqueName } from '../../helpers/stack.ts';
import { waitFor } from '../../helpers/wait.ts';

const ns = uniqueName('scitt-refused');
const group = 'vault.service.dev';
const quiet = pino({ level: 'silent' });
const token = () => stack().kube.tokens.admin;

interface Deployment {
  vault: Vault;
  signer: KeySigner;
  transparency: Transparency;
  app: FastifyInstance;
}

let a: Deployment;
let b: Deployment;
let bPort: number;
let bPki: Awaited<ReturnType<typeof generateDevPki>>;
let aPki: Awaited<ReturnType<typeof generateDevPki>>;
let controller: RunningController;
const registry = new Registry();

async function deployment(
  label: string,
  backend: { kind: 'local' } | { kind: 'scrapi'; url: string },
  pki: Awaited<ReturnType<typeof generateDevPki>>,
  registrars: readonly string[] = [],
  vault?: Vault,
): Promise<Deployment> {
  const v = vault ?? (await openVault(createVaultPool(await migratedDb(label))));
  const signer = signerFromPem(pki);
  const transparency = setupTransparency({
    vault: v,
    signer,
    caCertificates: signer.caCertificates,
    logSigner: signer,
    issuer: `urn:test:${label}`,
    backend: backend.kind,
    ...(backend.kind === 'scrapi' ? { scittUrl: backend.url, scittToken: token() } : {}),
    logger: quiet,
  });
  const app = await stackApp(v, signer.caCertificates, {
    scrapiTrustAnchors: [...signer.caCertificates, ...registrars.map((pem) => new X509Certificate(pem))],
    transparency,
    transparencyWriter: true,
  });
  return { vault: v, signer, transparency, app };
}

async function migratedDb(label: string): Promise<string> {
  const url = await freshDatabase(label);
  await migrate(url);
  return url;
}

const crs = () => kubeConfig('admin').makeApiClient(CustomObjectsApi);
const getRun = async (): Promise<Run> =>
  (await crs().getNamespacedCustomObject({
    group,
    version: 'v1',
    namespace: ns,
    plural: 'runs',
    name: 'refused',
  })) as Run;

interface AttestationTransparency {
  state?: string;
  attempts?: number;
  lastError?: string;
  nextAttemptAt?: string;
}
const attestationStates = async (): Promise<AttestationTransparency[]> => {
  const list = (await crs().listNamespacedCustomObject({
    group,
    version: 'v1',
    namespace: ns,
    plural: 'attestations',
  })) as { items: { status?: { transparency?: AttestationTransparency } }[] };
  return list.items.map((i) => i.status?.transparency ?? {});
};

async function metaInBucket(r: Run): Promise<{ transparency?: Record<string, unknown> }> {
  const key = (r.status?.artifacts?.aibom as { key: string }).key.replace(/aibom\.json$/, 'aibom.meta.json');
  return JSON.parse((await stackBlobs().get(key))!.toString('utf8')) as {
    transparency?: Record<string, unknown>;
  };
}

beforeAll(async () => {
  bPort = await freePort();
  aPki = await generateDevPki();
  bPki = await generateDevPki();
  // B trusts only its own CA: every statement of A is refused (a permanent answer, not a timeout).
  b = await deployment('refused_b', { kind: 'local' }, bPki);
  await b.app.listen({ host: '127.0.0.1', port: bPort });
  a = await deployment('refused_a', { kind: 'scrapi', url: `http://127.0.0.1:${bPort}` }, aPki);
  await createNamespace(ns);
  controller = startTestController({
    vault: a.vault,
    signer: a.signer,
    registry,
    leasePrefix: 'refused',
    watchNamespace: ns,
    transparency: a.transparency,
  });
});

afterAll(async () => {
  await controller?.stop();
  for (const d of [a, b]) {
    await d?.app.close();
  }
  await a?.vault.close();
  await b?.vault.close();
});

describe('a SCITT job the remote refuses', () => {
  it('stays queued in the metadata, the run detail, the Run and the Attestations; the job view, a condition and the metrics say why', async () => {
    await crs().createNamespacedCustomObject({
      group,
      version: 'v1',
      namespace: ns,
      plural: 'runs',
      body: {
        apiVersion: `${group}/v1`,
        kind: 'Run',
        metadata: { name: 'refused', namespace: ns },
        spec: {
          steps: [
            { id: 'ask', model: { name: 'm', provider: 'p', version: '1' } },
            { id: 'act', dependsOn: ['ask'], tool: { name: 't', command: ['t'] } },
          ],
        },
      },
    });
    await driveRun(kubeConfig('admin'), ns, 'refused');

    // Every record's job was tried once and refused; the AIBOM is recorded.
    const seen = await waitFor(
      'every job refused once, the AIBOM recorded and the Run projected',
      async () => {
        const r = await getRun();
        const states = await attestationStates();
        const count = r.status?.attestations?.count ?? 0;
        const ready = r.status?.conditions?.some((c) => c.type === 'AIBOMReady' && c.status === 'True');
        const aibomEntry = (
          r.status?.artifacts?.aibom as { transparency?: { attempts?: number } } | undefined
        )?.transparency;
        return ready &&
          count > 0 &&
          states.length === count &&
          states.every((s) => (s.attempts ?? 0) >= 1 && s.lastError !== undefined) &&
          (aibomEntry?.attempts ?? 0) >= 1
          ? { r, states }
          : undefined;
      },
    );
    const { r } = seen;
    const count = r.status!.attestations!.count!;

    // The Attestation resources: queued, with the attempts, the error and the next attempt.
    for (const s of seen.states) {
      expect(s.state).toBe('queued');
      expect(s.lastError).toMatch(/REMOTE_REJECTED/);
      expect(Date.parse(s.nextAttemptAt ?? '')).toBeGreaterThan(Date.now());
    }

    // The Run: queued (never a third value), with the counts; the condition says why.
    expect(r.status?.transparency?.state).toBe('queued');
    expect(r.status?.transparency).toMatchObject({ queued: count, published: 0, retrying: count });
    expect(r.status?.transparency).not.toHaveProperty('failed');
    const condition = r.status?.conditions?.find((c: Condition) => c.type === 'TransparencyPublished');
    expect(condition).toMatchObject({ status: 'False', reason: 'PublicationRetrying' });
    expect(condition?.message).toMatch(/REMOTE_REJECTED/);
    expect(condition?.message).toMatch(/next attempt/);

    // The AIBOM's entry, as the Run shows it, as the bucket's metadata object has it and as the
    // run detail serves it: the same queued entry.
    const entry = (r.status?.artifacts?.aibom as { transparency: Record<string, unknown> }).transparency;
    expect(entry).toMatchObject({ status: 'queued' });
    expect(entry.last_error).toMatch(/REMOTE_REJECTED/);
    expect(Date.parse(String(entry.next_attempt_at))).toBeGreaterThan(Date.now());
    await waitFor('aibom.meta.json with the same entry', async () => {
      const t = (await metaInBucket(r)).transparency;
      return t !== undefined && isDeepStrictEqual(t, entry) ? true : undefined;
    });
    const detail = await a.app.inject({
      method: 'GET',
      url: `/v1/runs/${r.metadata.uid}`,
      headers: { authorization: `Bearer ${token()}` },
    });
    expect(detail.statusCode).toBe(200);
    expect(
      detail.json<{ artifacts: { aibom: { transparency: unknown } } }>().artifacts.aibom.transparency,
    ).toEqual(entry);

    // The envelope's `transparency`: the job id, queued, attempts, error and next attempt.
    const aibomId = r.status!.attestations!.aibomAttestationId!;
    const envelope = await a.app.inject({
      method: 'GET',
      url: `/v1/attestations/${aibomId}`,
      headers: { authorization: `Bearer ${token()}` },
    });
    const view = envelope.json<{ transparency: Record<string, unknown> }>().transparency;
    expect(view.status).toBe('queued');
    expect(view.attempts).toBeGreaterThanOrEqual(1);
    expect(view.last_error).toMatch(/REMOTE_REJECTED/);
    expect(Date.parse(String(view.next_attempt_at))).toBeGreaterThan(Date.now());

    // The metrics: no third state; the jobs waiting after a failed attempt are counted.
    const metrics = await registry.metrics();
    expect(metrics).not.toMatch(/aibom_vault_transparency_jobs\{state="failed"\}/);
    expect(metrics).toMatch(new RegExp(`aibom_vault_transparency_jobs\\{state="queued"\\} ${count}\\b`));
    expect(metrics).toMatch(new RegExp(`aibom_vault_transparency_jobs_retrying ${count}\\b`));

    // The remote comes to trust A's CA: a push publishes the job as it stands (no reset needed),
    // and the AIBOM entry goes published everywhere.
    await b.app.close();
    b = await deployment('refused_b2', { kind: 'local' }, bPki, [aPki['ca.crt']], b.vault);
    await b.app.listen({ host: '127.0.0.1', port: bPort });
    const pushed = await a.app.inject({
      method: 'POST',
      url: '/v1/attestations/scitt',
      headers: { authorization: `Bearer ${token()}` },
      payload: { id: aibomId },
    });
    expect(pushed.statusCode).toBe(200);
    expect(pushed.json()).toMatchObject({ status: 'published' });
    const after = await waitFor('the AIBOM entry published on the Run', async () => {
      const run = await getRun();
      const t = (run.status?.artifacts?.aibom as { transparency?: { status?: string } }).transparency;
      return t?.status === 'published' ? run : undefined;
    });
    expect(after.status?.transparency).toMatchObject({ state: 'queued', published: 1, queued: count - 1 });
    await waitFor('aibom.meta.json published', async () =>
      (await metaInBucket(after)).transparency?.status === 'published' ? true : undefined,
    );
  }, 300_000);
});
