import { spawn } from 'node:child_process';
import { readdir, readFile, readlink, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import {
  CoordinationV1Api,
  CoreV1Api,
  KubeConfig,
  Watch,
  type CoreV1Event,
  type V1Pod,
} from '@kubernetes/client-node';
import { isAlive, startProcess, stopProcess, type Proc } from '../../../hack/stack/proc.ts';
import { CGROUP_ROOT } from '../../../hack/stack/node/kubelet.ts';
import { recordProcs, type NodeInfo } from '../../../hack/stack/node/index.ts';
import { retrying } from './pipeline.ts';

/** The admin's view of the cluster (the stack's static-token admin). */
export function adminConfig(kubeconfig: string): KubeConfig {
  const kc = new KubeConfig();
  kc.loadFromFile(kubeconfig);
  return kc;
}

export interface ReleasePods {
  readonly controller: V1Pod[];
  readonly api: V1Pod[];
}

const component = (p: V1Pod): string | undefined => p.metadata?.labels?.['app.kubernetes.io/component'];

/** The release's pods that are not being deleted, by component. */
export async function releasePods(kc: KubeConfig, namespace: string): Promise<ReleasePods> {
  const pods = await retrying(() => kc.makeApiClient(CoreV1Api).listNamespacedPod({ namespace }));
  const live = pods.items.filter((p) => !p.metadata?.deletionTimestamp);
  return {
    controller: live.filter((p) => component(p) === 'controller'),
    api: live.filter((p) => component(p) === 'api'),
  };
}

/**
 * The Lease's holder identity, `<pod>-<6 hex>` (src/controller/manager.ts): a new one per process,
 * so a container the kubelet restarted in the same pod holds a different identity.
 */
export async function leaseHolder(kc: KubeConfig, namespace: string, lease: string): Promise<string> {
  const l = await retrying(() =>
    kc.makeApiClient(CoordinationV1Api).readNamespacedLease({ name: lease, namespace }),
  );
  return l.spec?.holderIdentity ?? '';
}

/** Waits until the Lease names a holder identity other than `not` (and not ''); resolves to it. */
export async function waitNewLeader(
  kc: KubeConfig,
  namespace: string,
  lease: string,
  not: string,
  timeoutMs: number,
): Promise<string> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const h = await leaseHolder(kc, namespace, lease).catch(() => '');
    if (h !== '' && h !== not) return h;
    if (Date.now() > deadline)
      throw new Error(`no new leader (other than ${not}) within ${timeoutMs / 1000} s`);
    await new Promise((r) => setTimeout(r, 100));
  }
}

/** containerd's id of a pod's (only) container. */
export function containerId(pod: V1Pod): string {
  const id = pod.status?.containerStatuses?.[0]?.containerID ?? '';
  const m = /^containerd:\/\/([0-9a-f]{64})$/.exec(id);
  if (!m) throw new Error(`pod ${pod.metadata?.name} has no running container (${id})`);
  return m[1]!;
}

/**
 * The cgroup v1 memory directory of a container: the kubelet (cgroupfs driver) makes it
 * <CGROUP_ROOT>/kubepods[/<qos>]/pod<uid>/<container id>.
 */
export async function memoryCgroup(pod: V1Pod): Promise<string> {
  const id = containerId(pod);
  const uid = pod.metadata!.uid!;
  const base = join('/sys/fs/cgroup/memory', CGROUP_ROOT, 'kubepods');
  for (const qos of ['', 'burstable', 'besteffort']) {
    const dir = join(base, qos, `pod${uid}`, id);
    if (await readFile(join(dir, 'memory.usage_in_bytes'), 'utf8').catch(() => undefined)) return dir;
  }
  throw new Error(`no memory cgroup for container ${id} of pod ${pod.metadata?.name} under ${base}`);
}

export interface MemoryView {
  readonly limit: number;
  readonly peak: number;
  readonly oomKills: number;
  readonly failcnt: number;
}

/** Peak (memory.max_usage_in_bytes), limit, and the OOM-kill count of a container's cgroup. */
export async function memoryOf(dir: string): Promise<MemoryView> {
  const num = async (f: string): Promise<number> => Number((await readFile(join(dir, f), 'utf8')).trim());
  const oom = await readFile(join(dir, 'memory.oom_control'), 'utf8');
  return {
    limit: await num('memory.limit_in_bytes'),
    peak: await num('memory.max_usage_in_bytes'),
    failcnt: await num('memory.failcnt'),
    oomKills: Number(/^oom_kill (\d+)$/m.exec(oom)?.[1] ?? 0),
  };
}

/** Starts a fresh peak measurement (cgroup v1: writing 0 resets memory.max_usage_in_bytes). */
export async function resetPeak(dir: string): Promise<void> {
  await writeFile(join(dir, 'memory.max_usage_in_bytes'), '0');
}

/** The host pid of a container's main process: the one task in its cgroup's cgroup.procs. */
export async function containerPid(pod: V1Pod): Promise<number> {
  const procs = (await readFile(join(await memoryCgroup(pod), 'cgroup.procs'), 'utf8')).trim().split('\n');
  // The container runs one process (the image has no shell and no init): its entry point.
  for (const p of procs) {
    const cmd = await readFile(`/proc/${p}/cmdline`, 'utf8').catch(() => '');
    if (cmd.includes('controller') || cmd.includes('sidecar')) return Number(p);
  }
  throw new Error(`no controller/sidecar process among ${procs.join(',')} of pod ${pod.metadata?.name}`);
}

/** Events of a namespace (e.g. liveness restarts: reason Killing, "failed liveness probe"). */
export async function events(kc: KubeConfig, namespace: string): Promise<CoreV1Event[]> {
  return (await retrying(() => kc.makeApiClient(CoreV1Api).listNamespacedEvent({ namespace }))).items;
}

/** Container restarts of the release's pods and the liveness kills the kubelet reported. */
export async function restartsAndLivenessKills(
  kc: KubeConfig,
  namespace: string,
): Promise<{ restarts: Record<string, number>; livenessKills: string[]; unhealthy: string[] }> {
  const pods = await releasePods(kc, namespace);
  const restarts: Record<string, number> = {};
  for (const p of [...pods.controller, ...pods.api]) {
    restarts[p.metadata!.name!] = p.status?.containerStatuses?.[0]?.restartCount ?? 0;
  }
  const ev = await events(kc, namespace);
  const msg = (e: CoreV1Event): string =>
    `${e.involvedObject.name}: ${e.reason} ${e.message ?? ''} (x${e.count ?? 1})`;
  return {
    restarts,
    livenessKills: ev.filter((e) => e.reason === 'Killing' && /liveness/i.test(e.message ?? '')).map(msg),
    unhealthy: ev.filter((e) => e.reason === 'Unhealthy').map(msg),
  };
}

/**
 * Stops a stack server (its process group, SIGTERM then SIGKILL) for `downMs` and starts it again
 * exactly as it was: the same executable, arguments, environment, working directory and log
 * file. Replaces its entry in the stack's `procs` (so the test's own stopStack stops the new
 * process) and writes the list into the node's owner file (so `npm run stack -- down` of a node
 * whose test run died stops the new process too, and nothing under the old id).
 */
export async function restartServer(
  stack: { readonly procs: Proc[]; readonly root: string; readonly node?: NodeInfo },
  name: string,
  downMs: number,
): Promise<{ stoppedAt: number; startedAt: number; oldPid: number; newPid: number }> {
  const procs = stack.procs;
  const i = procs.findIndex((p) => p.name === name);
  if (i < 0) throw new Error(`no ${name} in the stack`);
  const old = procs[i]!;
  const argv = (await readFile(`/proc/${old.pid}/cmdline`, 'utf8')).split('\0').filter((a) => a !== '');
  const env = Object.fromEntries(
    (await readFile(`/proc/${old.pid}/environ`, 'utf8'))
      .split('\0')
      .filter((kv) => kv.includes('='))
      .map((kv) => [kv.slice(0, kv.indexOf('=')), kv.slice(kv.indexOf('=') + 1)]),
  );
  const cwd = await readlink(`/proc/${old.pid}/cwd`);
  const exe = await readlink(`/proc/${old.pid}/exe`);
  await stopProcess(old.pid);
  const stoppedAt = Date.now();
  await new Promise((r) => setTimeout(r, downMs));
  const fresh = await startProcess({
    name,
    command: exe,
    args: argv.slice(1),
    env,
    cwd,
    logFile: old.logFile,
  });
  procs[i] = fresh;
  if (stack.node) await recordProcs(stack.node, stack.root, procs);
  if (!isAlive(fresh.pid)) throw new Error(`${name} did not come back`);
  return { stoppedAt, startedAt: Date.now(), oldPid: old.pid, newPid: fresh.pid };
}

/** Lines of the pod logs the kubelet wrote for a pod (for a failure's message). */
export async function podLogTail(podLogsDir: string, pod: string, lines = 40): Promise<string> {
  const dirs = (await readdir(podLogsDir).catch(() => [] as string[])).filter((d) => d.includes(`_${pod}_`));
  const out: string[] = [];
  for (const d of dirs) {
    for (const c of await readdir(join(podLogsDir, d)).catch(() => [] as string[])) {
      for (const f of await readdir(join(podLogsDir, d, c)).catch(() => [] as string[])) {
        const text = await readFile(join(podLogsDir, d, c, f), 'utf8').catch(() => '');
        out.push(`--- ${d}/${c}/${f}`, ...text.trimEnd().split('\n').slice(-lines));
      }
    }
  }
  return out.join('\n');
}

/**
 * `kubectl logs -f` of a pod's container from now until the container exits: what its process
 * wrote on the way out (the kubelet deletes a pod's log files with the pod, so reading them after
 * the fact finds nothing).
 */
export function followLogs(
  kubectlBin: string,
  kubeconfig: string,
  namespace: string,
  pod: string,
): { text: () => string; done: Promise<void> } {
  let out = '';
  const child = spawn(
    kubectlBin,
    [`--kubeconfig=${kubeconfig}`, 'logs', '-f', '--tail=-1', '-n', namespace, pod],
    {
      stdio: ['ignore', 'pipe', 'pipe'],
    },
  );
  child.stdout.on('data', (d: Buffer) => (out += d.toString()));
  child.stderr.on('data', (d: Buffer) => (out += d.toString()));
  const done = new Promise<void>((resolve) => child.once('close', () => resolve()));
  return { text: () => out, done };
}

/**
 * Watches one pod until it is deleted and keeps the last terminated state of its container: the
 * kubelet reports it just before the pod object goes, too briefly for polling to see reliably.
 */
export async function watchPodToDeletion(
  kc: KubeConfig,
  namespace: string,
  name: string,
): Promise<{ gone: Promise<{ exitCode?: number; finishedAt?: Date; goneAt: number }> }> {
  let last: { exitCode?: number; finishedAt?: Date } = {};
  let resolveGone: (v: { exitCode?: number; finishedAt?: Date; goneAt: number }) => void = () => undefined;
  const gone = new Promise<{ exitCode?: number; finishedAt?: Date; goneAt: number }>(
    (r) => (resolveGone = r),
  );
  await new Watch(kc).watch(
    `/api/v1/namespaces/${namespace}/pods`,
    { fieldSelector: `metadata.name=${name}` },
    (phase: string, obj: V1Pod) => {
      const t = obj.status?.containerStatuses?.[0]?.state?.terminated;
      if (t) last = { exitCode: t.exitCode, ...(t.finishedAt ? { finishedAt: new Date(t.finishedAt) } : {}) };
      if (phase === 'DELETED') resolveGone({ ...last, goneAt: Date.now() });
    },
    () => resolveGone({ ...last, goneAt: Date.now() }),
  );
  return { gone };
}
