import { execFile, spawn } from 'node:child_process';
import { copyFile, mkdir, mkdtemp, open, readdir, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir, userInfo } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { CoreV1Api, CustomObjectsApi, type V1Deployment, type V1EnvVar } from '@kubernetes/client-node';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { parseAllDocuments, parse as parseYaml } from 'yaml';
import { freePort, stopProcess, waitReady, type Proc } from '../../hack/stack/proc.ts';
import { repoRoot } from '../../hack/stack/stack.ts';
import { driveRun } from '../../hack/sample-pipeline.ts';
import { freshDatabase, kubeConfig, stack, uniqueName } from '../helpers/stack.ts';

/**
 * The OCI image, built by hack/image.sh without a container engine, checked the way a cluster
 * would use it: pushed to a registry (crane's own, on loopback) with crane, pulled back and
 * flattened into a root filesystem, and its two processes started from that root filesystem
 * (chroot, read-only root, tmpfs /tmp, as uid 1000) with exactly the environment and the
 * ServiceAccount tokens the chart's Deployments give them, against the stack. A Run is driven to
 * its AIBOM through them. Needs root (chroot, mount namespace); the suite runs as root in CI.
 */

const run = promisify(execFile);
const isRoot = userInfo().uid === 0;
const group = 'vault.service.dev';

interface Built {
  layout: string;
  digest: string;
  size: number;
  layers: number;
}

async function buildImage(args: string[] = []): Promise<Built> {
  const { stdout } = await run('bash', [join(repoRoot, 'hack/image.sh'), ...args], {
    maxBuffer: 16 * 1024 * 1024,
  });
  const kv: Record<string, string> = Object.fromEntries(
    stdout
      .trim()
      .split('\n')
      .map((l): [string, string] => [l.slice(0, l.indexOf('=')), l.slice(l.indexOf('=') + 1)]),
  );
  return { layout: kv.layout!, digest: kv.digest!, size: Number(kv.size), layers: Number(kv.layers) };
}

let work: string;
let built: Built;
let registry: Proc | undefined;
let registryAddr: string;
let rootfs: string;
/** Absolute path of a host tool (the processes' own PATH is the image's). */
const hostTool = async (name: string): Promise<string> =>
  (
    await run('sh', ['-c', `command -v ${name}`], { env: { PATH: `${process.env.PATH}:/usr/sbin:/sbin` } })
  ).stdout.trim();
const crane = (...args: string[]) => run(stack().tools.crane, args, { maxBuffer: 64 * 1024 * 1024 });

beforeAll(async () => {
  if (!isRoot) return;
  work = await mkdtemp(join(tmpdir(), 'image-test-'));
  // Cached by inputs under ~/.cache/aibom-vault/image; a cold build took ~95 s on 2 busy cores.
  built = await buildImage();
  const port = await freePort();
  registryAddr = `127.0.0.1:${port}`;
  const log = await open(join(work, 'registry.log'), 'a');
  const child = spawn(stack().tools.crane, ['registry', 'serve', '--address', registryAddr], {
    detached: true,
    stdio: ['ignore', log.fd, log.fd],
  });
  await log.close();
  registry = { name: 'registry', pid: child.pid!, logFile: join(work, 'registry.log') };
  child.unref();
  await waitReady(registry, async () => (await fetch(`http://${registryAddr}/v2/`)).ok, 30_000);
  await crane('push', built.layout, `${registryAddr}/aibom-vault:0.1.0`);
  rootfs = join(work, 'rootfs');
  await mkdir(rootfs);
  // crane export flattens the layers as a runtime would (whiteouts applied); tar unpacks as root.
  await run('sh', [
    '-c',
    `"$0" export "$1" - | tar -x -C "$2"`,
    stack().tools.crane,
    `${registryAddr}/aibom-vault:0.1.0`,
    rootfs,
  ]);
}, 900_000);

afterAll(async () => {
  if (registry) await stopProcess(registry.pid);
  if (work) await rm(work, { recursive: true, force: true });
});

describe.skipIf(!isRoot)('the OCI image (hack/image.sh)', () => {
  it('is an OCI image of 4 layers, non-root, that crane pushes and pulls by the same digest', async () => {
    expect(built.layers).toBe(4);
    const { stdout: digest } = await crane('digest', `${registryAddr}/aibom-vault:0.1.0`);
    expect(digest.trim()).toBe(built.digest);
    const config = JSON.parse((await crane('config', `${registryAddr}/aibom-vault:0.1.0`)).stdout) as {
      config: { User: string; Env: string[] };
      os: string;
      architecture: string;
    };
    expect(config.config.User).toBe('1000:1000');
    expect([config.os, config.architecture]).toEqual(['linux', 'amd64']);
    const manifest = JSON.parse((await crane('manifest', `${registryAddr}/aibom-vault:0.1.0`)).stdout) as {
      layers: { size: number }[];
    };
    // Report figure: compressed size of the layers.
    console.log(
      `image ${built.digest}: ${manifest.layers.length} layers, ${(built.size / 1e6).toFixed(1)} MB compressed`,
    );
  });

  it('is reproducible: a second build of the same inputs without the cache has the same digest', async () => {
    const again = await buildImage(['--no-cache', '--out', join(work, 'again')]);
    expect(again.digest).toBe(built.digest);
  }, 900_000);

  it('holds the Node 24 runtime and only production dependencies', async () => {
    const { stdout } = await run(
      await hostTool('chroot'),
      ['--userspec=1000:1000', rootfs, '/usr/local/bin/node', '-p', 'process.version'],
      {
        env: {},
      },
    );
    const lock = JSON.parse(await readFile(join(repoRoot, 'package-lock.json'), 'utf8')) as {
      packages: Record<string, { version?: string; dev?: boolean; optional?: boolean }>;
    };
    expect(stdout.trim()).toBe(`v${lock.packages['node_modules/node']!.version}`);
    const installed = new Set(
      (await readdir(join(rootfs, 'app/node_modules'), { recursive: true }))
        .map((p) => p.replace(/\\/g, '/'))
        .filter(
          (p) =>
            /(^|\/)node_modules\/(@[^/]+\/)?[^/@]+$/.test(`node_modules/${p}`) &&
            !p.includes('/node_modules/'),
        )
        .map((p) => `node_modules/${p}`),
    );
    const dev = Object.entries(lock.packages)
      .filter(([path, p]) => path.startsWith('node_modules/') && (p.dev === true || p.optional === true))
      .map(([path]) => path)
      .filter((path) => !path.slice('node_modules/'.length).includes('/node_modules/'));
    expect(dev.length).toBeGreaterThan(10);
    expect(dev.filter((d) => installed.has(d))).toEqual([]);
    for (const prod of ['node_modules/fastify', 'node_modules/pg', 'node_modules/@kubernetes/client-node']) {
      expect(installed.has(prod), prod).toBe(true);
    }
  });

  it("runs the chart's controller and API from the image's root filesystem, with the chart's environment and ServiceAccount tokens, and drives a Run to its AIBOM", async () => {
    const admin = kubeConfig('admin');
    const core = admin.makeApiClient(CoreV1Api);
    const ns = uniqueName('img');
    const tenant = uniqueName('img-tenant');
    const release = 'vault';
    const ports = {
      http: await freePort(),
      apiMetrics: await freePort(),
      controllerMetrics: await freePort(),
    };
    const e = stack().env;
    const sets = [
      'crds.enabled=false', // the stack has them
      `database.url=${await freshDatabase('img')}`,
      `s3.endpoint=${e.S3_ENDPOINT}`,
      `s3.accessKey=${e.S3_ACCESS_KEY}`,
      `s3.secretKey=${e.S3_SECRET_KEY}`,
      `s3.bucket=${e.S3_BUCKET}`,
      `controller.watchNamespace=${tenant}`,
      `controller.metricsPort=${ports.controllerMetrics}`,
      `sidecar.port=${ports.http}`,
      `sidecar.metricsPort=${ports.apiMetrics}`,
    ];
    const procs: Proc[] = [];
    const kubectl = (args: string[], input?: string) =>
      new Promise<string>((resolve, reject) => {
        const child = execFile(
          stack().tools.kubectl,
          [`--kubeconfig=${stack().kube.kubeconfigs.admin}`, ...args],
          { maxBuffer: 16 * 1024 * 1024 },
          (err, stdout, stderr) => (err ? reject(new Error(`${err.message}\n${stderr}`)) : resolve(stdout)),
        );
        child.stdin?.end(input ?? '');
      });
    const helm = (args: string[]) =>
      run(stack().tools.helm, [...args, `--kubeconfig=${stack().kube.kubeconfigs.admin}`], {
        env: {
          ...process.env,
          HELM_CACHE_HOME: join(work, 'helm/cache'),
          HELM_CONFIG_HOME: join(work, 'helm/config'),
          HELM_DATA_HOME: join(work, 'helm/data'),
        },
        maxBuffer: 16 * 1024 * 1024,
      });
    await core.createNamespace({ body: { metadata: { name: tenant } } });
    try {
      await helm([
        'install',
        release,
        join(repoRoot, 'charts/aibom-vault'),
        '-n',
        ns,
        '--create-namespace',
        ...sets.flatMap((s) => ['--set', s]),
      ]);
      // The signer Secret the chart expects (cert-manager would issue it): the stack's signer.
      const signer = await core.readNamespacedSecret({
        namespace: 'aibom-vault-system',
        name: 'aibom-vault-signer',
      });
      await core.createNamespacedSecret({
        namespace: ns,
        body: {
          metadata: { name: `${release}-aibom-vault-signer` },
          type: 'kubernetes.io/tls',
          data: signer.data!,
        },
      });
      const manifest = (await helm(['get', 'manifest', release, '-n', ns])).stdout;
      const deployments = parseAllDocuments(manifest)
        .map((d) => d.toJS() as V1Deployment | null)
        .filter((d): d is V1Deployment => d?.kind === 'Deployment');
      expect(deployments).toHaveLength(2);
      const imageEnv = (
        JSON.parse((await crane('config', `${registryAddr}/aibom-vault:0.1.0`)).stdout) as {
          config: { Env: string[] };
        }
      ).config.Env;
      const server = new URL(stack().kube.server);

      /** What the kubelet would put in the container's environment. */
      const resolveEnv = async (vars: V1EnvVar[], podName: string): Promise<Record<string, string>> => {
        const out: Record<string, string> = Object.fromEntries(
          imageEnv.map((kv): [string, string] => [
            kv.slice(0, kv.indexOf('=')),
            kv.slice(kv.indexOf('=') + 1),
          ]),
        );
        // The in-cluster API address (the Service `kubernetes` of a real cluster).
        out.KUBERNETES_SERVICE_HOST = server.hostname;
        out.KUBERNETES_SERVICE_PORT = server.port;
        out.HOSTNAME = podName;
        for (const v of vars) {
          if (v.value !== undefined) out[v.name] = v.value;
          else if (v.valueFrom?.secretKeyRef) {
            const ref = v.valueFrom.secretKeyRef;
            const s = await core.readNamespacedSecret({ namespace: ns, name: ref.name! });
            out[v.name] = Buffer.from(s.data![ref.key]!, 'base64').toString();
          } else if (v.valueFrom?.fieldRef?.fieldPath === 'metadata.namespace') out[v.name] = ns;
          else if (v.valueFrom?.fieldRef?.fieldPath === 'metadata.name') out[v.name] = podName;
          else throw new Error(`unresolved env ${v.name}`);
        }
        return out;
      };

      for (const d of deployments) {
        const pod = d.spec!.template.spec!;
        const container = pod.containers[0]!;
        const podName = `${d.metadata!.name}-0`;
        // The pod's root filesystem: the image's (hard links, read-only below), plus the projected
        // ServiceAccount token of the Deployment's ServiceAccount.
        const root = join(work, podName);
        await run('cp', ['-al', rootfs, root]);
        const saDir = join(root, 'var/run/secrets/kubernetes.io/serviceaccount');
        await mkdir(saDir, { recursive: true });
        const token = (await kubectl(['create', 'token', pod.serviceAccountName!, '-n', ns])).trim();
        await writeFile(join(saDir, 'token'), token);
        await copyFile(stack().kube.caFile, join(saDir, 'ca.crt'));
        await writeFile(join(saDir, 'namespace'), ns);
        const env = await resolveEnv(container.env ?? [], podName);
        const uid = pod.securityContext?.runAsUser ?? 0;
        const gid = pod.securityContext?.runAsGroup ?? 0;
        expect(uid).toBe(1000);
        const logFile = join(work, `${podName}.log`);
        const log = await open(logFile, 'a');
        // readOnlyRootFilesystem + the chart's in-memory /tmp, /proc, the container's command.
        const [mount, chroot, envTool, unshare] = await Promise.all(
          ['mount', 'chroot', 'env', 'unshare'].map(hostTool),
        );
        const script = [
          'set -e',
          `${mount} --bind "$R" "$R"`,
          `${mount} -o remount,bind,ro "$R"`,
          `${mount} -t tmpfs -o size=64m tmpfs "$R/tmp"`,
          `${mount} -t proc proc "$R/proc"`,
          // The process sees exactly the container's environment (R is only this script's).
          `exec ${envTool} -u R ${chroot} --userspec=${uid}:${gid} "$R" "$@"`,
        ].join('\n');
        const child = spawn(
          unshare!,
          ['-m', '--propagation', 'private', 'sh', '-c', script, 'sh', ...container.command!],
          {
            detached: true,
            stdio: ['ignore', log.fd, log.fd],
            env: { ...env, R: root },
          },
        );
        await log.close();
        procs.push({ name: container.name, pid: child.pid!, logFile });
        child.unref();
      }
      const [controller, api] = [
        procs.find((p) => p.name === 'controller')!,
        procs.find((p) => p.name === 'sidecar')!,
      ];
      await waitReady(
        controller,
        async () => (await fetch(`http://127.0.0.1:${ports.controllerMetrics}/readyz`)).ok,
        120_000,
      );
      await waitReady(api, async () => (await fetch(`http://127.0.0.1:${ports.http}/readyz`)).ok, 120_000);

      // A pipeline creates and finishes a Run; the image's controller attests it and emits its AIBOM.
      const sample = parseYaml(await readFile(join(repoRoot, 'manifests/samples/run.yaml'), 'utf8')) as {
        metadata: { name: string };
      };
      await kubectl(['apply', '-n', tenant, '-f', '-'], JSON.stringify(sample));
      await driveRun(admin, tenant, sample.metadata.name, { stepDelayMs: 0 });
      const runs = admin.makeApiClient(CustomObjectsApi);
      let ready: { status?: string; reason?: string } | undefined;
      let uid = '';
      for (let i = 0; i < 240 && ready?.status !== 'True'; i++) {
        const r = (await runs.getNamespacedCustomObject({
          group,
          version: 'v1',
          namespace: tenant,
          plural: 'runs',
          name: sample.metadata.name,
        })) as {
          metadata: { uid: string };
          status?: { conditions?: { type: string; status: string; reason?: string }[] };
        };
        uid = r.metadata.uid;
        ready = r.status?.conditions?.find((c) => c.type === 'AIBOMReady');
        if (ready?.status !== 'True') await new Promise((res) => setTimeout(res, 500));
      }
      expect(ready?.status, `${await readFile(controller.logFile, 'utf8')}`).toBe('True');

      // Through the image's API, as a user with the admin token: the AIBOM, verified offline.
      const out = join(work, 'aibom');
      const cli = (args: string[]) =>
        run(process.execPath, [join(repoRoot, 'src/bin/service-ctl.ts'), ...args], {
          env: {
            ...process.env,
            SERVICE_API_URL: `http://127.0.0.1:${ports.http}`,
            SERVICE_TOKEN: stack().kube.tokens.admin,
          },
        });
      await cli(['aibom', 'fetch', '--run', uid, '--out', out]);
      await writeFile(join(work, 'ca.crt'), Buffer.from(signer.data!['ca.crt']!, 'base64'));
      const verified = await cli(['verify', '--aibom', out, '--trust-anchor', join(work, 'ca.crt')]);
      expect(verified.stdout).toContain('AIBOM verified');
      // Neither process was refused anything by the API server under the chart's RBAC.
      for (const p of procs) expect(await readFile(p.logFile, 'utf8'), p.name).not.toMatch(/forbidden/i);
    } finally {
      for (const p of procs) await stopProcess(p.pid);
      await helm(['uninstall', release, '-n', ns]).catch(() => undefined);
      await kubectl(['delete', 'namespace', ns, tenant, '--wait=false', '--ignore-not-found']).catch(
        () => undefined,
      );
    }
  }, 600_000);
});
