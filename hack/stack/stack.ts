import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { startKube, type StackUser } from './kube.ts';
import { startMinio } from './minio.ts';
import { startPostgres } from './postgres.ts';
import { freePort, startProcess, stopProcess, waitReady, type Proc } from './proc.ts';
import { createSignerSecret } from './signer.ts';
import { ensureTools, type Tools } from './tools.ts';

export const repoRoot = fileURLToPath(new URL('../../', import.meta.url));

export interface StackOptions {
  /** Also run the controller and the sidecar from this checkout (the `up` command does). */
  readonly services?: boolean;
  readonly log?: (line: string) => void;
}

/** Everything a client needs to reach the stack; serialisable (vitest `provide`, state file). */
export interface StackInfo {
  readonly root: string;
  readonly procs: Proc[];
  readonly tools: Tools;
  /** Variables written to .stack/env (KUBECONFIG, DATABASE_URL, S3_*, SERVICE_API_URL, SERVICE_TOKEN). */
  readonly env: Record<string, string>;
  readonly kube: {
    readonly server: string;
    readonly caFile: string;
    readonly kubeconfigs: Record<StackUser, string>;
    readonly tokens: Record<StackUser, string>;
  };
  readonly timings: Record<string, number>;
}

/**
 * Starts etcd + kube-apiserver + kube-controller-manager (CRDs applied), PostgreSQL and MinIO, each
 * on a random loopback port under one temp dir, and optionally the controller and sidecar. On any
 * failure everything already started is stopped and the temp dir removed before rethrowing.
 */
export async function startStack(opts: StackOptions = {}): Promise<StackInfo> {
  const log = opts.log ?? (() => undefined);
  const timings: Record<string, number> = {};
  const timed = async <T>(name: string, fn: () => Promise<T>): Promise<T> => {
    const t0 = performance.now();
    const out = await fn();
    timings[name] = Math.round(performance.now() - t0);
    log(`${name} ready in ${timings[name]} ms`);
    return out;
  };
  const root = await mkdtemp(join(tmpdir(), 'aibom-vault-stack-'));
  const procs: Proc[] = [];
  try {
    const tools = await timed('tools', () => ensureTools());
    const bucket = process.env.S3_BUCKET ?? 'aibom-vault';
    // The three servers are independent: start them concurrently.
    const [kube, postgres, minio] = await Promise.all([
      timed('kubernetes', () =>
        startKube(root, tools, join(repoRoot, 'crds'), join(repoRoot, 'manifests/rbac.yaml')),
      ).then((k) => {
        procs.push(...k.procs);
        return k;
      }),
      timed('postgres', () => startPostgres(root)).then((p) => {
        procs.push(p.proc);
        return p;
      }),
      timed('minio', () => startMinio(root, tools.minio, bucket)).then((m) => {
        procs.push(m.proc);
        return m;
      }),
    ]);
    const { trustAnchor } = await timed('signer', () => createSignerSecret(root, kube.kubeconfig));
    // The local transparency log signs receipts with its own key.
    await createSignerSecret(
      join(root, 'scitt-log'),
      kube.kubeconfig,
      'aibom-vault-system',
      'aibom-vault-scitt-log',
    );
    const env: Record<string, string> = {
      SERVICE_TRUST_ANCHOR: trustAnchor,
      KUBECONFIG: kube.kubeconfig,
      DATABASE_URL: postgres.url,
      S3_ENDPOINT: minio.endpoint,
      S3_ACCESS_KEY: minio.accessKey,
      S3_SECRET_KEY: minio.secretKey,
      S3_BUCKET: minio.bucket,
      SERVICE_TOKEN: kube.tokens.admin,
    };
    if (opts.services) {
      const svc = await timed('services', () => startServices(root, env, kube.kubeconfigs['aibom-vault']));
      procs.push(...svc.procs);
      env.SERVICE_API_URL = svc.apiUrl;
    }
    return {
      root,
      procs,
      tools,
      env,
      kube: { server: kube.server, caFile: kube.caFile, kubeconfigs: kube.kubeconfigs, tokens: kube.tokens },
      timings,
    };
  } catch (err) {
    await stopAll(procs);
    await rm(root, { recursive: true, force: true });
    throw err;
  }
}

/** The controller and sidecar of this checkout, with the caller's SERVICE_* settings passed through. */
async function startServices(
  root: string,
  env: Record<string, string>,
  kubeconfig: string,
): Promise<{ procs: Proc[]; apiUrl: string }> {
  const [httpPort, metricsPort] = [await freePort(), await freePort()];
  const apiUrl = `http://127.0.0.1:${httpPort}`;
  const common = {
    SCITT_LOG_SECRET: 'aibom-vault-scitt-log',
    SCITT_LOG_ISSUER: apiUrl,
    ...process.env,
    ...env,
    KUBECONFIG: kubeconfig,
    POD_NAMESPACE: 'aibom-vault-system',
  };
  const node = process.execPath;
  const controller = await startProcess({
    name: 'controller',
    command: node,
    args: [join(repoRoot, 'src/bin/controller.ts')],
    env: { ...common, METRICS_PORT: String(metricsPort), POD_NAME: 'controller-0' },
    logFile: join(root, 'controller.log'),
  });
  const sidecar = await startProcess({
    name: 'sidecar',
    command: node,
    args: [join(repoRoot, 'src/bin/sidecar.ts')],
    env: {
      ...common,
      HTTP_HOST: '127.0.0.1',
      HTTP_PORT: String(httpPort),
      METRICS_PORT: String(await freePort()),
    },
    logFile: join(root, 'sidecar.log'),
  });
  await Promise.all([
    waitReady(controller, async () => (await fetch(`http://127.0.0.1:${metricsPort}/readyz`)).ok, 60_000),
    waitReady(sidecar, async () => (await fetch(`${apiUrl}/readyz`)).ok, 60_000),
  ]);
  return { procs: [controller, sidecar], apiUrl };
}

/** Stops in reverse start order, so clients go before the servers they talk to. */
export async function stopAll(procs: readonly Proc[]): Promise<void> {
  for (const p of [...procs].reverse()) await stopProcess(p.pid);
}

export async function stopStack(info: Pick<StackInfo, 'procs' | 'root'>): Promise<void> {
  await stopAll(info.procs);
  await rm(info.root, { recursive: true, force: true });
}

/** Sourceable shell: exports the env and puts the stack's kubectl/helm first on PATH. */
export async function writeEnvFile(file: string, info: StackInfo, binDir: string): Promise<void> {
  const q = (v: string): string => `'${v.replaceAll("'", `'\\''`)}'`;
  const lines = [
    '# written by `npm run stack -- up`; source it: . .stack/env',
    ...Object.entries(info.env).map(([k, v]) => `export ${k}=${q(v)}`),
    `export PATH=${q(binDir)}:"$PATH"`,
  ];
  await writeFile(file, lines.join('\n') + '\n', { mode: 0o600 });
}
