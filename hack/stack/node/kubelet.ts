import { mkdir, readdir, readFile, rmdir, writeFile } from 'node:fs/promises';
import { availableParallelism } from 'node:os';
import { join } from 'node:path';
import { stringify } from 'yaml';
import { freePort, startProcess, waitReady, type Launch, type Proc } from '../proc.ts';
import type { NodeTool, Tools } from '../tools.ts';

/** The node's name (its Node object) and so the kubelet's identity `system:node:<name>`. */
export const NODE_NAME = 'aibom-node';

/**
 * The cgroup (in every hierarchy) under which the kubelet makes `kubepods` and the pods' cgroups:
 * its own subtree, so `down` removes exactly it and a host's other cgroups are never touched.
 */
export const CGROUP_ROOT = '/aibom-vault-node';

/** The cgroup v1 hierarchies mounted under /sys/fs/cgroup (and the unified one, if any). */
export async function cgroupHierarchies(): Promise<string[]> {
  const mounts = await readFile('/proc/self/mountinfo', 'utf8');
  const out: string[] = [];
  for (const line of mounts.split('\n')) {
    const [pre, post] = line.split(' - ');
    if (!pre || !post) continue;
    const fstype = post.split(' ')[0];
    const mountPoint = pre.split(' ')[4];
    if ((fstype === 'cgroup' || fstype === 'cgroup2') && mountPoint?.startsWith('/sys/fs/cgroup/')) {
      out.push(mountPoint);
    }
  }
  return out;
}

/**
 * Creates CGROUP_ROOT in every hierarchy (the kubelet refuses a cgroupRoot that does not exist),
 * with the cpuset of the host's root (a new cpuset cgroup starts empty and admits no task), and a
 * CPU weight of one busy process per CPU of the machine (what the kubelet gives `kubepods` for
 * the node's allocatable CPUs). Without it the whole node (all pods together) weighs what one
 * process of the host's root cgroup weighs, and a busy host starves every pod.
 */
export async function createCgroupRoot(): Promise<void> {
  for (const h of await cgroupHierarchies()) {
    const dir = join(h, CGROUP_ROOT);
    await mkdir(dir, { recursive: true });
    await writeFile(join(dir, 'cpu.shares'), String(1024 * availableParallelism())).catch(() => undefined);
    for (const f of ['cpuset.cpus', 'cpuset.mems']) {
      try {
        const parent = (await readFile(join(h, f), 'utf8')).trim();
        if ((await readFile(join(dir, f), 'utf8')).trim() === '') await writeFile(join(dir, f), parent);
      } catch {
        /* not the cpuset hierarchy */
      }
    }
  }
}

/** CGROUP_ROOT and every cgroup under it in `hierarchy`, parents before their children. */
async function cgroupTree(hierarchy: string): Promise<string[]> {
  const dirs: string[] = [];
  const walk = async (d: string): Promise<void> => {
    let entries;
    try {
      entries = await readdir(d, { withFileTypes: true });
    } catch {
      return;
    }
    dirs.push(d);
    for (const e of entries) if (e.isDirectory()) await walk(join(d, e.name));
  };
  await walk(join(hierarchy, CGROUP_ROOT));
  return dirs;
}

/** The processes in any of `dirs` (cgroup.procs), without repeats. */
async function cgroupProcs(dirs: readonly string[]): Promise<number[]> {
  const pids = new Set<number>();
  for (const d of dirs) {
    const text = await readFile(join(d, 'cgroup.procs'), 'utf8').catch(() => '');
    for (const l of text.split('\n')) if (/^\d+$/.test(l)) pids.add(Number(l));
  }
  return [...pids];
}

/**
 * Kills every process still in the node's cgroups: the pods' processes outlive their shims (they
 * are reparented to init), so a node whose containerd died with its session leaves its
 * containers running with nobody to stop them. Everything in CGROUP_ROOT is the node's. Rounds
 * until none is left, for a process forked while the previous round was being killed and for
 * the dead ones init has not reaped yet (a v1 cgroup keeps a zombie, and cannot be removed).
 */
async function killCgroupProcs(dirs: readonly string[]): Promise<void> {
  const deadline = Date.now() + 60_000;
  for (let round = 0; Date.now() < deadline; round++) {
    const pids = await cgroupProcs(dirs);
    if (pids.length === 0) return;
    for (const pid of pids) {
      try {
        process.kill(pid, 'SIGKILL');
      } catch {
        /* gone already */
      }
    }
    await new Promise((r) => setTimeout(r, Math.min(1_000, 100 * (round + 1))));
  }
}

/**
 * Removes CGROUP_ROOT and everything under it, deepest first, in every hierarchy, after killing
 * the processes left in it. A cgroup that still cannot be removed is returned (with the pids it
 * holds), not hidden.
 */
export async function removeCgroupRoot(): Promise<string[]> {
  const left: string[] = [];
  const trees = await Promise.all((await cgroupHierarchies()).map(cgroupTree));
  await killCgroupProcs(trees.flat());
  for (const dirs of trees) {
    for (const d of dirs.reverse()) {
      let ok = false;
      for (let attempt = 0; attempt < 50 && !ok; attempt++) {
        try {
          await rmdir(d);
          ok = true;
        } catch (err) {
          if ((err as NodeJS.ErrnoException).code === 'ENOENT') ok = true;
          else await new Promise((r) => setTimeout(r, 100));
        }
      }
      if (!ok) {
        const procs = await readFile(join(d, 'cgroup.procs'), 'utf8').catch(() => '');
        left.push(`${d}${procs.trim() ? ` (processes ${procs.trim().split('\n').join(',')})` : ''}`);
      }
    }
  }
  return left;
}

export interface KubeletOptions {
  readonly dir: string;
  readonly tools: Tools<NodeTool>;
  readonly kubeconfig: string;
  readonly containerdSocket: string;
  readonly nodeAddress: string;
  /** CA of the API server's client certificate for the kubelet API (logs, exec, port-forward). */
  readonly clientCaFile: string;
  readonly logFile: string;
  readonly launch: Launch;
}

export interface Kubelet {
  readonly proc: Proc;
  readonly rootDir: string;
  readonly podLogsDir: string;
  readonly port: number;
}

/**
 * The kubelet's configuration for this machine: cgroup v1 hierarchies (1.35+ refuses them unless
 * `failCgroupV1: false`, KEP-5573) with the cgroupfs driver (no systemd as PID 1), its state, pod
 * volumes and pod logs under `dir`, authenticated and authorised API (webhook, as kubeadm sets it
 * up), and eviction thresholds low enough that a shared disk's usage does not evict the chart's
 * pods (a node of its own would keep the defaults).
 */
export function kubeletConfig(o: KubeletOptions, port: number, healthzPort: number): Record<string, unknown> {
  return {
    apiVersion: 'kubelet.config.k8s.io/v1beta1',
    kind: 'KubeletConfiguration',
    address: o.nodeAddress,
    port,
    readOnlyPort: 0,
    healthzBindAddress: '127.0.0.1',
    healthzPort,
    authentication: {
      anonymous: { enabled: false },
      webhook: { enabled: true },
      x509: { clientCAFile: o.clientCaFile },
    },
    authorization: { mode: 'Webhook' },
    cgroupDriver: 'cgroupfs',
    cgroupRoot: CGROUP_ROOT,
    cgroupsPerQOS: true,
    failCgroupV1: false,
    failSwapOn: false,
    containerRuntimeEndpoint: `unix://${o.containerdSocket}`,
    imageServiceEndpoint: `unix://${o.containerdSocket}`,
    podLogsDir: join(o.dir, 'pod-logs'),
    clusterDomain: 'cluster.local',
    resolvConf: '/etc/resolv.conf',
    registerNode: true,
    serializeImagePulls: false,
    protectKernelDefaults: false,
    evictionHard: {
      'memory.available': '100Mi',
      'nodefs.available': '1%',
      'nodefs.inodesFree': '1%',
      'imagefs.available': '1%',
    },
    imageGCHighThresholdPercent: 100,
    imageGCLowThresholdPercent: 99,
    nodeStatusUpdateFrequency: '10s',
    syncFrequency: '10s',
    maxPods: 110,
  };
}

export async function startKubelet(o: KubeletOptions): Promise<Kubelet> {
  const rootDir = join(o.dir, 'root');
  await mkdir(rootDir, { recursive: true });
  await mkdir(join(o.dir, 'pod-logs'), { recursive: true });
  const [port, healthzPort] = [await freePort(), await freePort()];
  const config = join(o.dir, 'config.yaml');
  await writeFile(config, stringify(kubeletConfig(o, port, healthzPort)));
  const proc = await startProcess({
    name: 'kubelet',
    command: o.tools.kubelet,
    args: [
      `--config=${config}`,
      `--kubeconfig=${o.kubeconfig}`,
      `--root-dir=${rootDir}`,
      `--cert-dir=${join(o.dir, 'pki')}`,
      `--hostname-override=${NODE_NAME}`,
      `--node-ip=${o.nodeAddress}`,
      '--v=1',
    ],
    logFile: o.logFile,
    env: { ...process.env, PATH: '/usr/local/sbin:/usr/sbin:/usr/bin:/sbin:/bin' },
    ...(o.launch.onSpawn ? { onSpawn: o.launch.onSpawn } : {}),
  });
  await waitReady(
    proc,
    async () => (await fetch(`http://127.0.0.1:${healthzPort}/healthz`)).ok,
    120_000,
    o.launch.signal,
  );
  return { proc, rootDir, podLogsDir: join(o.dir, 'pod-logs'), port };
}
