/**
 * What a bench needs to run the controller in-process and watch it (the operator, restart, etcd
 * and memory benches), apart from bench/operator.ts: a forked controller (bench/restart-child.ts,
 * bench/memory-child.ts) imports only this and src/, so what it holds is what a deployed
 * controller holds, not the bench's stack modules (which load @kubernetes/client-node).
 */
import { readFileSync } from 'node:fs';
import { pino } from 'pino';
import type { Registry } from 'prom-client';
import type { StackInfo } from '../hack/stack/stack.ts';
import type { BenchContext } from './common.ts';
import { s3BlobStore } from '../src/blob/store.ts';
import { startController, type RunningController } from '../src/controller/manager.ts';
import type { ResourcePolicy } from '../src/controller/run/resources.ts';
import {
  KubeApiError,
  kubeconfigAccess,
  type KubeAccess,
  type KubeClient,
  type RequestSpec,
} from '../src/kube/index.ts';
import type { KeySigner } from '../src/signing/index.ts';
import { CONTROLLER_PLANS } from '../src/controller/manager.ts';
import { createVaultPool, type Vault } from '../src/vault/index.ts';

/** startController's default. */
export const WORKERS = 4;

const sleep = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));

// ---------------------------------------------------------------------------------------------
// Counting the controller's API requests

type Kind = 'read' | 'write' | 'create' | 'watch';

export interface Counted {
  /** Requests by `METHOD resource[/sub]` (leases included). */
  readonly byCategory: Map<string, number>;
  /** Failed requests by `METHOD resource HTTP-code`. */
  readonly failures: Map<string, number>;
}

function classify(method: string, path: string, stream: boolean): { category: string; kind: Kind } {
  const parts = path.split('/').filter((p) => p !== '');
  const ns = parts.indexOf('namespaces');
  // /api/v1/... or /apis/group/version/...
  const base = parts[0] === 'api' ? 2 : 3;
  const [plural, name, sub] =
    ns >= 0 && parts.length > ns + 2 ? parts.slice(ns + 2, ns + 5) : parts.slice(base, base + 3);
  const resource = `${plural ?? '?'}${sub !== undefined ? `/${sub}` : ''}`;
  if (stream) return { category: `WATCH ${resource}`, kind: 'watch' };
  if (method === 'GET')
    return { category: `${name === undefined ? 'LIST' : 'GET'} ${resource}`, kind: 'read' };
  if (method === 'POST') return { category: `POST ${resource}`, kind: 'create' };
  return { category: `${method} ${resource}`, kind: 'write' };
}

export function countingClient(inner: KubeClient): { client: KubeClient; counted: Counted } {
  const counted: Counted = { byCategory: new Map(), failures: new Map() };
  const bump = (m: Map<string, number>, k: string): void => void m.set(k, (m.get(k) ?? 0) + 1);
  const client: KubeClient = {
    async request<T>(spec: RequestSpec): Promise<T> {
      const { category } = classify(spec.method, spec.path, false);
      const label = spec.contentType === 'application/apply-patch+yaml' ? `${category} (apply)` : category;
      bump(counted.byCategory, label);
      try {
        return await inner.request<T>(spec);
      } catch (err) {
        bump(counted.failures, `${label} ${err instanceof KubeApiError ? err.code : 'error'}`);
        throw err;
      }
    },
    stream(spec, onObject) {
      bump(counted.byCategory, classify('GET', spec.path, true).category);
      return inner.stream(spec, onObject);
    },
  };
  return { client, counted };
}

/** Sums a metric's samples (for histograms: the samples named `name + suffix`). */
export async function metric(registry: Registry, name: string, suffix = ''): Promise<number> {
  const m = registry.getSingleMetric(name);
  if (m === undefined) return 0;
  const { values } = await m.get();
  return values
    .filter((v) => ((v as { metricName?: string }).metricName ?? name) === name + suffix)
    .reduce((s, v) => s + v.value, 0);
}

/** The vault pool of a bench's controller, planned as the controller process plans (CONTROLLER_PLANS). */
export const controllerVaultPool = (
  dbUrl: string,
  applicationName: string,
): ReturnType<typeof createVaultPool> => createVaultPool(dbUrl, { applicationName, plans: CONTROLLER_PLANS });

/**
 * A stack kubeconfig loaded as the controller loads its own (src/kube/access.ts), so the bench's
 * controller processes (restart, memory) hold what a deployed one holds, without client-node.
 */
export function loadKube(file: string): KubeAccess {
  const access = kubeconfigAccess(readFileSync(file, 'utf8'), file);
  if (!access) throw new Error(`${file}: the stack's kubeconfigs need no exec plugin or proxy`);
  return access;
}

/**
 * The controller as the benches run it: in-process, `WORKERS` workers, the stack's S3 store, one
 * dev signer for both trust levels, silent logs, short lease timings, one watched namespace.
 */
export function startBenchController(opts: {
  client: KubeClient;
  vault: Vault;
  env: StackInfo['env'];
  signer: KeySigner;
  registry: Registry;
  leaseName: string;
  watchNamespace: string;
  attestationResources?: ResourcePolicy;
}): RunningController {
  const { env, signer } = opts;
  return startController({
    client: opts.client,
    vault: opts.vault,
    blobs: s3BlobStore({
      endpoint: env.S3_ENDPOINT!,
      accessKey: env.S3_ACCESS_KEY!,
      secretKey: env.S3_SECRET_KEY!,
      bucket: env.S3_BUCKET!,
    }),
    runtimeSigner: signer,
    envelopeSigner: () => Promise.resolve({ signer, authority: 'service' as const }),
    logger: pino({ level: 'silent' }),
    registry: opts.registry,
    namespace: 'aibom-vault-system',
    leaseName: opts.leaseName,
    watchNamespace: opts.watchNamespace,
    workers: WORKERS,
    lease: { durationSeconds: 6, renewDeadlineSeconds: 4, retryPeriodSeconds: 1 },
    ...(opts.attestationResources !== undefined ? { attestationResources: opts.attestationResources } : {}),
  });
}

/**
 * Waits until `done()` holds and the in-process controller of `registry` has had an empty queue, no
 * active worker and no new reconcile for 1.5 s.
 */
export async function settleController(
  ctx: Pick<BenchContext, 'throwIfStopping'>,
  registry: Registry,
  what: string,
  timeoutMs: number,
  done: () => Promise<boolean>,
): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  let quietSince: number | undefined;
  let last = -1;
  for (;;) {
    ctx.throwIfStopping();
    const reconciles = await metric(registry, 'controller_runtime_reconcile_total');
    const busy =
      (await metric(registry, 'workqueue_depth')) > 0 ||
      (await metric(registry, 'controller_runtime_active_workers')) > 0 ||
      reconciles !== last;
    last = reconciles;
    if (!busy && (await done())) {
      quietSince ??= Date.now();
      if (Date.now() - quietSince >= 1500) return;
    } else {
      quietSince = undefined;
    }
    if (Date.now() > deadline) throw new Error(`timed out after ${timeoutMs} ms waiting for ${what}`);
    await sleep(200);
  }
}

/** Waits (60 s at most) until `controller` leads with a synced Run informer. */
export async function waitLeading(controller: RunningController, registry: Registry): Promise<void> {
  const deadline = Date.now() + 60_000;
  while (!(controller.isLeader() && (await metric(registry, 'informer_synced')) === 1)) {
    if (Date.now() > deadline) throw new Error('the controller did not lead with a synced informer in 60 s');
    await sleep(100);
  }
}
