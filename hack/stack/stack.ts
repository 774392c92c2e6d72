import { cp, mkdtemp, readdir, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { startKube, type StackUser } from './kube.ts';
import { startPostgres } from './postgres.ts';
import { S3_TOOLS, startS3, type S3Server } from './s3.ts';
import { startReplicatedPostgres, type Replication, type StandbyMode } from './standby.ts';
import { freePort, startProcess, stopProc, waitReady, type Launch, type Proc } from './proc.ts';
import { schema } from '../../src/config/schema.ts';
import { createSignerSecret } from './signer.ts';
import { startTsa } from './tsa.ts';
import { ensureTools, STACK_TOOLS, type StackTool, type Tool, type Tools } from './tools.ts';
import { prepareNode, startNode, stopNode, type NodeInfo } from './node/index.ts';
import { startStackWitness } from './witness.ts';
import { CONTROLLER_NODE_FLAGS, PROCESS_ENV } from '../../src/bin/node-flags.ts';

export const repoRoot = fileURLToPath(new URL('../../', import.meta.url));

export interface StackOptions<T extends Tool = StackTool> {
  /** Also run the controller and the sidecar from this checkout (the `up` command does). */
  readonly services?: boolean;
  /** Tools to build (or find) beyond the stack's own, in StackInfo.tools (the tests': TEST_TOOLS). */
  readonly tools?: readonly T[];
  /**
   * A real node beside the servers (hack/stack/node: containerd, kubelet, scheduler, kube-proxy)
   * with the chart installed onto it, wired to the stack's servers; the chart's pods are then the
   * controller and the API (`services` is ignored) and SERVICE_API_URL is the API's Service.
   */
  readonly node?: boolean;
  /**
   * How long to wait for another stack's node on this machine to stop (one node per machine)
   * before giving up; default 0, refused at once.
   */
  readonly nodeClaimWaitMs?: number;
  /** The `npm run stack` state dir that will hold this stack (recorded with the node: NodeInfo). */
  readonly stateDir?: string;
  /**
   * Configuration keys (src/config/schema.ts) for the controller and sidecar; default: those set
   * in this process's environment (see serviceSettings).
   */
  readonly settings?: Record<string, string>;
  /** Parent of the stack's temp dir (default: the system temp dir). */
  readonly tmpParent?: string;
  /** PostgreSQL binaries to use instead of the npm package's (tests make a start fail with this). */
  readonly postgresBinaries?: { readonly initdb: string; readonly postgres: string };
  /** PostgreSQL with a streaming standby behind a proxy (hack/stack/standby.ts); default none. */
  readonly standby?: StandbyMode;
  /** The S3-compatible store (hack/stack/s3.ts); default MinIO. */
  readonly s3?: S3Server;
  readonly log?: (line: string) => void;
  /** Aborts the start (Ctrl-C of `up`): what started is stopped and the temp dir removed. */
  readonly signal?: AbortSignal;
}

/** Everything a client needs to reach the stack; serialisable (vitest `provide`, state file). */
export interface StackInfo<T extends Tool = StackTool> {
  readonly root: string;
  readonly procs: Proc[];
  readonly tools: Tools<T>;
  /**
   * Variables written to .stack/env (KUBECONFIG, DATABASE_URL, DATABASE_MIGRATION_URL, S3_*,
   * SERVICE_API_URL, SERVICE_TOKEN, TSA_*).
   */
  readonly env: Record<string, string>;
  /** The configuration keys the controller and sidecar run with (see serviceSettings). */
  readonly settings: Record<string, string>;
  /**
   * The `vault` database as each of the three logins of docs/vault.md "Roles": the superuser (tests
   * create databases and play the attacker with it), the owner (migrations: DATABASE_MIGRATION_URL)
   * and the runtime login (DATABASE_URL: owns nothing, may only become vault_writer).
   */
  readonly database: { readonly superuser: string; readonly owner: string; readonly runtime: string };
  readonly kube: {
    readonly server: string;
    /** etcd's client URL (plain HTTP on loopback), for measurements (bench/etcd.ts). */
    readonly etcd?: string;
    readonly caFile: string;
    readonly kubeconfigs: Record<StackUser, string>;
    readonly tokens: Record<StackUser, string>;
  };
  readonly timings: Record<string, number>;
  /** The node (StackOptions.node): its dirs, release, namespace, image, the API's Service URL. */
  readonly node?: NodeInfo;
  /** Which servers run: the standby mode (`none` after a failover) and the S3 store. */
  readonly servers?: { readonly standby: StandbyMode | 'none'; readonly s3: S3Server };
  /** The primary, standby and proxy of `--standby` (what `failover` acts on). */
  readonly replication?: Replication;
  /** The stack's tlog witness (litewitness), which the services push their checkpoints to. */
  readonly witness?: {
    readonly url: string;
    readonly vkey: string;
    readonly name: string;
    readonly db: string;
  };
}

/** Keys the stack sets itself for its services (and in .stack/env): never taken from the caller. */
const STACK_KEYS = new Set([
  'KUBECONFIG',
  'DATABASE_URL',
  'DATABASE_MIGRATION_URL',
  'S3_ENDPOINT',
  'S3_ACCESS_KEY',
  'S3_SECRET_KEY',
  'S3_BUCKET',
  'POD_NAMESPACE',
  'POD_NAME',
  'HTTP_HOST',
  'HTTP_PORT',
  'METRICS_HOST',
  'METRICS_PORT',
  'SERVICE_API_URL',
  'SERVICE_TOKEN',
  'SERVICE_TRUST_ANCHOR',
  'TSA_URL',
  'TSA_TRUST_ANCHORS',
  'TLOG_NOTE_SECRET',
  'TLOG_ORIGIN',
  'TLOG_WITNESSES',
]);

/**
 * The caller's settings for the controller and sidecar: every key of the configuration schema
 * set in `env`, except those the stack decides (addresses, credentials, identities). `up`
 * compares them with the running stack's to know whether its services must restart.
 */
export function serviceSettings(env: NodeJS.ProcessEnv = process.env): Record<string, string> {
  const out: Record<string, string> = {};
  for (const key of Object.keys(schema).sort()) {
    const v = env[key];
    if (v !== undefined && !STACK_KEYS.has(key)) out[key] = v;
  }
  return out;
}

/**
 * Starts etcd + kube-apiserver + kube-controller-manager (CRDs applied), PostgreSQL (alone, or
 * with a standby behind a proxy: `standby`), an S3-compatible store (MinIO or SeaweedFS: `s3`) and
 * the RFC 3161 time-stamping authority, each on a random loopback port under one temp dir, and
 * optionally the controller and sidecar.
 *
 * Invariant: when it throws, nothing it started is left. Every process is recorded the moment it
 * is spawned (Launch.onSpawn), the first failure aborts the other components' readiness waits,
 * all concurrent starts are settled before teardown (a server spawned after the failure is still
 * stopped), then every recorded process is stopped and the temp dir removed.
 */
export async function startStack<T extends Tool = StackTool>(
  opts: StackOptions<T> = {},
): Promise<StackInfo<T | StackTool>> {
  const log = opts.log ?? (() => undefined);
  const timings: Record<string, number> = {};
  const timed = async <T>(name: string, fn: () => Promise<T>): Promise<T> => {
    const t0 = performance.now();
    const out = await fn();
    timings[name] = Math.round(performance.now() - t0);
    log(`${name} ready in ${timings[name]} ms`);
    return out;
  };
  const root = await mkdtemp(join(opts.tmpParent ?? tmpdir(), 'aibom-vault-stack-'));
  const procs: Proc[] = [];
  const abort = new AbortController();
  opts.signal?.addEventListener('abort', () => abort.abort(), { once: true });
  const launch: Launch = { onSpawn: (p) => procs.push(p), signal: abort.signal };
  const settings = opts.settings ?? serviceSettings();
  let node: NodeInfo | undefined;
  try {
    const s3Server = opts.s3 ?? 'minio';
    // SeaweedFS is not among the stack's own tools (the everyday stack runs MinIO): asked for here.
    const tools = await timed('tools', () =>
      ensureTools([...STACK_TOOLS, ...S3_TOOLS[s3Server], ...(opts.tools ?? [])]),
    );
    const prepared = opts.node
      ? await timed('node network', () =>
          prepareNode(root, procs, { ms: opts.nodeClaimWaitMs ?? 0, log }, opts.stateDir),
        )
      : undefined;
    node = prepared?.node;
    const bucket = process.env.S3_BUCKET ?? 'aibom-vault';
    // The three servers are independent: start them concurrently; the first failure stops the rest.
    const [kube, postgres, s3, tsa] = await settleAll(
      [
        timed('kubernetes', () =>
          startKube(
            root,
            tools,
            join(repoRoot, 'crds'),
            join(repoRoot, 'manifests/rbac.yaml'),
            launch,
            prepared?.kube,
          ),
        ),
        timed('postgres', () =>
          opts.standby !== undefined
            ? startReplicatedPostgres(root, opts.standby, launch, opts.postgresBinaries)
            : startPostgres(root, launch, opts.postgresBinaries),
        ),
        timed(s3Server, () => startS3(s3Server, root, tools, bucket, launch)),
        timed('tsa', () => startTsa(root, tools['timestamp-authority'], launch)),
      ],
      abort,
    );
    const { trustAnchor } = await timed('signer', () => createSignerSecret(root, kube.kubeconfig));
    // The local transparency log signs receipts with its own key.
    await createSignerSecret(
      join(root, 'scitt-log'),
      kube.kubeconfig,
      'aibom-vault-system',
      'aibom-vault-scitt-log',
    );
    // A litewitness the services push their C2SP checkpoints to (hack/stack/witness.ts).
    const witnessed = await timed('witness', () => startStackWitness(root, tools, kube.kubeconfig, launch));
    const env: Record<string, string> = {
      ...witnessed.settings,
      ...witnessed.env,
      SERVICE_TRUST_ANCHOR: trustAnchor,
      KUBECONFIG: kube.kubeconfig,
      DATABASE_URL: postgres.runtimeUrl,
      DATABASE_MIGRATION_URL: postgres.ownerUrl,
      S3_ENDPOINT: s3.endpoint,
      S3_ACCESS_KEY: s3.accessKey,
      S3_SECRET_KEY: s3.secretKey,
      S3_BUCKET: s3.bucket,
      SERVICE_TOKEN: kube.tokens.admin,
      TSA_URL: tsa.url,
      TSA_TRUST_ANCHORS: tsa.trustAnchor,
    };
    const info: StackInfo<T | StackTool> = {
      root,
      procs,
      tools,
      env,
      settings,
      database: { superuser: postgres.url, owner: postgres.ownerUrl, runtime: postgres.runtimeUrl },
      kube: {
        server: kube.server,
        etcd: kube.etcd,
        caFile: kube.caFile,
        kubeconfigs: kube.kubeconfigs,
        tokens: kube.tokens,
      },
      timings,
      ...(node ? { node } : {}),
      servers: { standby: opts.standby ?? 'none', s3: s3Server },
      ...('replication' in postgres
        ? { replication: (postgres as { replication: Replication }).replication }
        : {}),
      witness: {
        url: witnessed.witness.url,
        vkey: witnessed.witness.vkey,
        name: witnessed.witness.name,
        db: witnessed.witness.db,
      },
    };
    if (node) {
      const port = (url: string): number => Number(new URL(url).port);
      await timed('node', () =>
        startNode(
          node!,
          {
            root,
            repoRoot,
            procs,
            tools,
            kube: { server: kube.server, kubeconfig: kube.kubeconfig, nodeKubeconfigs: kube.nodeKubeconfigs },
            forward: [port(kube.server), postgres.port, port(s3.endpoint), port(tsa.url)],
            wiring: {
              databaseUrl: postgres.runtimeUrl,
              migrationUrl: postgres.ownerUrl,
              s3: {
                endpoint: s3.endpoint,
                accessKey: s3.accessKey,
                secretKey: s3.secretKey,
                bucket: s3.bucket,
              },
              tsa: { url: tsa.url, caFile: tsa.trustAnchor },
            },
            settings,
          },
          launch,
          log,
        ),
      );
      env.SERVICE_API_URL = node.apiUrl!;
      env.SERVICE_NAMESPACE = node.namespace;
    } else if (opts.services) {
      const svc = await timed('services', () => startServices(info, settings, undefined, launch));
      env.SERVICE_API_URL = svc.apiUrl;
    }
    return info;
  } catch (err) {
    abort.abort();
    if (node) {
      // The node's logs say why a pod did not start: keep them beyond the temp dir.
      const kept = await keepLogs(root);
      if (kept) log(`the stack's logs are kept in ${kept}`);
      const left = await stopNode(node, procs);
      if (left.length) log(`node teardown left: ${left.join('; ')}`);
    }
    await stopAll(procs);
    await rm(root, { recursive: true, force: true });
    throw err;
  }
}

/** Copies the stack's *.log files (and the pods' logs) to a new dir under the temp dir; its path. */
async function keepLogs(root: string): Promise<string | undefined> {
  try {
    const dest = await mkdtemp(join(tmpdir(), 'aibom-vault-node-failed-'));
    for (const f of await readdir(root)) {
      if (f.endsWith('.log')) await cp(join(root, f), join(dest, f));
    }
    await cp(join(root, 'node', 'kubelet', 'pod-logs'), join(dest, 'pod-logs'), { recursive: true }).catch(
      () => undefined,
    );
    return dest;
  } catch {
    return undefined;
  }
}

/**
 * Promise.all that, on the first rejection, aborts the others and still waits for every one to
 * settle before rejecting with that first error: no start is still running (and spawning) when
 * the caller tears down.
 */
async function settleAll<T extends readonly unknown[]>(
  starts: { [K in keyof T]: Promise<T[K]> },
  abort: AbortController,
): Promise<T> {
  let first: { err: unknown } | undefined;
  const results = await Promise.allSettled(
    starts.map((p: Promise<unknown>) =>
      p.catch((err: unknown) => {
        first ??= { err };
        abort.abort();
        throw err;
      }),
    ),
  );
  if (first) throw first.err;
  return results.map((r) => (r as PromiseFulfilledResult<unknown>).value) as unknown as T;
}

/** Names of the service processes in StackInfo.procs. */
export const SERVICE_NAMES = ['controller', 'sidecar'] as const;

/**
 * The controller and sidecar of this checkout with `settings` (configuration keys) on top of the
 * stack's own wiring; `apiPort` keeps the API address of a restart. Appends both to `info.procs`
 * (through `launch`, or directly) and sets SERVICE_API_URL in `info.env`.
 */
export async function startServices(
  info: StackInfo,
  settings: Record<string, string>,
  apiPort?: number,
  launch: Launch = { onSpawn: (p) => info.procs.push(p) },
): Promise<{ apiUrl: string }> {
  const { root, env } = info;
  const [httpPort, metricsPort] = [apiPort ?? (await freePort()), await freePort()];
  const apiUrl = `http://127.0.0.1:${httpPort}`;
  // Only PATH-like basics from our environment: the services' configuration is `settings` plus
  // the stack's wiring, nothing inherited by accident.
  const base: Record<string, string> = {};
  for (const [k, v] of Object.entries(process.env)) if (v !== undefined && !(k in schema)) base[k] = v;
  const common = {
    ...base,
    ...PROCESS_ENV,
    SCITT_LOG_SECRET: 'aibom-vault-scitt-log',
    SCITT_LOG_ISSUER: apiUrl,
    ...settings,
    ...env,
    POD_NAMESPACE: 'aibom-vault-system',
  };
  delete (common as Record<string, string>).SERVICE_API_URL;
  const node = process.execPath;
  const spawnHook = launch.onSpawn ? { onSpawn: launch.onSpawn } : {};
  const controller = await startProcess({
    name: 'controller',
    command: node,
    args: [...CONTROLLER_NODE_FLAGS, join(repoRoot, 'src/bin/controller.ts')],
    // Each process under its own ServiceAccount of manifests/rbac.yaml.
    env: {
      ...common,
      KUBECONFIG: info.kube.kubeconfigs['aibom-vault-controller'],
      METRICS_HOST: '127.0.0.1',
      METRICS_PORT: String(metricsPort),
      POD_NAME: 'controller-0',
    },
    logFile: join(root, 'controller.log'),
    ...spawnHook,
  });
  const sidecar = await startProcess({
    name: 'sidecar',
    command: node,
    args: [join(repoRoot, 'src/bin/sidecar.ts')],
    env: {
      ...common,
      KUBECONFIG: info.kube.kubeconfigs['aibom-vault-api'],
      HTTP_HOST: '127.0.0.1',
      HTTP_PORT: String(httpPort),
      METRICS_HOST: '127.0.0.1',
      METRICS_PORT: String(await freePort()),
    },
    logFile: join(root, 'sidecar.log'),
    ...spawnHook,
  });
  await Promise.all([
    waitReady(
      controller,
      async () => (await fetch(`http://127.0.0.1:${metricsPort}/readyz`)).ok,
      60_000,
      launch.signal,
    ),
    waitReady(sidecar, async () => (await fetch(`${apiUrl}/readyz`)).ok, 60_000, launch.signal),
  ]);
  env.SERVICE_API_URL = apiUrl;
  return { apiUrl };
}

/** Stops in reverse start order, so clients go before the servers they talk to. */
export async function stopAll(procs: readonly Proc[]): Promise<void> {
  for (const p of [...procs].reverse()) await stopProc(p);
}

/**
 * Stops the node first (if any: its pods, runtime state and host changes go; what could not be
 * removed is returned), then every server, and removes the temp dir.
 */
export async function stopStack(info: Pick<StackInfo, 'procs' | 'root' | 'node'>): Promise<string[]> {
  const left = info.node ? await stopNode(info.node, info.procs) : [];
  await stopAll(info.procs);
  await rm(info.root, { recursive: true, force: true });
  return left;
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
