import { mkdir, readFile, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { stringify } from 'yaml';
import { sleep } from '../proc.ts';
import { sh } from './host.ts';

/**
 * The chart from the working tree on the node, wired to the stack's servers as external
 * services, the way a user with a managed database, bucket and TSA installs it: the connection
 * strings and S3 keys in Secrets the user creates (docs/install.md "Install"), the TSA's CA in a
 * ConfigMap, the signer and the SCITT log key referenced where they already are (the stack's
 * Secrets in aibom-vault-system, `namespace/name`), the CRDs managed outside the release
 * (`crds.enabled=false`: the stack applied crds/, as docs/install.md describes for shared clusters).
 */
export const NODE_RELEASE = 'aibom-vault-node';
export const NODE_NAMESPACE = 'aibom-vault-node';
/** Where docker.io/library/<name> images resolve: what `image.repository: aibom-vault` means to a runtime. */
export const IMAGE_REPOSITORY = 'aibom-vault';
export const imageRef = (tag: string): string => `docker.io/library/${IMAGE_REPOSITORY}:${tag}`;

export interface ChartTarget {
  readonly helm: string;
  readonly kubectl: string;
  readonly kubeconfig: string;
  /** Where helm keeps its cache/config/data (inside the node's dir, not ~/.cache/helm). */
  readonly helmHome: string;
  readonly chartDir: string;
  readonly release: string;
  readonly namespace: string;
}

export interface ChartWiring {
  /** The node's address, where the forwarder exposes the stack's servers to pods. */
  readonly nodeAddress: string;
  readonly databaseUrl: string;
  readonly migrationUrl: string;
  readonly s3: {
    readonly endpoint: string;
    readonly accessKey: string;
    readonly secretKey: string;
    readonly bucket: string;
  };
  readonly tsa: { readonly url: string; readonly caFile: string };
}

/** A loopback URL of the stack, as pods reach it: the same port on the node's address. */
export function viaNode(url: string, nodeAddress: string): string {
  const u = new URL(url);
  if (u.hostname !== '127.0.0.1' && u.hostname !== 'localhost') return url;
  u.hostname = nodeAddress;
  return u.toString().replace(/\/$/, url.endsWith('/') ? '/' : '');
}

/**
 * Configuration keys (src/config/schema.ts) the caller set, as chart values: those the chart has a
 * value for become that value, the rest `extraEnv` of both Deployments. Keys the chart derives
 * itself (addresses, identities, the Secrets' contents) are refused: they are the stack's wiring.
 */
export function settingsToValues(settings: Record<string, string>): {
  values: Record<string, unknown>;
  extraEnv: { name: string; value: string }[];
} {
  const flag = (v: string): boolean => v === '1' || v === 'true';
  const values: Record<string, unknown> = {};
  const transparency: Record<string, unknown> = {};
  const controller: Record<string, unknown> = {};
  const extraEnv: { name: string; value: string }[] = [];
  for (const [k, v] of Object.entries(settings)) {
    switch (k) {
      case 'LOG_LEVEL':
        values.logLevel = v;
        break;
      case 'SERVICE_TRANSPARENCY_WRITER':
        transparency.writer = flag(v);
        break;
      case 'SCITT_BACKEND':
        transparency.backend = v;
        break;
      case 'SCITT_URL':
        transparency.url = v;
        break;
      case 'SERVICE_REQUIRE_SIGNED_EXPORTS':
        values.requireSignedExports = flag(v);
        break;
      case 'WATCH_NAMESPACE':
        controller.watchNamespace = v;
        break;
      case 'SIGNER_SECRET':
      case 'CUSTOMER_SIGNER_SECRET':
      case 'SCITT_LOG_SECRET':
      case 'SCITT_LOG_ISSUER':
      case 'SCITT_TOKEN':
      case 'LEADER_ELECTION_LEASE':
      case 'TSA_DEADLINE_MS':
      case 'S3_REGION':
        throw new Error(
          `${k} is set by the node's chart values (hack/stack/node/chart.ts), not from the environment`,
        );
      default:
        extraEnv.push({ name: k, value: v });
    }
  }
  if (Object.keys(transparency).length) values.transparency = transparency;
  if (Object.keys(controller).length) values.controller = controller;
  return { values, extraEnv };
}

/** Deep merge of plain objects (b wins); arrays are replaced. */
function merge(a: Record<string, unknown>, b: Record<string, unknown>): Record<string, unknown> {
  const out: Record<string, unknown> = { ...a };
  for (const [k, v] of Object.entries(b)) {
    const prev = out[k];
    out[k] =
      v &&
      typeof v === 'object' &&
      !Array.isArray(v) &&
      prev &&
      typeof prev === 'object' &&
      !Array.isArray(prev)
        ? merge(prev as Record<string, unknown>, v as Record<string, unknown>)
        : v;
  }
  return out;
}

/** The values of the node's release (docs/install.md "A real node" shows the same). */
export function chartValues(
  t: ChartTarget,
  w: ChartWiring,
  imageTag: string,
  settings: Record<string, string>,
): Record<string, unknown> {
  const fullname = t.release;
  const { values, extraEnv } = settingsToValues(settings);
  const base: Record<string, unknown> = {
    image: { repository: IMAGE_REPOSITORY, tag: imageTag },
    crds: { enabled: false },
    database: { migrationSecretKey: 'DATABASE_MIGRATION_URL' },
    s3: { endpoint: viaNode(w.s3.endpoint, w.nodeAddress), bucket: w.s3.bucket },
    signer: { secretName: 'aibom-vault-system/aibom-vault-signer' },
    tsa: { url: viaNode(w.tsa.url, w.nodeAddress), caConfigMap: `${fullname}-tsa` },
    transparency: {
      logSecretName: 'aibom-vault-system/aibom-vault-scitt-log',
      logIssuer: `http://${fullname}.${t.namespace}.svc:8080`,
    },
    controller: { replicas: 2, extraEnv },
    sidecar: { replicas: 2, extraEnv },
  };
  return merge(base, values);
}

export function helmEnv(t: ChartTarget): NodeJS.ProcessEnv {
  return {
    ...process.env,
    HELM_CACHE_HOME: join(t.helmHome, 'cache'),
    HELM_CONFIG_HOME: join(t.helmHome, 'config'),
    HELM_DATA_HOME: join(t.helmHome, 'data'),
  };
}

export async function helm(t: ChartTarget, args: readonly string[]): Promise<string> {
  const { execFile } = await import('node:child_process');
  return new Promise((resolve, reject) => {
    execFile(
      t.helm,
      [...args, `--kubeconfig=${t.kubeconfig}`],
      { env: helmEnv(t), maxBuffer: 16 * 1024 * 1024 },
      (err, stdout, stderr) => {
        if (err) reject(new Error(`helm ${args[0]}: ${stderr.trim() || err.message}`, { cause: err }));
        else resolve(stdout);
      },
    );
  });
}

export const kubectl = (t: ChartTarget, args: readonly string[], input?: string): Promise<string> =>
  sh(t.kubectl, [`--kubeconfig=${t.kubeconfig}`, ...args], input);

/** Creates the namespace and what the user creates before `helm install` (Secrets, ConfigMap). */
export async function createPrerequisites(t: ChartTarget, w: ChartWiring): Promise<void> {
  const fullname = t.release;
  const objects = [
    { apiVersion: 'v1', kind: 'Namespace', metadata: { name: t.namespace } },
    {
      apiVersion: 'v1',
      kind: 'Secret',
      metadata: { name: `${fullname}-database`, namespace: t.namespace },
      type: 'Opaque',
      stringData: {
        DATABASE_URL: viaNode(w.databaseUrl, w.nodeAddress),
        DATABASE_MIGRATION_URL: viaNode(w.migrationUrl, w.nodeAddress),
      },
    },
    {
      apiVersion: 'v1',
      kind: 'Secret',
      metadata: { name: `${fullname}-s3`, namespace: t.namespace },
      type: 'Opaque',
      stringData: { S3_ACCESS_KEY: w.s3.accessKey, S3_SECRET_KEY: w.s3.secretKey },
    },
    {
      apiVersion: 'v1',
      kind: 'ConfigMap',
      metadata: { name: `${fullname}-tsa`, namespace: t.namespace },
      data: { 'ca.crt': await readFile(w.tsa.caFile, 'utf8') },
    },
  ];
  await kubectl(t, ['apply', '--server-side', '-f', '-'], objects.map((o) => JSON.stringify(o)).join('\n'));
}

/** `helm install` (first time) or `helm upgrade` of the working tree's chart with these values. */
export async function installChart(
  t: ChartTarget,
  values: Record<string, unknown>,
  valuesDir: string,
  mode: 'install' | 'upgrade',
): Promise<void> {
  await mkdir(valuesDir, { recursive: true });
  const file = join(valuesDir, `values-${Date.now()}.yaml`);
  await writeFile(file, stringify(values), { mode: 0o600 });
  await helm(t, [mode, t.release, t.chartDir, '--namespace', t.namespace, '--values', file]);
}

interface PodView {
  metadata: { name: string; labels?: Record<string, string>; deletionTimestamp?: string };
  status?: {
    phase?: string;
    conditions?: { type: string; status: string }[];
    containerStatuses?: {
      name: string;
      ready: boolean;
      restartCount: number;
      state?: Record<string, { reason?: string; message?: string } | undefined>;
      lastState?: Record<string, { reason?: string; exitCode?: number } | undefined>;
    }[];
  };
}

/** One line per pod of the release: name, phase, ready, restarts, waiting reason. */
export async function podSummary(t: ChartTarget): Promise<string> {
  const pods = JSON.parse(await kubectl(t, ['get', 'pods', '-n', t.namespace, '-o', 'json'])) as {
    items: PodView[];
  };
  return pods.items
    .map((p) => {
      const cs = p.status?.containerStatuses?.[0];
      const waiting = cs?.state?.waiting;
      return `${p.metadata.name} ${p.status?.phase ?? '?'} ready=${cs?.ready ?? false} restarts=${cs?.restartCount ?? 0}${waiting ? ` waiting=${waiting.reason}: ${waiting.message ?? ''}` : ''}${p.metadata.deletionTimestamp ? ' terminating' : ''}`;
    })
    .join('\n');
}

interface DeploymentView {
  metadata: { name: string; generation?: number };
  spec: { replicas?: number };
  status?: {
    observedGeneration?: number;
    replicas?: number;
    readyReplicas?: number;
    updatedReplicas?: number;
    availableReplicas?: number;
  };
}

/**
 * Waits until both Deployments of the release have rolled out: every replica updated to the
 * current template and Ready through its readiness probe, no old replica left (what `kubectl
 * rollout status` waits for). Throws with the pods' state when `timeoutMs` passes.
 */
export async function waitRolledOut(t: ChartTarget, timeoutMs: number, signal?: AbortSignal): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  const names = [`${t.release}-controller`, `${t.release}-api`];
  for (;;) {
    signal?.throwIfAborted();
    let done = true;
    for (const name of names) {
      const d = JSON.parse(
        await kubectl(t, ['get', 'deployment', name, '-n', t.namespace, '-o', 'json']).catch(() => '{}'),
      ) as Partial<DeploymentView>;
      const want = d.spec?.replicas ?? 1;
      const s = d.status ?? {};
      if (
        !d.metadata ||
        (s.observedGeneration ?? 0) < (d.metadata.generation ?? 1) ||
        (s.updatedReplicas ?? 0) !== want ||
        (s.readyReplicas ?? 0) !== want ||
        (s.availableReplicas ?? 0) !== want ||
        (s.replicas ?? 0) !== want
      )
        done = false;
    }
    if (done) return;
    if (Date.now() > deadline) {
      throw new Error(
        `the chart's Deployments did not roll out within ${timeoutMs / 1000} s; pods:\n${await podSummary(t).catch((e: unknown) => String(e))}`,
      );
    }
    await sleep(1000);
  }
}

/** The API's address through its Service (a ClusterIP: reachable on this node, as on any node). */
export async function serviceUrl(t: ChartTarget): Promise<string> {
  const svc = JSON.parse(
    await kubectl(t, ['get', 'service', t.release, '-n', t.namespace, '-o', 'json']),
  ) as {
    spec: { clusterIP: string; ports: { name: string; port: number }[] };
  };
  const port = svc.spec.ports.find((p) => p.name === 'http')?.port;
  if (!port) throw new Error(`Service ${t.namespace}/${t.release} has no port named http`);
  return `http://${svc.spec.clusterIP}:${port}`;
}
