/**
 * service-ctl as a user runs it (the real binary, a child process) against the sidecar's API and a
 * controller on the real stack: runs named by NAMESPACE/NAME wherever a run is named, the API route
 * behind that (same authorisation as GET /v1/runs/{id}), -o json|yaml|table, and `query` with the
 * API's filters, a page at a time, --all (NDJSON that `verify` reads) and --watch.
 */
import { execFile, spawn } from 'node:child_process';
import { mkdtemp, readdir, readFile, writeFile } from 'node:fs/promises';
import type { AddressInfo } from 'node:net';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { CustomObjectsApi, RbacAuthorizationV1Api } from '@kubernetes/client-node';
import type { FastifyInstance } from 'fastify';
import { load as loadYaml } from 'js-yaml';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { driveRun } from '../../hack/sample-pipeline.ts';
import { repoRoot } from '../../hack/stack/stack.ts';
import { canonicalJson } from '../../src/attest/index.ts';
import type { Run } from '../../src/crd/run.ts';
import type { RunningController } from '../../src/controller/manager.ts';
import { startTestController } from '../helpers/controller.ts';
import { signerFromPem, type KeySigner } from '../../src/signing/index.ts';
import { createVaultPool, migrate, openVault, type Vault } from '../../src/vault/index.ts';
import { stackApp } from '../helpers/app.ts';
import { stackBlobs } from '../helpers/blobs.ts';
import { createRun, getRun, poll, sampleRunSpec } from '../helpers/controller-process.ts';
import { generateDevPki } from '../helpers/pki.ts';
import { createNamespace } from '../helpers/rbac.ts';
import { freshDatabase, kubeConfig, stack, uniqueName } from '../helpers/stack.ts';

const exec = promisify(execFile);
const ns = uniqueName('cli');
let dbUrl: string;
let vault: Vault;
let signer: KeySigner;
let controller: RunningController;
let app: FastifyInstance;
let apiUrl: string;
let dir: string;

interface Result {
  code: number;
  stdout: string;
  stderr: string;
}

async function cli(args: string[], env: Record<string, string> = {}): Promise<Result> {
  try {
    const { stdout, stderr } = await exec(process.execPath, [`${repoRoot}/src/bin/service-ctl.ts`, ...args], {
      env: {
        ...process.env,
        SERVICE_API_URL: apiUrl,
        SERVICE_TOKEN: stack().kube.tokens.admin,
        DATABASE_URL: dbUrl,
        ...env,
      },
      maxBuffer: 64 * 1024 * 1024,
    });
    return { code: 0, stdout, stderr };
  } catch (err) {
    const e = err as { code: number; stdout: string; stderr: string };
    return { code: e.code, stdout: e.stdout, stderr: e.stderr };
  }
}

const ok = async (args: string[], env?: Record<string, string>): Promise<string> => {
  const r = await cli(args, env);
  expect(r, `service-ctl ${args.join(' ')}`).toMatchObject({ code: 0 });
  return r.stdout;
};

const aibomReady = (r: Run): boolean =>
  r.status?.conditions?.some((c) => c.type === 'AIBOMReady' && c.status === 'True') ?? false;

async function completedRun(name: string): Promise<Run> {
  await createRun(ns, name, await sampleRunSpec());
  await driveRun(kubeConfig('admin'), ns, name, { stepDelayMs: 10 });
  return poll(async () => {
    const r = await getRun(ns, name);
    return aibomReady(r) ? r : undefined;
  }, `${name} with its AIBOM`);
}

const api = (path: string, token: string) =>
  fetch(`${apiUrl}${path}`, { headers: { authorization: `Bearer ${token}` } });

beforeAll(async () => {
  dbUrl = await freshDatabase('cli');
  await migrate(dbUrl);
  vault = await openVault(createVaultPool(dbUrl));
  signer = signerFromPem(await generateDevPki());
  await createNamespace(ns);
  dir = await mkdtemp(join(stack().root, 'cli-test-'));
  controller = startTestController({
    vault,
    signer,
    leasePrefix: 'cli',
    watchNamespace: ns,
  });
  // The signer makes exports work (signed bundles required): the CLI's downloads are tested too.
  app = await stackApp(vault, signer.caCertificates, { signer });
  await app.listen({ host: '127.0.0.1', port: 0 });
  apiUrl = `http://127.0.0.1:${(app.server.address() as AddressInfo).port}`;
});

afterAll(async () => {
  await controller?.stop();
  await app?.close();
  await vault?.close();
});

// Each command is a Node process start: generous time for busy machines.
describe('a run named NAMESPACE/NAME', { timeout: 300_000 }, () => {
  let run: Run;
  beforeAll(async () => {
    run = await completedRun('named');
  }, 180_000);

  it('get: the same run detail as by UUID; -o yaml the same data; -o table one row', async () => {
    const byId = JSON.parse(await ok(['get', '--run', run.metadata.uid])) as Record<string, unknown>;
    const byName = JSON.parse(await ok(['get', '--run', `${ns}/named`])) as Record<string, unknown>;
    expect(byName).toEqual(byId);
    expect(byName).toMatchObject({ id: run.metadata.uid, namespace: ns, name: 'named', phase: 'Succeeded' });
    expect(loadYaml(await ok(['get', '--run', `${ns}/named`, '-o', 'yaml']))).toEqual(byId);
    const [head, row, ...rest] = (await ok(['get', '--run', `${ns}/named`, '-o', 'table']))
      .trimEnd()
      .split('\n');
    expect(head!.split(/\s+/)).toEqual([
      'NAMESPACE',
      'NAME',
      'ID',
      'PHASE',
      'STEPS',
      'AIBOM',
      'LOCATION',
      'TRANSPARENCY',
    ]);
    const aibom = run.status?.artifacts?.aibom as { digest: string; bucket: string; key: string };
    expect(row!.split(/\s+/)).toEqual([
      ns,
      'named',
      run.metadata.uid,
      'Succeeded',
      '3',
      aibom.digest,
      `s3://${aibom.bucket}/${aibom.key}`,
      '<none>',
    ]);
    expect(rest).toEqual([]);
  });

  it('aibom fetch and aibom generate take it too: the fetched and the regenerated AIBOM are the stored one', async () => {
    const out = join(dir, 'fetched');
    await ok(['aibom', 'fetch', '--run', `${ns}/named`, '--out', out]);
    const anchor = join(dir, 'ca.crt');
    await writeFile(anchor, signer.caCertificates.map((c) => c.toString()).join('\n'));
    expect(await ok(['verify', '--aibom', out, '--trust-anchor', anchor])).toContain('AIBOM verified');
    const byName = await ok(['aibom', 'generate', '--run', `${ns}/named`]);
    expect(byName).toBe(await ok(['aibom', 'generate', '--run', run.metadata.uid]));
    expect(JSON.parse(byName)).toMatchObject({ metadata: { run_id: run.metadata.uid } });
  });

  it('aibom fetch into a directory it cannot make: one line and exit 1, never a hang', async () => {
    // Node's recursive mkdir loops forever on /proc/<new name> (mkdir(2) answers ENOENT there).
    const file = join(dir, 'a-file');
    await writeFile(file, 'not a directory');
    for (const [out, why] of [
      [`/proc/aibom-vault-${process.pid}`, /cannot create directory \/proc\/aibom-vault-\d+: ENOENT/],
      [file, /cannot create directory .*a-file: a file is in the way/],
      [join(file, 'sub'), /cannot create directory .*a-file\/sub: ENOTDIR/],
    ] as const) {
      const got = await cli(['aibom', 'fetch', '--run', `${ns}/named`, '--out', out]);
      expect(got.code).toBe(1);
      expect(got.stderr.trim().split('\n')).toEqual([expect.stringMatching(why) as unknown]);
    }
  });

  it('an export it cannot write is refused before it is asked for: one line, no audit row, no stray file', async () => {
    const rows = async () => (await vault.audit.list({ namespaces: null, limit: 1000 })).length;
    const before = await rows();
    const missing = join(dir, 'no-such-dir', 'bundle.tar');
    for (const [args, code, why] of [
      [
        ['attestation', 'export', '--run', `${ns}/named`, '--output', dir],
        2,
        /--output .* is a directory; name a file in it/,
      ],
      [['audit', 'export', '--run', `${ns}/named`, '--output', `${dir}/`], 2, /--output needs a file name/],
      [
        ['attestation', 'export', '--run', `${ns}/named`, '--output', missing],
        1,
        /cannot write .*bundle\.tar: ENOENT/,
      ],
      [
        ['audit', 'export', '--run', `${ns}/named`, '--output', `/proc/evidence-${process.pid}.tar`],
        1,
        /ENOENT/,
      ],
    ] as const) {
      const got = await cli([...args]);
      expect(got.code, args.join(' ')).toBe(code);
      expect(got.stderr.trim().split('\n')).toEqual([expect.stringMatching(why) as unknown]);
    }
    // Nothing reached the service (it writes a row for every export it serves), nothing was left behind.
    expect(await rows()).toBe(before);
    expect((await readdir(dir)).filter((f) => f.endsWith('.part'))).toEqual([]);
    // The same commands with a writable name do export, and the service writes its rows.
    const bundle = join(dir, 'named.tar');
    expect(await ok(['attestation', 'export', '--run', `${ns}/named`, '--output', bundle])).toMatch(
      /^wrote .*named\.tar: \d+ attestations/,
    );
    expect(await rows()).toBeGreaterThan(before);
    expect((await readdir(dir)).filter((f) => f.endsWith('.part'))).toEqual([]);
  });

  it('an unknown name is one line and exit 1; a malformed one is a usage error (exit 2)', async () => {
    const missing = await cli(['get', '--run', `${ns}/no-such-run`]);
    expect(missing.code).toBe(1);
    expect(missing.stderr.trim().split('\n')).toEqual([expect.stringMatching(/404 NOT_FOUND/) as unknown]);
    const generate = await cli(['aibom', 'generate', '--run', `${ns}/no-such-run`]);
    expect(generate).toMatchObject({ code: 1 });
    expect(generate.stderr).toMatch(/not found/);
    expect(await cli(['aibom', 'fetch', '--run', 'No/Such'])).toMatchObject({ code: 2 });
  });

  it('GET /v1/namespaces/{ns}/runs/{name}: authorised as GET /v1/runs/{id} (404 unseen, 403 list-only)', async () => {
    const tokens = stack().kube.tokens;
    const path = `/v1/namespaces/${ns}/runs/named`;
    const admin = await api(path, tokens.admin);
    expect(admin.status).toBe(200);
    expect(((await admin.json()) as { id: string }).id).toBe(run.metadata.uid);
    // alice may not see runs here: the name's existence is not told (same answer as a missing one).
    for (const p of [path, `/v1/namespaces/${ns}/runs/no-such-run`, `/v1/runs/${run.metadata.uid}`]) {
      const r = await api(p, tokens.alice);
      expect(r.status, p).toBe(404);
      expect(((await r.json()) as { code: string }).code).toBe('NOT_FOUND');
    }
    // bob may list runs here but not get them: 403, by name as by id.
    await kubeConfig('admin')
      .makeApiClient(RbacAuthorizationV1Api)
      .createNamespacedRole({
        namespace: ns,
        body: {
          metadata: { name: 'runs-lister' },
          rules: [{ apiGroups: ['vault.service.dev'], resources: ['runs'], verbs: ['list'] }],
        },
      });
    await kubeConfig('admin')
      .makeApiClient(RbacAuthorizationV1Api)
      .createNamespacedRoleBinding({
        namespace: ns,
        body: {
          metadata: { name: 'bob-runs-lister' },
          roleRef: { apiGroup: 'rbac.authorization.k8s.io', kind: 'Role', name: 'runs-lister' },
          subjects: [{ apiGroup: 'rbac.authorization.k8s.io', kind: 'User', name: 'bob' }],
        },
      });
    await poll(async () => (await api(path, tokens.bob)).status === 403, 'bob answered 403');
    expect((await api(`/v1/runs/${run.metadata.uid}`, tokens.bob)).status).toBe(403);
    const bad = await api(`/v1/namespaces/${ns}/runs/Not_A_Name`, tokens.admin);
    expect(bad.status).toBe(400);
    expect(((await bad.json()) as { code: string }).code).toBe('VALIDATION_FAILED');
  });

  it('is the most recent run of that name when a Run was deleted and created again', async () => {
    const crs = kubeConfig('admin').makeApiClient(CustomObjectsApi);
    const first = await completedRun('again');
    await crs.deleteNamespacedCustomObject({
      group: 'vault.service.dev',
      version: 'v1',
      namespace: ns,
      plural: 'runs',
      name: 'again',
    });
    await poll(async () => {
      try {
        await getRun(ns, 'again');
        return undefined;
      } catch {
        return true;
      }
    }, 'the first Run gone');
    const second = await createRun(ns, 'again', await sampleRunSpec());
    expect(second.metadata.uid).not.toBe(first.metadata.uid);
    const shown = await poll(async () => {
      const r = await cli(['get', '--run', `${ns}/again`]);
      return r.code === 0 && (JSON.parse(r.stdout) as { id: string }).id === second.metadata.uid
        ? r
        : undefined;
    }, 'the new Run mirrored');
    expect(JSON.parse(shown.stdout)).toMatchObject({ id: second.metadata.uid, phase: null });
    // The first run is still there by its id.
    expect(JSON.parse(await ok(['get', '--run', first.metadata.uid]))).toMatchObject({ phase: 'Succeeded' });
  });
});

describe('service-ctl query', { timeout: 300_000 }, () => {
  let run: Run;
  let count: number;
  beforeAll(async () => {
    run = await completedRun('queried');
    count = run.status?.attestations?.count ?? 0;
    expect(count).toBeGreaterThan(0);
  }, 180_000);

  it('a page as a table: one row per record of the run, short predicate names', async () => {
    const r = await cli(['query', '--run', `${ns}/queried`]);
    expect(r.code).toBe(0);
    const [head, ...rows] = r.stdout.trimEnd().split('\n');
    expect(head!.split(/\s+/)).toEqual([
      'ID',
      'NAMESPACE',
      'KIND',
      'SUBJECT',
      'PREDICATE',
      'CREATED',
      'TRANSPARENCY',
    ]);
    expect(rows).toHaveLength(count);
    expect(rows.filter((l) => /\saibom\s/.test(l))).toHaveLength(1);
    expect(r.stdout).toContain(' step/v1 ');
    expect(r.stdout).not.toContain('https://');
    expect(r.stderr).toBe('');
  });

  it('the API filters: kind, policy pack, step, subject, time window', async () => {
    const ids = async (...args: string[]) =>
      (
        JSON.parse(await ok(['query', '--run', run.metadata.uid, '-o', 'json', ...args])) as {
          items: { id: string; kind: string; step_id: string | null }[];
        }
      ).items;
    expect((await ids('--kind', 'aibom')).map((i) => i.kind)).toEqual(['aibom']);
    expect((await ids('--kind', 'step')).length).toBe(3);
    const summarise = await ids('--step', 'summarise');
    expect(summarise.length).toBeGreaterThan(0);
    expect(summarise.every((i) => i.step_id === 'summarise')).toBe(true);
    expect(await ids('--subject', `run:${run.metadata.uid}`)).not.toEqual([]);
    expect(await ids('--policy-pack', 'no-such-pack')).toEqual([]);
    expect(await ids('--to', '2000-01-01T00:00:00Z')).toEqual([]);
    expect((await ids('--from', '2000-01-01T00:00:00Z')).length).toBe(count);
    const bad = await cli(['query', '--from', 'yesterday']);
    expect(bad.code).toBe(2);
    expect(bad.stderr.trim().split('\n')).toHaveLength(1);
  });

  it('pages: --limit gives a cursor, --cursor the rest; yaml the same page', async () => {
    const first = JSON.parse(
      await ok(['query', '--run', run.metadata.uid, '--limit', '2', '-o', 'json']),
    ) as {
      items: { id: string }[];
      next_cursor: string;
    };
    expect(first.items).toHaveLength(2);
    expect(first.next_cursor).toEqual(expect.any(String));
    const table = await cli(['query', '--run', run.metadata.uid, '--limit', '2']);
    expect(table.stderr).toContain(`more: --cursor ${first.next_cursor}`);
    const rest = JSON.parse(
      await ok([
        'query',
        '--run',
        run.metadata.uid,
        '--limit',
        '1000',
        '--cursor',
        first.next_cursor,
        '-o',
        'json',
      ]),
    ) as { items: { id: string }[]; next_cursor: string | null };
    expect(rest.next_cursor).toBeNull();
    expect([...first.items, ...rest.items].map((i) => i.id)).toHaveLength(count);
    expect(loadYaml(await ok(['query', '--run', run.metadata.uid, '--limit', '2', '-o', 'yaml']))).toEqual(
      first,
    );
  });

  it('--all streams every record as NDJSON, which service-ctl verify checks', async () => {
    const ndjson = await ok(['query', '--run', `${ns}/queried`, '--all']);
    const lines = ndjson.trimEnd().split('\n');
    // Every record, then the trailer: count and digest of the lines before it.
    expect(lines).toHaveLength(count + 1);
    expect(JSON.parse(lines.at(-1)!)).toMatchObject({ trailer: { count } });
    const file = join(dir, 'records.ndjson');
    await writeFile(file, ndjson);
    const key = join(dir, 'signer.pem');
    await writeFile(key, signer.certificateChain![0]!.toString());
    const verified = await ok(['verify', file, '--key', key]);
    expect(verified).toContain(`${count} verified, 0 failed`);
    // A file cut short (its trailer lost) does not pass.
    await writeFile(file, `${lines.slice(0, -2).join('\n')}\n`);
    expect((await cli(['verify', file, '--key', key])).code).not.toBe(0);
  });

  it('--watch prints what is there, then each new record once as it is stored', async () => {
    const child = spawn(
      process.execPath,
      [
        `${repoRoot}/src/bin/service-ctl.ts`,
        'query',
        '--namespace',
        ns,
        '--kind',
        'run',
        '--watch',
        '--interval',
        '0.2',
      ],
      { env: { ...process.env, SERVICE_API_URL: apiUrl, SERVICE_TOKEN: stack().kube.tokens.admin } },
    );
    let out = '';
    child.stdout.on('data', (d: Buffer) => (out += d.toString()));
    try {
      const ids = () =>
        out
          .split('\n')
          .filter((l) => l !== '')
          .map((l) => (JSON.parse(l) as { id: string; run_id: string }).run_id);
      const before = await poll(
        () => (ids().length >= 2 ? ids() : undefined),
        'the run records already there',
      );
      const watched = await completedRun('watched');
      const after = await poll(
        () => (ids().includes(watched.metadata.uid) ? ids() : undefined),
        'the new run record printed',
      );
      expect(after.slice(0, before.length)).toEqual(before);
      // Each record once, though it was asked for again and again.
      expect(new Set(after).size).toBe(after.length);
    } finally {
      child.kill('SIGTERM');
    }
  });
});

describe('service-ctl aibom generate --policy-pack and --output', { timeout: 300_000 }, () => {
  let run: Run;
  let storedBytes: Buffer;
  beforeAll(async () => {
    // A run-level pack, and a first step naming its own: the pack found in the step specs is the
    // run's (the spec: "default is the pack found in the step specs, else baseline"); the step
    // naming none carries the run-level pack.
    await createRun(ns, 'packs', {
      policyPack: { name: 'house', version: '3', guardrails: ['pii-redaction'] },
      steps: [
        {
          id: 'answer',
          model: { name: 'm', provider: 'p', version: '1' },
          policyPack: { name: 'strict', version: '2', guardrails: ['toxicity'] },
        },
        { id: 'post', dependsOn: ['answer'], tool: { name: 'curl', command: ['curl'] } },
      ],
    });
    await driveRun(kubeConfig('admin'), ns, 'packs', { stepDelayMs: 10 });
    run = await poll(async () => {
      const r = await getRun(ns, 'packs');
      return aibomReady(r) ? r : undefined;
    }, 'packs with its AIBOM');
    const key = (run.status!.artifacts!.aibom as { key: string }).key;
    storedBytes = (await stackBlobs().get(key))!;
  }, 180_000);

  it('without the flag: the pack of the step specs, the stored bytes; the help says the same', async () => {
    const stored = JSON.parse(storedBytes.toString('utf8')) as {
      metadata: { policy_pack: string; policy_pack_version: string };
      components: {
        models: { properties: { policy_pack: string } }[];
        policies: { pack: string; version: string }[];
      };
    };
    expect(stored.metadata).toMatchObject({ policy_pack: 'strict', policy_pack_version: '2' });
    expect(stored.components.models[0]!.properties.policy_pack).toBe('strict');
    expect(stored.components.policies.map((p) => `${p.pack}@${p.version}`)).toEqual(['strict@2', 'house@3']);
    const out = await ok(['aibom', 'generate', '--run', run.metadata.uid]);
    expect(Buffer.from(canonicalJson(JSON.parse(out))).equals(storedBytes)).toBe(true);
    const help = (await ok(['aibom', 'generate', '--help'])).replace(/\s+/g, ' ');
    expect(help).toContain('default, as recorded: the pack found in the step specs (the first step');
    expect(help).toContain('else baseline');
  });

  it('--policy-pack overrides the run pack; --output writes the pretty JSON to the file and nothing to stdout', async () => {
    const file = join(dir, 'packs.aibom.json');
    const r = await cli([
      'aibom',
      'generate',
      '--run',
      `${ns}/packs`,
      '--policy-pack',
      'audit@9',
      '--output',
      file,
    ]);
    expect(r).toMatchObject({ code: 0, stdout: '' });
    const text = await readFile(file, 'utf8');
    // Pretty-printed: two-space indentation, one member per line.
    expect(text.split('\n')[1]).toMatch(/^ {2}"/);
    const bom = JSON.parse(text) as {
      metadata: { policy_pack: string; policy_pack_version: string; run_id: string };
      components: { policies: { pack: string; version: string }[] };
    };
    expect(bom.metadata).toMatchObject({
      run_id: run.metadata.uid,
      policy_pack: 'audit',
      policy_pack_version: '9',
    });
    expect(bom.components.policies[0]).toMatchObject({ pack: 'audit', version: '9' });
    // Without a version, the override takes the version of a reference to it in the spec.
    const strict = JSON.parse(
      await ok(['aibom', 'generate', '--run', run.metadata.uid, '--policy-pack', 'strict']),
    ) as {
      metadata: { policy_pack_version: string };
    };
    expect(strict.metadata.policy_pack_version).toBe('2');
    // A bad value is a usage error on one line (exit 2), and no file is written.
    const bad = await cli([
      'aibom',
      'generate',
      '--run',
      run.metadata.uid,
      '--policy-pack',
      'a@b@c',
      '--output',
      join(dir, 'none.json'),
    ]);
    expect(bad.code).toBe(2);
    expect(bad.stderr.trim().split('\n')).toHaveLength(1);
    await expect(readFile(join(dir, 'none.json'))).rejects.toMatchObject({ code: 'ENOENT' });
  });
});

describe('hack/sample-pipeline.ts --wait', { timeout: 300_000 }, () => {
  const pipeline = async (args: string[]): Promise<Result> => {
    try {
      const { stdout, stderr } = await exec(
        process.execPath,
        [`${repoRoot}/hack/sample-pipeline.ts`, ...args],
        {
          env: { ...process.env, KUBECONFIG: stack().kube.kubeconfigs.admin },
        },
      );
      return { code: 0, stdout, stderr };
    } catch (err) {
      const e = err as { code: number; stdout: string; stderr: string };
      return { code: e.code, stdout: e.stdout, stderr: e.stderr };
    }
  };

  it('returns once the AIBOM is ready, and says where it is', async () => {
    await createRun(ns, 'waited', await sampleRunSpec());
    const r = await pipeline([`${ns}/waited`, '--wait', '--step-delay', '10']);
    expect(r).toMatchObject({ code: 0 });
    // When it returns, the Run shows the AIBOM it names.
    const run = await getRun(ns, 'waited');
    expect(aibomReady(run)).toBe(true);
    const aibom = run.status?.artifacts?.aibom as { digest: string; bucket: string; key: string };
    expect(r.stdout.trimEnd().split('\n').at(-1)).toBe(
      `AIBOM ready: ${aibom.digest} at s3://${aibom.bucket}/${aibom.key}`,
    );
  });

  it('gives up after --timeout with the reason when no controller builds it (exit 1)', async () => {
    const lonely = uniqueName('cli-nocontroller');
    await createNamespace(lonely);
    await createRun(lonely, 'unwatched', await sampleRunSpec());
    const r = await pipeline([`${lonely}/unwatched`, '--wait', '--timeout', '2', '--step-delay', '0']);
    expect(r.code).toBe(1);
    expect(r.stdout).toContain('run Succeeded');
    expect(r.stderr.trim()).toBe(
      `sample-pipeline: run ${lonely}/unwatched: no AIBOM yet (the controller has not reported on it)`,
    );
  });
});
