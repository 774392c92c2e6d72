/**
 * The AIBOM's standard views end to end, on the real stack: the real controller records them with
 * the AIBOM of the sample Run (succeeded, and failed at `summarise`), the sidecar's API serves them
 * (`GET /v1/runs/{id}/artifacts/aibom?format=…`, behind the AIBOM's signed-export guard),
 * `service-ctl aibom generate --format` recomputes them byte for byte, `aibom fetch` and
 * `verify --aibom` check them offline, cosign verifies their DSSE records as attestations of the
 * view bytes under the standard predicate types, and the independent validators accept the served
 * bytes: cyclonedx-python-lib and @cyclonedx/cyclonedx-library (CycloneDX 1.7), the SPDX project's
 * tools-java (SPDX 3.0.1; the AI profile by our own check).
 */
import { execFile } from 'node:child_process';
import { mkdtemp, readFile, rm, unlink, writeFile } from 'node:fs/promises';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { Spec, Validation } from '@cyclonedx/cyclonedx-library';
import type { FastifyInstance } from 'fastify';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { driveRun } from '../../hack/sample-pipeline.ts';
import { repoRoot } from '../../hack/stack/stack.ts';
import {
  declarationProblems,
  serializeView,
  spdxProfileProblems,
  VIEW_FORMAT_NAMES,
  type ViewFormat,
} from '../../src/aibom/views/index.ts';
import { canonicalJson, sha256Hex } from '../../src/attest/index.ts';
import type { Run } from '../../src/crd/run.ts';
import type { RunningController } from '../../src/controller/manager.ts';
import { startTestController } from '../helpers/controller.ts';
import type { AibomMetadata } from '../../src/recorder/index.ts';
import { signerFromPem, type KeySigner } from '../../src/signing/index.ts';
import { createVaultPool, migrate, openVault, type Vault } from '../../src/vault/index.ts';
import { stackApp } from '../helpers/app.ts';
import { stackBlobs } from '../helpers/blobs.ts';
import { tarEntries } from '../helpers/export.ts';
import { createRun, getRun, poll, sampleRunSpec } from '../helpers/controller-process.ts';
import { generateDevPki } from '../helpers/pki.ts';
import { createNamespace } from '../helpers/rbac.ts';
import { freshDatabase, kubeConfig, stack, uniqueName } from '../helpers/stack.ts';

const exec = promisify(execFile);
const strict17 = new Validation.JsonStrictValidator(Spec.Version.v1dot7);
const ns = uniqueName('views');
let dbUrl: string;
let vault: Vault;
let signer: KeySigner;
let controller: RunningController;
let app: FastifyInstance;
let apiUrl: string;
let dir: string;
let anchor: string;
let verifiers: Record<string, string>;

interface Result {
  code: number;
  stdout: string;
  stderr: string;
}

async function run(file: string, args: string[], env: Record<string, string> = {}): Promise<Result> {
  try {
    const { stdout, stderr } = await exec(file, args, {
      env: { ...process.env, ...env },
      maxBuffer: 64 * 1024 * 1024,
    });
    return { code: 0, stdout, stderr };
  } catch (err) {
    const e = err as { code?: number; stdout?: string; stderr?: string };
    return { code: typeof e.code === 'number' ? e.code : -1, stdout: e.stdout ?? '', stderr: e.stderr ?? '' };
  }
}

const cli = (args: string[]) =>
  run(process.execPath, [`${repoRoot}/src/bin/service-ctl.ts`, ...args], {
    SERVICE_API_URL: apiUrl,
    SERVICE_TOKEN: stack().kube.tokens.admin,
    DATABASE_URL: dbUrl,
  });

const api = (path: string) =>
  fetch(`${apiUrl}${path}`, { headers: { authorization: `Bearer ${stack().kube.tokens.admin}` } });

const aibomReady = (r: Run): boolean =>
  r.status?.conditions?.some((c) => c.type === 'AIBOMReady' && c.status === 'True') ?? false;

async function completedRun(name: string, fail?: string): Promise<Run> {
  await createRun(ns, name, await sampleRunSpec());
  await driveRun(kubeConfig('admin'), ns, name, { stepDelayMs: 10, ...(fail !== undefined ? { fail } : {}) });
  return poll(async () => {
    const r = await getRun(ns, name);
    return aibomReady(r) ? r : undefined;
  }, `${name} with its AIBOM`);
}

/** The record id → digest of every record the run's AIBOM lists (what evidence may name). */
async function recordsOf(meta: AibomMetadata): Promise<Map<string, string>> {
  const records = await vault.attestations.getMany(meta.attestation_ids);
  return new Map([...records.values()].map((r) => [r.id, r.digest]));
}

beforeAll(async () => {
  dbUrl = await freshDatabase('views');
  await migrate(dbUrl);
  vault = await openVault(createVaultPool(dbUrl));
  signer = signerFromPem(await generateDevPki());
  await createNamespace(ns);
  dir = await mkdtemp(join(tmpdir(), 'views-test-'));
  anchor = join(dir, 'ca.crt');
  await writeFile(anchor, signer.caCertificates.map((c) => c.toString()).join('\n'));
  controller = startTestController({
    vault,
    signer,
    leasePrefix: 'views',
    watchNamespace: ns,
  });
  app = await stackApp(vault, signer.caCertificates, { signer });
  await app.listen({ host: '127.0.0.1', port: 0 });
  apiUrl = `http://127.0.0.1:${(app.server.address() as AddressInfo).port}`;
  const ensured = await run('bash', [join(repoRoot, 'hack/ensure-verifiers.sh')]);
  expect(ensured.code).toBe(0);
  verifiers = Object.fromEntries(
    ensured.stdout
      .trim()
      .split('\n')
      .map((l) => l.split('=') as [string, string]),
  );
}, 600_000);

afterAll(async () => {
  await controller?.stop();
  await app?.close();
  await vault?.close();
  if (dir !== undefined) await rm(dir, { recursive: true, force: true });
});

describe.each([
  ['succeeded', undefined],
  ['failed', 'summarise'],
] as const)('the views of the sample Run, %s', { timeout: 600_000 }, (label, fail) => {
  let runId: string;
  let meta: AibomMetadata;
  const served = new Map<ViewFormat, Buffer>();
  beforeAll(async () => {
    const done = await completedRun(`sample-${label}`, fail);
    runId = done.metadata.uid;
    meta = ((await (await api(`/v1/runs/${runId}`)).json()) as { artifacts: { aibom: AibomMetadata } })
      .artifacts.aibom;
  }, 300_000);

  it('are recorded with the AIBOM, once: two signed records listed in the metadata, after the AIBOM record', async () => {
    // (JSONB keeps no member order.)
    expect(Object.keys(meta.views ?? {}).sort()).toEqual([...VIEW_FORMAT_NAMES].sort());
    const records = await vault.attestations.ofRun(ns, runId);
    const aibomAt = records.findIndex((r) => r.kind === 'aibom');
    // The AIBOM's batch: its record, its two views, then the AIBOM blob's artifact record (issue 22).
    const after = records.slice(aibomAt + 1);
    expect(after.map((r) => [r.kind, r.predicateType])).toEqual([
      ['artifact', 'https://cyclonedx.org/bom'],
      ['artifact', 'https://spdx.dev/Document/v3'],
      ['artifact', 'https://vault.service.dev/attestations/artifact/v1'],
    ]);
    expect(after[2]!.subjects).toEqual([`artifact:${runId}:aibom`]);
    expect(after.slice(0, 2).map((r) => r.id)).toEqual(
      VIEW_FORMAT_NAMES.map((f) => meta.views![f]!.attestation_id),
    );
    // The AIBOM itself is unchanged by them: it lists only the records before it.
    expect(meta.attestation_ids).toEqual(records.slice(0, aibomAt).map((r) => r.id));
  });

  it('are served: the recorded bytes under ?format, the default still the AIBOM payload', async () => {
    const plain = await api(`/v1/runs/${runId}/artifacts/aibom`);
    expect(plain.status).toBe(200);
    expect(`sha256:${sha256Hex(Buffer.from(await plain.arrayBuffer()))}`).toBe(meta.digest);
    const explicit = await api(`/v1/runs/${runId}/artifacts/aibom?format=aibom`);
    expect(`sha256:${sha256Hex(Buffer.from(await explicit.arrayBuffer()))}`).toBe(meta.digest);
    for (const format of VIEW_FORMAT_NAMES) {
      const res = await api(`/v1/runs/${runId}/artifacts/aibom?format=${format}`);
      expect(res.status, format).toBe(200);
      const bytes = Buffer.from(await res.arrayBuffer());
      served.set(format, bytes);
      const entry = meta.views![format]!;
      expect(`sha256:${sha256Hex(bytes)}`).toBe(entry.digest);
      expect(res.headers.get('content-type')).toBe(entry.media_type);
      expect(res.headers.get('x-attestation-id')).toBe(entry.attestation_id);
      // The bytes are the JCS of the view record's signed predicate.
      const record = (await (await api(`/v1/attestations/${entry.attestation_id}`)).json()) as {
        predicate: unknown;
        predicate_type: string;
      };
      expect(serializeView(record.predicate).equals(bytes)).toBe(true);
      expect(record.predicate_type).toBe(entry.predicate_type);
    }
    const bad = await api(`/v1/runs/${runId}/artifacts/aibom?format=spdx-2.3`);
    expect(bad.status).toBe(400);
    expect(((await bad.json()) as { code: string }).code).toBe('VALIDATION_FAILED');
    // Audited like the AIBOM's download: the view named, its record among the ids.
    const audit = await vault.audit.list({ namespaces: [ns], action: 'artifact.download', limit: 1000 });
    for (const format of VIEW_FORMAT_NAMES) {
      const row = audit.find(
        (a) => a.object?.endsWith(`aibom.json?format=${format}`) && a.object.includes(runId),
      );
      expect(row?.attestationIds, format).toContain(meta.views![format]!.attestation_id);
      expect(row?.manifestDigest).toBe(meta.c2pa_manifest.digest);
    }
  });

  it('pass both CycloneDX libraries, tools-java and our checks; evidence names the run records by digest', async () => {
    const cdx = served.get('cyclonedx-1.7')!;
    const spdx = served.get('spdx-3.0.1')!;
    expect(await strict17.validate(cdx.toString('utf8'))).toBeNull();
    expect(declarationProblems(JSON.parse(cdx.toString('utf8')), await recordsOf(meta))).toEqual([]);
    expect(spdxProfileProblems(JSON.parse(spdx.toString('utf8')))).toEqual([]);
    const cdxFile = join(dir, `${label}.cdx.json`);
    const spdxFile = join(dir, `${label}.spdx.json`);
    await writeFile(cdxFile, cdx);
    await writeFile(spdxFile, spdx);
    const py = await run(verifiers['cyclonedx-python']!, [
      join(repoRoot, 'test/conformance/views/cdx_validate.py'),
      cdxFile,
    ]);
    expect(py.stdout.trim()).toBe(`valid ${cdxFile}`);
    const java = await run('java', ['-jar', verifiers['spdx-tools-java']!, 'Verify', spdxFile, 'JSONLD']);
    expect(java.stdout.trim()).toBe('This SPDX Document is valid.');
    expect(java.code).toBe(0);
  });

  it('are DSSE attestations of their bytes under the standard predicate types (cosign)', async () => {
    const pub = join(dir, 'signer.pub');
    await writeFile(pub, signer.publicKey.export({ type: 'spki', format: 'pem' }));
    for (const format of VIEW_FORMAT_NAMES) {
      const entry = meta.views![format]!;
      const record = (await (await api(`/v1/attestations/${entry.attestation_id}`)).json()) as {
        envelope: unknown;
      };
      const sig = join(dir, `${label}-${format}.dsse.json`);
      const blob = join(dir, `${label}-${format}.bytes`);
      await writeFile(sig, JSON.stringify(record.envelope));
      await writeFile(blob, served.get(format)!);
      const args = [
        'verify-blob-attestation',
        '--key',
        pub,
        '--signature',
        sig,
        '--type',
        entry.predicate_type,
      ];
      const env = { COSIGN_EXPERIMENTAL: '0', TUF_ROOT: join(dir, 'tuf') };
      const res = await run(stack().tools.cosign, [...args, '--insecure-ignore-tlog=true', blob], env);
      expect(`${res.stdout}${res.stderr}`, format).toContain('Verified OK');
      // Other bytes are not what it attests.
      await writeFile(blob, Buffer.concat([served.get(format)!, Buffer.from(' ')]));
      expect(
        (await run(stack().tools.cosign, [...args, '--insecure-ignore-tlog=true', blob], env)).code,
      ).not.toBe(0);
    }
  });

  it('service-ctl aibom generate --format recomputes each view byte for byte', async () => {
    for (const format of VIEW_FORMAT_NAMES) {
      const r = await cli(['aibom', 'generate', '--run', runId, '--format', format]);
      expect(r.code, r.stderr).toBe(0);
      expect(Buffer.from(canonicalJson(JSON.parse(r.stdout)), 'utf8').equals(served.get(format)!)).toBe(true);
    }
    const refused = await cli([
      'aibom',
      'generate',
      '--run',
      runId,
      '--format',
      'spdx-3.0.1',
      '--policy-pack',
      'x',
    ]);
    expect(refused.code).toBe(2);
    expect(refused.stderr).toMatch(/takes no --policy-pack/);
  });

  it('aibom fetch + verify --aibom check them offline, and fail a changed view or a missing record', async () => {
    const out = join(dir, `fetched-${label}`);
    const fetched = await cli(['aibom', 'fetch', '--run', runId, '--out', out]);
    expect(fetched.code, fetched.stderr).toBe(0);
    const ok = await cli(['verify', '--aibom', out, '--trust-anchor', anchor]);
    expect(ok.code, ok.stdout + ok.stderr).toBe(0);
    for (const format of VIEW_FORMAT_NAMES) expect(ok.stdout).toContain(`view       ${format}`);

    const file = join(out, 'aibom.cdx-1.7.json');
    const original = await readFile(file);
    const changed = JSON.parse(original.toString('utf8')) as {
      declarations: { claims: { predicate: string }[] };
    };
    changed.declarations.claims[0]!.predicate = 'every guardrail was enforced';
    await writeFile(file, JSON.stringify(changed));
    const tampered = await cli(['verify', '--aibom', out, '--trust-anchor', anchor]);
    expect(tampered.code).toBe(1);
    expect(tampered.stdout + tampered.stderr).toMatch(/VIEW_DIGEST_MISMATCH/);
    await writeFile(file, original);

    await unlink(join(out, 'aibom.spdx-3.0.1.record.json'));
    const missing = await cli(['verify', '--aibom', out, '--trust-anchor', anchor]);
    expect(missing.code).toBe(1);
    expect(missing.stdout + missing.stderr).toMatch(/VIEW_MISSING/);
  });
  it.runIf(label === 'failed')('the pack of the step that never ran is not claimed as met', async () => {
    const res = await api(`/v1/runs/${runId}/artifacts/aibom?format=cyclonedx-1.7`);
    const doc = (await res.json()) as {
      declarations: {
        attestations: {
          summary: string;
          map: { claims?: string[]; counterClaims?: string[]; conformance: { score?: number } }[];
        }[];
      };
    };
    const egress = doc.declarations.attestations.find((a) => a.summary.includes('egress@0.3.0'))!;
    expect(egress.map.map((m) => [m.claims, m.counterClaims?.length, m.conformance.score])).toEqual([
      [undefined, 1, 0],
    ]);
  });
});

describe('export bundles carry the views, and service-ctl verify checks them', { timeout: 600_000 }, () => {
  it('the evidence bundle (audit export) and an export of the whole run verify; a changed view does not', async () => {
    const done = await completedRun('bundled');
    const id = done.metadata.uid;
    const meta = done.status?.artifacts?.aibom as AibomMetadata;
    const evidence = join(dir, 'evidence.tar');
    const exported = await cli(['audit', 'export', '--run', id, '--output', evidence]);
    expect(exported.code, exported.stderr).toBe(0);
    const entries = await tarEntries(await readFile(evidence));
    const paths = entries.map((e) => e.path);
    for (const format of VIEW_FORMAT_NAMES) {
      const entry = meta.views![format]!;
      expect(paths).toContain(`attestations/${entry.attestation_id}/envelope.json`);
      const file = entries.find((e) => e.path === `runs/${id}/${entry.name}`);
      expect(`sha256:${sha256Hex(file!.content)}`, format).toBe(entry.digest);
    }
    const ok = await cli(['verify', evidence, '--trust-anchor', anchor]);
    expect(ok.code, ok.stdout + ok.stderr).toBe(0);

    // Every record of the run: the views' evidence must name records of the bundle, digests equal.
    const whole = join(dir, 'run.tar');
    const all = await cli(['attestation', 'export', '--run', id, '--output', whole]);
    expect(all.code, all.stderr).toBe(0);
    const verified = await cli(['verify', whole, '--trust-anchor', anchor]);
    expect(verified.code, verified.stdout + verified.stderr).toBe(0);

    // The same bundle with one claim of the CycloneDX view changed: the view is no longer what
    // its record signs (and the indexes and the bundle manifest no longer match either).
    const original = await readFile(whole);
    const viewEntry = (await tarEntries(original)).find((e) => e.path === `runs/${id}/aibom.cdx-1.7.json`)!;
    const text = viewEntry.content.toString('latin1');
    const changed = text.replace('"target":"run:', '"target":"run-');
    expect(changed).not.toBe(text);
    const tampered = Buffer.from(original);
    tampered.write(changed, viewEntry.offset + 512, 'latin1');
    const bad = join(dir, 'run-tampered.tar');
    await writeFile(bad, tampered);
    const failed = await cli(['verify', bad, '--trust-anchor', anchor]);
    expect(failed.code).toBe(1);
    expect(failed.stdout).toMatch(new RegExp(`FAIL  runs/${id}/aibom\\.cdx-1\\.7\\.json  VIEW_`));
  });
});

describe('the signed-export guard applies to the views', () => {
  it('a view does not leave while the AIBOM manifest does not verify', async () => {
    const done = await completedRun('guarded');
    const meta = done.status?.artifacts?.aibom as AibomMetadata;
    const blobs = stackBlobs();
    const manifest = (await blobs.get(meta.c2pa_manifest.key))!;
    const flipped = Buffer.from(manifest);
    flipped[flipped.length - 10]! ^= 0xff;
    await blobs.put(meta.c2pa_manifest.key, flipped, 'application/c2pa');
    const res = await api(`/v1/runs/${done.metadata.uid}/artifacts/aibom?format=spdx-3.0.1`);
    expect(res.status).toBe(409);
    expect(((await res.json()) as { code: string }).code).toBe('UNSIGNED_EXPORT_BLOCKED');
  }, 300_000);
});
