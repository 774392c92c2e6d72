import { execFile } from 'node:child_process';
import { X509Certificate } from 'node:crypto';
import { mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { CoreV1Api } from '@kubernetes/client-node';
import { Reader } from '@contentauth/c2pa-node';
import type { FastifyInstance } from 'fastify';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { driveRun } from '../../../hack/sample-pipeline.ts';
import { repoRoot } from '../../../hack/stack/stack.ts';
import type { AibomMetadata } from '../../../src/recorder/index.ts';
import { createVaultPool, openVault, type Vault } from '../../../src/vault/index.ts';
import { stackApp } from '../../helpers/app.ts';
import { stackBlobs } from '../../helpers/blobs.ts';
import {
  aibomReady,
  createRun,
  sampleRunSpec,
  startControllerProcess,
  stopAllControllers,
  waitForCondition,
} from '../../helpers/controller-process.ts';
import { generateDevPki, toSecretData, type DevPki } from '../../helpers/pki.ts';
import { freshDatabase, kubeConfig, stack, uniqueName } from '../../helpers/stack.ts';

/**
 * Done-when of issue 15, on the real stack with its TSA: the real controller process (TSA_URL set)
 * signs a Run's AIBOM with a leaf generated here and valid for about a minute; once that leaf has
 * expired, c2pa-rs still reports the manifest Trusted with its time-stamp, the signed-export guard
 * lets the download out (and says at which time it judged the certificates), and
 * `service-ctl verify --aibom` passes, saying the same. Without the TSA's anchor, the same
 * manifest is blocked and fails: the time-stamp is what keeps it valid.
 */
const run = promisify(execFile);
const token = () => ({ authorization: `Bearer ${stack().kube.tokens.admin}` });
let dir: string;
let namespace: string;
let pki: DevPki;
let databaseUrl: string;
let vault: Vault;
let meta: AibomMetadata;
let runId: string;
let tsaCaPem: string;

beforeAll(async () => {
  dir = await mkdtemp(join(tmpdir(), 'ts-expiry-'));
  tsaCaPem = await readFile(stack().env.TSA_TRUST_ANCHORS!, 'utf8');
  namespace = uniqueName('ts-expiry');
  const core = kubeConfig('admin').makeApiClient(CoreV1Api);
  await core.createNamespace({ body: { metadata: { name: namespace } } });
  // The leaf lives about a minute (and was valid a minute before, so clock skew cannot matter).
  pki = await generateDevPki({
    notBefore: new Date(Date.now() - 60_000),
    notAfter: new Date(Date.now() + 60_000),
  });
  await core.createNamespacedSecret({
    namespace,
    body: { metadata: { name: 'operator-test-signer' }, type: 'kubernetes.io/tls', data: toSecretData(pki) },
  });
  databaseUrl = await freshDatabase('tsexp');
  const lease = uniqueName('ts-expiry');
  const controller = await startControllerProcess({
    name: lease,
    databaseUrl,
    watchNamespace: namespace,
    lease,
    signerSecret: `${namespace}/operator-test-signer`,
    logDir: dir,
    env: { TSA_URL: stack().env.TSA_URL!, TSA_TRUST_ANCHORS: stack().env.TSA_TRUST_ANCHORS! },
  });
  await controller.waitLeading({ timeoutMs: 90_000 });
  await createRun(namespace, 'expiring', await sampleRunSpec());
  await driveRun(kubeConfig('admin'), namespace, 'expiring');
  const done = await waitForCondition(namespace, 'expiring', 'AIBOMReady', aibomReady, 'the AIBOM');
  runId = done.metadata.uid;
  meta = done.status!.artifacts!.aibom as AibomMetadata;
  await stopAllControllers();
  vault = await openVault(createVaultPool(databaseUrl));
  // Now wait out the leaf: everything below happens after it expired.
  const notAfter = new X509Certificate(pki['tls.crt']).validToDate.getTime();
  while (Date.now() <= notAfter + 2_000) await new Promise((r) => setTimeout(r, 500));
}, 300_000);

afterAll(async () => {
  await stopAllControllers();
  await vault?.close();
  await rm(dir, { recursive: true, force: true });
});

describe('an AIBOM after its signer certificate expired', () => {
  it('its metadata records RFC 3161 time-stamps beside the signature and on the manifest', () => {
    const leaf = new X509Certificate(pki['tls.crt']);
    expect(meta.signature).toMatchObject({ algorithm: 'ECDSA_P256_SHA256' });
    expect(meta.signature.timestamp?.tsa).toContain('time-stamping authority');
    expect(meta.signature.timestamp?.signed_timestamp.length).toBeGreaterThan(100);
    const time = new Date(meta.signature.timestamp!.time).getTime();
    expect(time).toBeGreaterThanOrEqual(leaf.validFromDate.getTime());
    expect(time).toBeLessThanOrEqual(leaf.validToDate.getTime());
    expect(meta.c2pa_manifest.timestamp?.tsa).toBe(meta.signature.timestamp?.tsa);
    expect(Date.now()).toBeGreaterThan(leaf.validToDate.getTime());
  });

  it('c2pa-rs: Trusted, with its time-stamp validated and trusted', async () => {
    const blobs = stackBlobs();
    const [asset, store] = await Promise.all([blobs.get(meta.key), blobs.get(meta.c2pa_manifest.key)]);
    const reader = await Reader.fromManifestDataAndAsset(
      store!,
      { buffer: asset!, mimeType: 'application/json' },
      { trust: { trust_anchors: pki['ca.crt'] + tsaCaPem }, verify: { verify_trust: true } },
    );
    const result = reader.json() as {
      validation_state?: string;
      validation_results?: { activeManifest?: { success: { code: string }[]; failure: { code: string }[] } };
    };
    expect(result.validation_results?.activeManifest?.failure).toEqual([]);
    expect(result.validation_state).toBe('Trusted');
    expect(result.validation_results?.activeManifest?.success.map((s) => s.code)).toEqual(
      expect.arrayContaining(['timeStamp.validated', 'timeStamp.trusted', 'signingCredential.trusted']),
    );
  });

  let app: FastifyInstance | undefined;
  afterAll(async () => {
    await app?.close();
  });

  it('the signed-export guard lets it out, judged at its time-stamp; without the TSA anchor it is blocked', async () => {
    const anchors = [new X509Certificate(pki['ca.crt'])];
    app = await stackApp(vault, anchors, { tsaTrustAnchors: [new X509Certificate(tsaCaPem)] });
    const res = await app.inject({ url: `/v1/runs/${runId}/artifacts/aibom`, headers: token() });
    expect(res.statusCode).toBe(200);
    expect(res.headers['x-c2pa-validated-at']).toBe(
      `${meta.c2pa_manifest.timestamp!.time}; rfc3161 ${meta.c2pa_manifest.timestamp!.tsa}`,
    );
    const blind = await stackApp(vault, anchors);
    try {
      const blocked = await blind.inject({ url: `/v1/runs/${runId}/artifacts/aibom`, headers: token() });
      expect(blocked.statusCode).toBe(409);
      expect(blocked.json<{ code: string; detail: string }>()).toMatchObject({
        code: 'UNSIGNED_EXPORT_BLOCKED',
      });
      expect(blocked.json<{ detail: string }>().detail).toContain('CERTIFICATE_EXPIRED');
    } finally {
      await blind.close();
    }
  });

  it('service-ctl aibom fetch + verify --aibom pass, saying the certificates were checked at the time-stamp', async () => {
    await app!.listen({ host: '127.0.0.1', port: 0 });
    const apiUrl = `http://127.0.0.1:${(app!.server.address() as AddressInfo).port}`;
    const ca = join(dir, 'ca.crt');
    await writeFile(ca, pki['ca.crt']);
    const out = join(dir, 'aibom');
    const cli = (args: string[], env: Record<string, string> = {}) =>
      run(process.execPath, [join(repoRoot, 'src/bin/service-ctl.ts'), ...args], {
        env: { ...process.env, SERVICE_API_URL: apiUrl, SERVICE_TOKEN: stack().kube.tokens.admin, ...env },
      }).then(
        (r) => ({ code: 0, out: r.stdout }),
        (e: { code?: number; stdout?: string; stderr?: string }) => ({
          code: e.code ?? -1,
          out: `${e.stdout ?? ''}${e.stderr ?? ''}`,
        }),
      );
    expect((await cli(['aibom', 'fetch', '--run', runId, '--out', out])).code).toBe(0);
    const ok = await cli(['verify', '--aibom', out, '--trust-anchor', ca], {
      TSA_TRUST_ANCHORS: stack().env.TSA_TRUST_ANCHORS!,
    });
    expect(ok.out).toContain('AIBOM verified');
    expect(ok.code).toBe(0);
    expect(ok.out).toContain(
      `certificates checked at ${new Date(meta.c2pa_manifest.timestamp!.time).toISOString()}, the time of its RFC 3161 time-stamp`,
    );
    expect(ok.out).toMatch(/timestamp +\S+ by .*time-stamping authority.*certificates valid then/);
    const env = { ...process.env };
    delete env.TSA_TRUST_ANCHORS;
    const blind = await run(
      process.execPath,
      [join(repoRoot, 'src/bin/service-ctl.ts'), 'verify', '--aibom', out, '--trust-anchor', ca],
      { env },
    ).then(
      () => ({ code: 0, out: '' }),
      (e: { code?: number; stdout?: string }) => ({ code: e.code ?? -1, out: e.stdout ?? '' }),
    );
    expect(blind.code).toBe(1);
    expect(blind.out).toContain('CERTIFICATE_EXPIRED');
  });
});
