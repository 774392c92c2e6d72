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
import { signerFromPem, type KeySigner } from '../../../src/signing/index.ts';
import { createVaultPool, openVault, type Vault } from '../../../src/vault/index.ts';
import { stackApp } from '../../helpers/app.ts';
import { serviceCtlEnv } from '../../helpers/cli-main.ts';
import { stackBlobs } from '../../helpers/blobs.ts';
import { tarEntries } from '../../helpers/export.ts';
import {
  aibomReady,
  createRun,
  poll,
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
 *
 * The envelope half: every record of the Run (steps, policy, provenance, the AIBOM attestation) was
 * time-stamped by the controller's stamper before the leaf expired; after it, `service-ctl verify`
 * passes for the records (by id, and the export bundle holding them), judging the certificate at
 * each time-stamp and saying so, and cosign verifies every record's Sigstore bundle with its
 * RFC 3161 time-stamp (`--use-signed-timestamps`, the trusted root `service-ctl keys fetch` wrote).
 * Without the TSA anchor they fail with CERTIFICATE_EXPIRED; without the time-stamp, cosign fails.
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
let recordIds: string[];
/** Signs the export bundles' own manifests (now: the Run's leaf has expired by then). */
let exportSigner: KeySigner;

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
  vault = await openVault(createVaultPool(databaseUrl));
  // The stamper takes each record's time-stamp right after the record is stored, while the leaf
  // is valid; nothing here waits for the leaf before they are all in.
  recordIds = (await vault.attestations.ofRun(namespace, runId)).map((r) => r.id);
  await poll(async () => {
    const got = await vault.attestations.getMany(recordIds);
    return recordIds.every((id) => got.get(id)?.timestamp !== undefined);
  }, 'a time-stamp on every record of the Run');
  await stopAllControllers();
  exportSigner = signerFromPem(await generateDevPki({ caCommonName: 'export CA' }));
  // Now wait out the leaf: everything below happens after it expired.
  const notAfter = new X509Certificate(pki['tls.crt']).validToDate.getTime();
  while (Date.now() <= notAfter + 2_000) await new Promise((r) => setTimeout(r, 500));
}, 300_000);

afterAll(async () => {
  await stopAllControllers();
  await vault?.close();
  await rm(dir, { recursive: true, force: true });
});

/** A signed-in browser session on `server`'s UI (the admin's token), as a request function. */
async function uiSession(
  server: FastifyInstance,
): Promise<(url: string) => Promise<{ statusCode: number; body: string }>> {
  const cookies = new Map<string, string>();
  const send = async (url: string, form?: Record<string, string>) => {
    const res = await server.inject({
      method: form !== undefined ? 'POST' : 'GET',
      url,
      headers: {
        cookie: [...cookies].map(([k, v]) => `${k}=${v}`).join('; '),
        ...(form !== undefined ? { 'content-type': 'application/x-www-form-urlencoded' } : {}),
      },
      ...(form !== undefined ? { payload: new URLSearchParams(form).toString() } : {}),
    });
    for (const c of [res.headers['set-cookie'] ?? []].flat()) {
      const pair = c.split(';')[0]!;
      cookies.set(pair.slice(0, pair.indexOf('=')), pair.slice(pair.indexOf('=') + 1));
    }
    return res;
  };
  const form = await send('/ui/sign-in');
  const csrf = /name="_csrf" value="([^"]+)"/.exec(form.body)?.[1];
  expect(csrf).toBeDefined();
  const signedIn = await send('/ui/sign-in', {
    _csrf: csrf!,
    token: stack().kube.tokens.admin,
    next: '/ui/runs',
  });
  expect(signedIn.statusCode).toBe(303);
  return (url) => send(url);
}

/** The state the run page shows for record `id` (its row of the attestations table). */
function pageState(body: string, id: string): 'verified' | 'failed' | 'unknown' {
  const row = body.split('<tr>').find((r) => r.includes(`value="${id}"`));
  if (row === undefined) throw new Error(`no row for ${id}`);
  if (row.includes('signature valid')) return 'verified';
  if (row.includes('verification failed')) return 'failed';
  return 'unknown';
}

/** The `service-ctl verify …` command the run page tells a reader to check a record with. */
function commandOnPage(body: string): string[] {
  const m = /<code\s*>\s*service-ctl (verify ID[\s\S]*?)<\/code/.exec(body);
  if (m === null) throw new Error('the page names no verify command');
  return m[1]!.trim().split(/\s+/);
}

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
    app = await stackApp(vault, [...anchors, ...exportSigner.caCertificates], {
      tsaTrustAnchors: [new X509Certificate(tsaCaPem)],
      signer: exportSigner,
    });
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

  let apiUrl: string;
  /** service-ctl against the API; `env` adds to (or, with undefined values, removes from) the environment. */
  const cli = (args: string[], env: Record<string, string | undefined> = {}) => {
    return run(process.execPath, [join(repoRoot, 'src/bin/service-ctl.ts'), ...args], {
      env: serviceCtlEnv(apiUrl, stack().kube.tokens.admin, env),
      maxBuffer: 64 * 1024 * 1024,
    }).then(
      (r) => ({ code: 0, out: r.stdout }),
      (e: { code?: number; stdout?: string; stderr?: string }) => ({
        code: e.code ?? -1,
        out: `${e.stdout ?? ''}${e.stderr ?? ''}`,
      }),
    );
  };

  it('service-ctl aibom fetch + verify --aibom pass, saying the certificates were checked at the time-stamp', async () => {
    await app!.listen({ host: '127.0.0.1', port: 0 });
    apiUrl = `http://127.0.0.1:${(app!.server.address() as AddressInfo).port}`;
    const ca = join(dir, 'ca.crt');
    await writeFile(ca, pki['ca.crt']);
    const out = join(dir, 'aibom');
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

  it("service-ctl verify passes for the Run's records, each judged at its time-stamp; without the TSA anchor they have expired", async () => {
    const trust = join(dir, 'trust');
    const fetched = await cli(['keys', 'fetch', '--out', trust]);
    expect(fetched, fetched.out).toMatchObject({ code: 0 });
    expect(fetched.out).toContain('trusted_root.json');
    const bundle = join(trust, 'trust-bundle.json');
    // By id (the records come from the API with their signature.timestamp), every signer's chain
    // from the trust bundle, the TSA's roots from it too.
    const byId = await cli(['verify', ...recordIds, '--trust-bundle', bundle], {
      TSA_TRUST_ANCHORS: undefined,
    });
    expect(byId.out).toContain(`${recordIds.length} verified, 0 failed`);
    expect(byId.code).toBe(0);
    const okLines = byId.out.split('\n').filter((l) => l.startsWith('OK'));
    expect(okLines).toHaveLength(recordIds.length);
    for (const line of okLines) {
      expect(line).toMatch(
        /certificates checked at \S+, the time of its RFC 3161 time-stamp by .*time-stamping authority/,
      );
    }
    // The same records without any TSA anchor: judged now, after the leaf expired.
    const chainPem = join(dir, 'leaf-chain.pem');
    await writeFile(chainPem, pki['tls.crt']);
    const ca = join(dir, 'ca.crt');
    const blind = await cli(['verify', ...recordIds, '--cert-chain', chainPem, '--trust-anchor', ca], {
      TSA_TRUST_ANCHORS: undefined,
    });
    expect(blind.code).toBe(1);
    expect(blind.out).toContain(`0 verified, ${recordIds.length} failed`);
    expect(blind.out).toContain('CERTIFICATE_EXPIRED');
  });

  it("the web UI's run page says 'signature valid' for every record, judged at its time-stamp like service-ctl verify --trust-bundle", async () => {
    // The UI once checked chains at the moment of the page (no TSA roots, no rotation check): after
    // the leaf expired it showed "verification failed" for records the CLI accepts.
    const send = await uiSession(app!);
    const page = await send(`/ui/runs/${runId}`);
    expect(page.statusCode, page.body).toBe(200);
    for (const id of recordIds) expect(page.body).toContain(id);
    expect(page.body.split('signature valid')).toHaveLength(recordIds.length + 1);
    expect(page.body).not.toContain('verification failed');
    expect(page.body).not.toContain('signer unknown');
  });

  it('the run page and the command it names give each record the same verdict, with and without the TSA roots (issue 22 item 11)', async () => {
    // The page is read from two servers: the one whose GET /v1/keys names the TSA (every record
    // verified at its time-stamp) and one that knows no TSA (every record expired). An auditor
    // runs the command the page names, from a clean environment, on the trust the server serves.
    const blind = await stackApp(vault, [new X509Certificate(pki['ca.crt'])]);
    try {
      await blind.listen({ host: '127.0.0.1', port: 0 });
      const blindUrl = `http://127.0.0.1:${(blind.server.address() as AddressInfo).port}`;
      for (const [name, server, url, expected] of [
        ['with the TSA', app!, apiUrl, 'verified'],
        ['without a TSA', blind, blindUrl, 'failed'],
      ] as const) {
        const body = (await (await uiSession(server))(`/ui/runs/${runId}`)).body;
        const command = commandOnPage(body);
        const trust = join(dir, `trust-${name.replaceAll(' ', '-')}`);
        const fetched = await cli(['keys', 'fetch', '--out', trust], { SERVICE_API_URL: url });
        expect(fetched.code, fetched.out).toBe(0);
        // Every record in one run of the command (it takes many ids), each with its own line.
        const ref = (await vault.attestations.getMany(recordIds))
          .get(recordIds[0]!)!
          .signature.cert_chain_ref!.slice(7);
        const args = command.flatMap((a) =>
          a === 'ID' ? recordIds : [a.replace(/^trust(?=\/|$)/, trust).replace('REF', ref)],
        );
        const checked = await cli(args, { SERVICE_API_URL: url, TSA_TRUST_ANCHORS: undefined });
        for (const id of recordIds) {
          const state = pageState(body, id);
          expect(state, `${name}: page, ${id}`).toBe(expected);
          const lines = checked.out.split('\n').filter((l) => l.includes(`  ${id}  `));
          const cliState = lines.some((l) => l.startsWith('FAIL'))
            ? 'failed'
            : lines.some((l) => l.startsWith('OK'))
              ? 'verified'
              : 'absent';
          expect(cliState, `${name}: ${args.join(' ')}\n${checked.out}`).toBe(state);
        }
        if (expected === 'failed') expect(checked.out).toContain('CERTIFICATE_EXPIRED');
        expect(checked.code).toBe(expected === 'verified' ? 0 : 1);
      }
    } finally {
      await blind.close();
    }
  }, 300_000);

  it('the export bundle verifies offline at the time-stamps, and cosign verifies every Sigstore bundle with its RFC 3161 time-stamp', async () => {
    const trust = join(dir, 'trust');
    const file = join(dir, 'evidence.tar');
    const exported = await cli(['attestation', 'export', '--namespace', namespace, '--output', file]);
    expect(exported, exported.out).toMatchObject({ code: 0 });
    const ok = await cli(['verify', file, '--trust-bundle', join(trust, 'trust-bundle.json')], {
      TSA_TRUST_ANCHORS: undefined,
    });
    expect(ok.out).toContain('bundle verified');
    expect(ok.out).toContain(
      `${recordIds.length} attestations (${recordIds.length} with certificates checked at the time of their RFC 3161 time-stamp)`,
    );
    expect(ok.code).toBe(0);
    const blind = await cli(['verify', file, '--trust-anchor', join(trust, 'ca.pem')], {
      TSA_TRUST_ANCHORS: undefined,
    });
    expect(blind.code).toBe(1);
    expect(blind.out).toMatch(/FAIL {2}attestations\/\S+\/envelope\.json {2}CERTIFICATE_EXPIRED/);

    const entries = await tarEntries(await readFile(file));
    const blob = join(dir, 'blob');
    await writeFile(blob, 'any');
    const cosign = (bundlePath: string, key: string, type: string, withTimestamps: boolean) =>
      run(
        stack().tools.cosign,
        [
          'verify-blob-attestation',
          '--bundle',
          bundlePath,
          '--key',
          key,
          '--type',
          type,
          '--insecure-ignore-tlog=true',
          '--check-claims=false',
          ...(withTimestamps
            ? ['--use-signed-timestamps', '--trusted-root', join(trust, 'trusted_root.json')]
            : []),
          blob,
        ],
        { env: { ...process.env, TUF_ROOT: join(dir, 'tuf') } },
      ).then(
        (r) => ({ ok: true, out: r.stdout + r.stderr }),
        (e: { stdout?: string; stderr?: string }) => ({
          ok: false,
          out: `${e.stdout ?? ''}${e.stderr ?? ''}`,
        }),
      );
    let checked = 0;
    for (const e of entries.filter((x) => x.path.endsWith('/sigstore.json'))) {
      const record = JSON.parse(
        entries.find((x) => x.path === e.path.replace('sigstore.json', 'envelope.json'))!.content.toString(),
      ) as { predicate_type: string; signature: { key_id: string; timestamp: { signed_timestamp: string } } };
      const sigstore = JSON.parse(e.content.toString()) as {
        verificationMaterial: {
          timestampVerificationData: { rfc3161Timestamps: { signedTimestamp: string }[] };
        };
      };
      expect(sigstore.verificationMaterial.timestampVerificationData.rfc3161Timestamps).toEqual([
        { signedTimestamp: record.signature.timestamp.signed_timestamp },
      ]);
      const path = join(dir, 'sigstore.json');
      await writeFile(path, e.content);
      const key = join(trust, 'keys', `${record.signature.key_id.slice(7)}.pem`);
      const verified = await cosign(path, key, record.predicate_type, true);
      expect(verified.out, e.path).toContain('Verified OK');
      expect(verified.ok).toBe(true);
      // The time-stamp is what cosign checked: without it, --use-signed-timestamps finds none.
      sigstore.verificationMaterial.timestampVerificationData.rfc3161Timestamps = [];
      const bare = join(dir, 'sigstore-bare.json');
      await writeFile(bare, JSON.stringify(sigstore));
      expect((await cosign(bare, key, record.predicate_type, true)).ok, e.path).toBe(false);
      checked++;
    }
    expect(checked).toBe(recordIds.length);
  }, 300_000);
});
