/**
 * A real single-node cluster beside the local stack (`npm run stack -- up --node`, the e2e suite):
 * containerd 2.x with Debian's runc and CNI plugins, the kubelet, kube-scheduler and kube-proxy of
 * the pinned Kubernetes, the pause image built here, the project's image from hack/image.sh, and
 * the chart from the working tree installed onto it. Everything lives under the stack's temp dir
 * except what the kernel keeps (the bridge, the kubelet's cgroup subtree, kube-proxy's nftables
 * tables, kernel settings the kubelet changes); stopNode removes each of those and reports what it
 * could not. One node per machine: the bridge and the nftables tables are the host's.
 */
import { mkdir, readFile, rm, stat, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { basename, dirname, join } from 'node:path';
import { generateDevPki } from '../../dev-pki.ts';
import {
  isRunning,
  startProcess,
  stopProc,
  stopProcess,
  waitReady,
  type Launch,
  type Proc,
} from '../proc.ts';
import { ensureTools, NODE_TOOLS, type NodeTool, type Tools } from '../tools.ts';
import type { KubeNodeOptions } from '../kube.ts';
import {
  createPrerequisites,
  chartValues,
  imageRef,
  installChart,
  kubectl,
  NODE_NAMESPACE,
  NODE_RELEASE,
  serviceUrl,
  waitRolledOut,
  type ChartTarget,
  type ChartWiring,
} from './chart.ts';
import { claimNode, readClaim, readOwner } from './claim.ts';
import { importLayout, removeAllContainers, startContainerd } from './containerd.ts';
import { cleanupProxy, startProxy, startScheduler } from './control.ts';
import { KUBELET_SYSCTLS, restoreSysctls, run, saveSysctls, trySh } from './host.ts';
import { buildPauseLayout, pauseImageName, projectImage } from './images.ts';
import { CGROUP_ROOT, createCgroupRoot, NODE_NAME, removeCgroupRoot, startKubelet } from './kubelet.ts';
import { unmountUnder } from './mounts.ts';
import {
  bridgeExists,
  CNI_NETWORK_NAME,
  createBridge,
  deleteBridge,
  NODE_NETWORK,
  writeCniConfig,
} from './network.ts';

/**
 * Paths outside the node's directory that its components write to and cannot be told otherwise:
 * containerd's shims' sockets (/run/containerd/s, compiled in), the kubelet's log symlinks
 * (/var/log/containers) and device-plugin socket (/var/lib/kubelet/device-plugins: not under
 * --root-dir), libcni's result cache (/var/lib/cni/results, not configurable through containerd),
 * and libmount's state of the teardown's `umount` (/run/mount). Each one the node created is
 * removed with it; in one that was there before, only the node's own entries are.
 */
const HOST_PATHS = [
  '/run/containerd',
  '/var/log/containers',
  '/var/lib/kubelet',
  '/var/lib/cni',
  '/run/mount',
];

/** Who owns the machine's node right now (the bridge and the nftables tables are host-wide). */
const OWNER_FILE = '/run/aibom-vault-node.json';
/** The node's processes in StackInfo.procs, in start order (stopNode stops them in reverse). */
export const NODE_PROCS = [
  'node-forwarder',
  'containerd',
  'kubelet',
  'kube-scheduler',
  'kube-proxy',
] as const;
/** The tag the working tree's image is loaded under (an upgrade test loads others). */
export const NODE_IMAGE_TAG = 'node';

/** Everything stopNode needs, serialisable (the stack's state.json), filled in as the node starts. */
export interface NodeInfo {
  readonly dir: string;
  readonly address: string;
  readonly bridge: string;
  readonly release: string;
  readonly namespace: string;
  tools?: Tools<NodeTool>;
  containerdSocket?: string;
  kubeletRootDir?: string;
  podLogsDir?: string;
  proxyConfig?: string;
  /** Kernel settings as they were before the kubelet started (restored by stopNode). */
  sysctls?: Record<string, string>;
  /**
   * The host's nftables tables before the node started (`ip filter`, ...). The kubelet adds its
   * iptables chains (KUBE-FIREWALL, KUBE-KUBELET-CANARY, KUBE-IPTABLES-HINT) through iptables-nft,
   * creating those tables if they were not there: tables the node created are deleted on the way
   * out, and its chains are removed from tables that were there before.
   */
  nftTables?: string[];
  /** Which of HOST_PATHS existed before the node started (those it made are removed by stopNode). */
  hostPathsBefore?: string[];
  /** containerd's containers (sandboxes included) when the teardown began: their CNI cache files go. */
  containers?: string[];
  image?: { readonly ref: string; readonly tag: string; readonly digest: string; readonly layout: string };
  /** The API through its Service (SERVICE_API_URL). */
  apiUrl?: string;
  chart?: ChartTarget;
  /**
   * The `npm run stack` state dir whose stack this is (absent for a test run's): a `down` in
   * another checkout tells from it that the node is not its own to stop.
   */
  stateDir?: string;
}

/** The Debian packages the node runs (hack/ensure-node-packages.sh installs them). */
const HOST_BINARIES = {
  runc: '/usr/sbin/runc',
  nft: '/usr/sbin/nft',
  'CNI bridge plugin': '/usr/lib/cni/bridge',
  'CNI host-local plugin': '/usr/lib/cni/host-local',
  'CNI loopback plugin': '/usr/lib/cni/loopback',
  ip: '/usr/sbin/ip',
  tar: '/usr/bin/tar',
} as const;

async function checkHost(): Promise<void> {
  if (process.getuid?.() !== 0)
    throw new Error('the node needs root (a kubelet, a container runtime, a bridge)');
  const missing: string[] = [];
  for (const [what, path] of Object.entries(HOST_BINARIES)) {
    if (!(await stat(path).catch(() => undefined))) missing.push(`${what} (${path})`);
  }
  if (missing.length) {
    throw new Error(
      `the node needs ${missing.join(', ')}: run \`bash hack/ensure-node-packages.sh\` (Debian packages, as root)`,
    );
  }
}

export interface Owner {
  readonly root: string;
  /** The process that started it (`up`, a test run). */
  readonly pid: number;
  readonly node?: NodeInfo;
  readonly procs?: readonly Proc[];
}

/**
 * First half, before the control plane starts: host checks, the bridge (the API server advertises
 * the node's address), the kubelet API's client certificate, the node's users. Returns the
 * options for startKube and the NodeInfo to keep.
 */
export async function prepareNode(
  root: string,
  procs: readonly Proc[],
  claimWait: { readonly ms: number; readonly log?: (line: string) => void } = { ms: 0 },
  stateDir?: string,
): Promise<{ node: NodeInfo; kube: KubeNodeOptions }> {
  await checkHost();
  const dir = join(root, 'node');
  await mkdir(dir, { recursive: true, mode: 0o711 });
  await claimNode<Owner>(root, {
    file: OWNER_FILE,
    waitMs: claimWait.ms,
    ...(claimWait.log ? { log: claimWait.log } : {}),
    leftovers: async (owner) => Boolean(owner?.node) || (await bridgeExists()),
    cleanup: async (owner) => {
      const problems = await cleanupHost(owner?.node);
      if (problems.length) {
        throw new Error(`leftovers of an earlier node could not be removed:\n  ${problems.join('\n  ')}`);
      }
      // A stale stack's temp dir (its processes gone, its mounts removed just now) is what a
      // killed run left: gigabytes of data and logs nobody will `down` (cli.ts does the same).
      if (
        owner &&
        dirname(owner.root) === tmpdir() &&
        basename(owner.root).startsWith('aibom-vault-stack-')
      ) {
        await rm(owner.root, { recursive: true, force: true });
      }
    },
  });
  const node: NodeInfo = {
    dir,
    address: NODE_NETWORK.address,
    bridge: NODE_NETWORK.bridge,
    release: NODE_RELEASE,
    namespace: NODE_NAMESPACE,
    ...(stateDir !== undefined ? { stateDir } : {}),
  };
  await writeOwner(node, root, procs);
  await createBridge();
  // The API server's client certificate for the kubelet API, from a CA only the kubelet trusts
  // (kubeadm's apiserver-kubelet-client); RBAC binds its user to system:kubelet-api-admin.
  const pki = await generateDevPki({
    caCommonName: 'aibom-vault node kubelet-client CA',
    leafCommonName: 'kube-apiserver-kubelet-client',
    extraLeafEkus: ['1.3.6.1.5.5.7.3.2'],
    notAfter: new Date(Date.now() + 30 * 86_400_000),
  });
  const pkiDir = join(dir, 'pki');
  await mkdir(pkiDir, { recursive: true, mode: 0o700 });
  await writeFile(join(pkiDir, 'kubelet-client.crt'), pki['tls.crt']);
  await writeFile(join(pkiDir, 'kubelet-client.key'), pki['tls.key'], { mode: 0o600 });
  await writeFile(join(pkiDir, 'kubelet-client-ca.crt'), pki['ca.crt']);
  return {
    node,
    kube: {
      address: NODE_NETWORK.address,
      users: {
        [`system:node:${NODE_NAME}`]: ['system:nodes'],
        'system:kube-scheduler': [],
        'system:kube-proxy': [],
      },
      kubeletClient: {
        certFile: join(pkiDir, 'kubelet-client.crt'),
        keyFile: join(pkiDir, 'kubelet-client.key'),
      },
    },
  };
}

/**
 * The owner file: which stack holds the node, with its processes and the node's state, so that a
 * node whose `up` died before saving its state (killed, crashed) can still be torn down
 * (`npm run stack -- down` finds it here: nodeOwner).
 */
async function writeOwner(node: NodeInfo, root: string, procs: readonly Proc[]): Promise<void> {
  const owner: Owner = { root, pid: process.pid, node, procs };
  await writeFile(OWNER_FILE, JSON.stringify(owner), { mode: 0o600 });
}

/**
 * Writes the stack's process list into the owner file again after it changed while the node runs
 * (the e2e suite restarts kube-apiserver and etcd under new process ids): `down` of an orphaned
 * node stops the processes listed there, which must be the ones running now, not ids that are gone
 * (or that the kernel has since handed to someone else's process).
 */
export async function recordProcs(node: NodeInfo, root: string, procs: readonly Proc[]): Promise<void> {
  await writeOwner(node, root, procs);
}

/** Whether the owner file names another stack than the one `node` belongs to. */
async function takenOver(node: NodeInfo): Promise<boolean> {
  const owner = (await readOwner<Owner>(OWNER_FILE))?.owner;
  return owner !== undefined && join(owner.root, 'node') !== node.dir;
}

/**
 * The stack that holds the node (the owner file, once its node started): whether it is live and
 * whether the process that claimed it still runs (claim.ts readClaim).
 */
export async function nodeOwner(): Promise<
  | {
      readonly owner: Owner & { readonly node: NodeInfo };
      readonly live: boolean;
      readonly claimantRuns: boolean;
    }
  | undefined
> {
  const read = await readClaim<Owner>(OWNER_FILE);
  const node = read?.owner.node;
  return read && node ? { ...read, owner: { ...read.owner, node } } : undefined;
}

/** What startNode needs of the stack (a subset of StackInfo). */
export interface NodeStackView {
  readonly root: string;
  readonly repoRoot: string;
  readonly tools: { readonly kubectl: string };
  readonly kube: {
    readonly server: string;
    readonly kubeconfig: string;
    readonly nodeKubeconfigs: Record<string, string>;
  };
  /** The stack's processes so far (the owner file lists them for an orphaned node's teardown). */
  readonly procs: readonly Proc[];
  /** Loopback ports the forwarder exposes on the node's address. */
  readonly forward: readonly number[];
  readonly wiring: Omit<ChartWiring, 'nodeAddress'>;
  readonly settings: Record<string, string>;
}

/**
 * Second half, after the control plane and the servers are up: forwarder, containerd with the
 * pause and project images, the kubelet (Node Ready), scheduler, kube-proxy, then the chart; waits
 * until both Deployments rolled out. Fills `node` as it goes, so stopNode can undo a failed start.
 */
export async function startNode(
  node: NodeInfo,
  s: NodeStackView,
  launch: Launch,
  log: (line: string) => void,
): Promise<NodeInfo> {
  const timed = async <T>(what: string, fn: () => Promise<T>): Promise<T> => {
    const t0 = performance.now();
    const out = await fn();
    log(`node: ${what} in ${Math.round(performance.now() - t0)} ms`);
    return out;
  };
  const tools = await timed('tools', () => ensureTools(NODE_TOOLS));
  node.tools = tools;
  const hook = launch.onSpawn ? { onSpawn: launch.onSpawn } : {};
  const fwd = await startProcess({
    name: 'node-forwarder',
    command: process.execPath,
    args: [
      join(s.repoRoot, 'hack/stack/node/forwarder.ts'),
      ...s.forward.map((p) => `${node.address}:${p}=127.0.0.1:${p}`),
    ],
    logFile: join(s.root, 'node-forwarder.log'),
    ...hook,
  });
  await waitReady(
    fwd,
    async () => (await readFile(fwd.logFile, 'utf8')).includes('forwarding'),
    30_000,
    launch.signal,
  );

  await createCgroupRoot();
  node.sysctls = await saveSysctls(KUBELET_SYSCTLS);
  node.nftTables = await nftTables();
  node.hostPathsBefore = [];
  for (const p of HOST_PATHS) if (await stat(p).catch(() => undefined)) node.hostPathsBefore.push(p);
  await writeOwner(node, s.root, s.procs);
  const { confDir } = await writeCniConfig(node.dir);
  const pauseVersion = tools.pause
    .split('/')
    .at(-2)!
    .replace(/^pause-/, '');
  const pauseName = pauseImageName(pauseVersion);
  const containerd = await timed('containerd', () =>
    startContainerd(
      join(node.dir, 'containerd'),
      tools,
      pauseName,
      confDir,
      join(s.root, 'containerd.log'),
      launch,
    ),
  );
  node.containerdSocket = containerd.socket;
  await writeOwner(node, s.root, s.procs);
  const work = join(node.dir, 'images');
  await timed('pause image', async () =>
    importLayout(
      tools,
      containerd.socket,
      await buildPauseLayout(tools.pause, work, pauseVersion),
      pauseName,
      work,
    ),
  );
  const image = await timed('project image (hack/image.sh)', () => projectImage(s.repoRoot));
  const ref = imageRef(NODE_IMAGE_TAG);
  await timed('project image import', () => importLayout(tools, containerd.socket, image.layout, ref, work));
  node.image = { ref, tag: NODE_IMAGE_TAG, digest: image.digest, layout: image.layout };

  const nodeKubeconfig = (user: string): string => {
    const k = s.kube.nodeKubeconfigs[user];
    if (!k) throw new Error(`the control plane has no kubeconfig for ${user}`);
    return k;
  };
  const kubelet = await timed('kubelet', () =>
    startKubelet({
      dir: join(node.dir, 'kubelet'),
      tools,
      kubeconfig: nodeKubeconfig(`system:node:${NODE_NAME}`),
      containerdSocket: containerd.socket,
      nodeAddress: node.address,
      clientCaFile: join(node.dir, 'pki', 'kubelet-client-ca.crt'),
      logFile: join(s.root, 'kubelet.log'),
      launch,
    }),
  );
  node.kubeletRootDir = kubelet.rootDir;
  node.podLogsDir = kubelet.podLogsDir;
  await writeOwner(node, s.root, s.procs);
  await timed('kube-scheduler', () =>
    startScheduler(
      node.dir,
      tools,
      nodeKubeconfig('system:kube-scheduler'),
      join(s.root, 'kube-scheduler.log'),
      launch,
    ),
  );
  const proxy = await timed('kube-proxy', () =>
    startProxy(node.dir, tools, nodeKubeconfig('system:kube-proxy'), join(s.root, 'kube-proxy.log'), launch),
  );
  node.proxyConfig = proxy.config;
  await writeOwner(node, s.root, s.procs);

  const chart: ChartTarget = {
    helm: tools.helm,
    kubectl: s.tools.kubectl,
    kubeconfig: s.kube.kubeconfig,
    helmHome: join(node.dir, 'helm'),
    chartDir: join(s.repoRoot, 'charts/aibom-vault'),
    release: node.release,
    namespace: node.namespace,
  };
  node.chart = chart;
  // The API server's kubelet client (logs, exec, port-forward), as kubeadm binds it.
  await kubectl(
    chart,
    ['apply', '--server-side', '-f', '-'],
    JSON.stringify({
      apiVersion: 'rbac.authorization.k8s.io/v1',
      kind: 'ClusterRoleBinding',
      metadata: { name: 'aibom-vault-node:kube-apiserver-kubelet-client' },
      roleRef: {
        apiGroup: 'rbac.authorization.k8s.io',
        kind: 'ClusterRole',
        name: 'system:kubelet-api-admin',
      },
      subjects: [
        { apiGroup: 'rbac.authorization.k8s.io', kind: 'User', name: 'kube-apiserver-kubelet-client' },
      ],
    }),
  );
  await timed('Node Ready', () => waitNodeReady(chart, 120_000, launch.signal));
  const wiring: ChartWiring = { ...s.wiring, nodeAddress: node.address };
  await timed('chart prerequisites', () => createPrerequisites(chart, wiring));
  await timed('helm install', () =>
    installChart(
      chart,
      chartValues(chart, wiring, NODE_IMAGE_TAG, s.settings),
      join(node.dir, 'values'),
      'install',
    ),
  );
  await timed('both Deployments rolled out (2 Ready replicas each)', () =>
    waitRolledOut(chart, 300_000, launch.signal),
  );
  node.apiUrl = await serviceUrl(chart);
  await timed('API through its Service', () => waitApi(node.apiUrl!, 60_000, launch.signal));
  await writeOwner(node, s.root, s.procs);
  return node;
}

async function waitNodeReady(t: ChartTarget, timeoutMs: number, signal?: AbortSignal): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  let last = '';
  while (Date.now() < deadline) {
    signal?.throwIfAborted();
    const out = await kubectl(t, ['get', 'node', NODE_NAME, '-o', 'json']).catch((e: unknown) => String(e));
    try {
      const n = JSON.parse(out) as {
        status?: { conditions?: { type: string; status: string; message?: string }[] };
      };
      const ready = n.status?.conditions?.find((c) => c.type === 'Ready');
      if (ready?.status === 'True') return;
      last = ready?.message ?? 'no Ready condition yet';
    } catch {
      last = out;
    }
    await new Promise((r) => setTimeout(r, 500));
  }
  throw new Error(`node ${NODE_NAME} not Ready after ${timeoutMs / 1000} s: ${last}`);
}

async function waitApi(url: string, timeoutMs: number, signal?: AbortSignal): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  let last = '';
  while (Date.now() < deadline) {
    signal?.throwIfAborted();
    try {
      const r = await fetch(`${url}/readyz`, { signal: AbortSignal.timeout(3000) });
      if (r.ok) return;
      last = `HTTP ${r.status}`;
    } catch (err) {
      last = (err as Error).message;
    }
    await new Promise((r) => setTimeout(r, 500));
  }
  throw new Error(
    `the API did not answer through its Service at ${url} within ${timeoutMs / 1000} s: ${last}`,
  );
}

/**
 * Stops the node's processes (kube-proxy, scheduler, kubelet first, so nothing restarts a pod),
 * removes every container and sandbox through containerd, stops containerd and the forwarder,
 * then removes what the kernel keeps: mounts under the node's dir, the cgroup subtree,
 * kube-proxy's nftables tables, the bridge, the kubelet's log symlinks in /var/log/containers,
 * and restores the kernel settings. Returns what it could not remove (empty: nothing left).
 */
export async function stopNode(node: NodeInfo, procs: readonly Proc[]): Promise<string[]> {
  const byName = (n: string): Proc | undefined => procs.find((p) => p.name === n);
  if (await takenOver(node)) {
    // The host's node state (bridge, cgroups, tables, sysctls) is another stack's now: a claim
    // found this one stale (its processes gone) and took the node. Only this stack's own
    // processes are stopped (stopStack), which are gone too.
    return [];
  }
  for (const n of ['kube-proxy', 'kube-scheduler', 'kubelet']) {
    const p = byName(n);
    if (p) await stopProc(p);
  }
  const problems: string[] = [];
  // An orphaned node whose containerd died with its `up` has nobody to ask for the containers: its
  // shims, mounts and cgroups are what is left of them, and cleanupHost removes those directly.
  const containerd = byName('containerd');
  if (node.tools && node.containerdSocket && containerd && isRunning(containerd)) {
    const { ids, problems: p } = await removeAllContainers(node.tools, node.containerdSocket);
    node.containers = ids;
    problems.push(...p);
  }
  for (const n of ['containerd', 'node-forwarder']) {
    const p = byName(n);
    if (p) await stopProc(p);
  }
  problems.push(...(await cleanupHost(node)));
  return problems;
}

/** The host-wide part of the teardown; safe to run on a partial or already cleaned node. */
async function cleanupHost(node: NodeInfo | undefined): Promise<string[]> {
  const problems: string[] = [];
  if (node?.tools) await killShims(node.tools['containerd-shim-runc-v2']);
  // The containers' processes go with their cgroups (they outlive their shims) before their
  // mounts are taken away from under them.
  problems.push(...(await removeCgroupRoot()));
  if (node) {
    const left = await unmountUnder(node.dir);
    problems.push(...left.map((m) => `still mounted: ${m}`));
  }
  if (node?.tools && node.proxyConfig) problems.push(...(await cleanupProxy(node.tools, node.proxyConfig)));
  if (node?.nftTables) problems.push(...(await removeNodeTables(node.nftTables)));
  problems.push(...(await deleteBridge()));
  if (node?.podLogsDir) problems.push(...(await removeLogLinks(node.podLogsDir)));
  if (node?.sysctls) {
    const failed = await restoreSysctls(node.sysctls);
    problems.push(...failed.map((k) => `kernel setting ${k} not restored`));
  }
  if (node?.hostPathsBefore)
    problems.push(...(await removeHostPaths(node.hostPathsBefore, node.containers ?? [])));
  // Kept while something is left, so that the next `down` or claim can try again with what it says.
  if (problems.length === 0) await rm(OWNER_FILE, { force: true });
  return problems;
}

/** Removes the HOST_PATHS the node created, and its own entries from those that were there. */
async function removeHostPaths(before: readonly string[], containers: readonly string[]): Promise<string[]> {
  const problems: string[] = [];
  for (const p of HOST_PATHS) {
    if (!before.includes(p)) {
      await rm(p, { recursive: true, force: true }).catch((e: unknown) =>
        problems.push(`${p}: ${String(e)}`),
      );
    }
  }
  if (before.includes('/var/lib/cni')) {
    const { readdir, unlink } = await import('node:fs/promises');
    const dir = '/var/lib/cni/results';
    for (const f of await readdir(dir).catch(() => [] as string[])) {
      if (f.startsWith(`${CNI_NETWORK_NAME}-`) || containers.some((id) => f === `cni-loopback-${id}-lo`)) {
        await unlink(join(dir, f)).catch((e: unknown) => problems.push(`${join(dir, f)}: ${String(e)}`));
      }
    }
  }
  return problems;
}

/** `family name` of every nftables table of the host. */
async function nftTables(): Promise<string[]> {
  const out = await trySh('nft', ['list', 'tables']);
  if (out instanceof Error) return [];
  return out
    .split('\n')
    .map((l) => /^table (\S+) (\S+)/.exec(l.trim()))
    .filter((m): m is RegExpExecArray => m !== null)
    .map((m) => `${m[1]} ${m[2]}`);
}

/** The chains the kubelet creates through iptables(-nft), in every table it uses. */
const KUBELET_CHAINS = ['KUBE-FIREWALL', 'KUBE-KUBELET-CANARY', 'KUBE-IPTABLES-HINT'];

/**
 * Deletes the nftables tables that were not there before the node (kube-proxy's own `kube-proxy`
 * tables, and the iptables-nft tables the kubelet's chains brought), and removes the kubelet's
 * chains (and the rules jumping to them) from tables that were.
 */
async function removeNodeTables(before: readonly string[]): Promise<string[]> {
  const problems: string[] = [];
  for (const t of await nftTables()) {
    const [family, name] = t.split(' ') as [string, string];
    if (!before.includes(t)) {
      const r = await trySh('nft', ['delete', 'table', family, name]);
      if (r instanceof Error) problems.push(`nftables table ${t}: ${r.message}`);
      continue;
    }
    if (family !== 'ip' && family !== 'ip6') continue;
    const cmd = family === 'ip' ? 'iptables' : 'ip6tables';
    for (const chain of KUBELET_CHAINS) {
      if ((await trySh(cmd, ['-t', name, '-S', chain])) instanceof Error) continue;
      // Rules elsewhere in the table that jump to it (the kubelet's INPUT/OUTPUT jumps to KUBE-FIREWALL).
      const rules = await trySh(cmd, ['-t', name, '-S']);
      if (typeof rules === 'string') {
        for (const rule of rules
          .split('\n')
          .filter((l) => l.startsWith('-A ') && l.includes(`-j ${chain}`))) {
          await trySh(cmd, ['-t', name, ...rule.replace(/^-A /, '-D ').split(' ')]);
        }
      }
      await trySh(cmd, ['-t', name, '-F', chain]);
      const r = await trySh(cmd, ['-t', name, '-X', chain]);
      if (r instanceof Error) problems.push(`${cmd} -t ${name} chain ${chain}: ${r.message}`);
    }
  }
  return problems;
}

/** Shim processes of this node's containerd (their binary is the node's), killed if still alive. */
async function killShims(shim: string): Promise<void> {
  const { readdir, readlink } = await import('node:fs/promises');
  for (const pid of await readdir('/proc')) {
    if (!/^\d+$/.test(pid)) continue;
    const exe = await readlink(`/proc/${pid}/exe`).catch(() => '');
    if (exe === shim) await stopProcess(Number(pid), 2000);
  }
}

/** The kubelet's symlinks in /var/log/containers (a path it cannot be told) into our pod logs. */
async function removeLogLinks(podLogsDir: string): Promise<string[]> {
  const { readdir, readlink, unlink } = await import('node:fs/promises');
  const dir = '/var/log/containers';
  const names = await readdir(dir).catch(() => [] as string[]);
  const problems: string[] = [];
  for (const n of names) {
    const target = await readlink(join(dir, n)).catch(() => '');
    if (target.startsWith(`${podLogsDir}/`)) {
      await unlink(join(dir, n)).catch((e: unknown) => problems.push(`${join(dir, n)}: ${String(e)}`));
    }
  }
  return problems;
}

export { CGROUP_ROOT, run };
