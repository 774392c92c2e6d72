import { mkdir, mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { dirname, join } from 'node:path';
import { startProcess, waitReady, type Launch, type Proc } from '../proc.ts';
import { sh, trySh } from './host.ts';
import type { NodeTool, Tools } from '../tools.ts';

/** containerd's namespace for everything the CRI plugin (and so the kubelet) manages. */
export const CRI_NAMESPACE = 'k8s.io';

export interface Containerd {
  readonly proc: Proc;
  /** Path of its gRPC socket (the kubelet's containerRuntimeEndpoint is unix://<socket>). */
  readonly socket: string;
}

/** Debian's runc (hack/ensure-node-packages.sh installs it). */
export const RUNC = '/usr/sbin/runc';
/** Debian's CNI plugins (package containernetworking-plugins). */
export const CNI_BIN_DIR = '/usr/lib/cni';

/** TOML basic string. */
const q = (s: string): string => JSON.stringify(s);

/**
 * containerd's configuration (version 3, containerd 2.x): every path it writes under `dir`
 * (root, state, socket, runc's state, netns mounts, CNI), the pause image built here as the
 * pinned sandbox image, Debian's runc with the cgroupfs driver, and the plugins that would write
 * outside `dir` (NRI's socket under /var/run/nri, the /opt/containerd `opt` plugin) switched off.
 * The one path it cannot move is the shims' socket directory, /run/containerd/s (a compiled-in
 * default of containerd's shim package); each shim removes its socket when it exits.
 */
export function containerdConfig(dir: string, sandboxImage: string, cniConfDir: string): string {
  return `version = 3
root = ${q(join(dir, 'root'))}
state = ${q(join(dir, 'state'))}
disabled_plugins = ["io.containerd.nri.v1.nri", "io.containerd.internal.v1.opt", "io.containerd.snapshotter.v1.devmapper", "io.containerd.snapshotter.v1.zfs", "io.containerd.snapshotter.v1.btrfs", "io.containerd.tracing.processor.v1.otlp"]

[grpc]
  address = ${q(join(dir, 'containerd.sock'))}

[ttrpc]
  address = ${q(join(dir, 'containerd.sock.ttrpc'))}

[debug]
  address = ""
  level = "warn"

[metrics]
  address = ""

[plugins.'io.containerd.cri.v1.images']
  snapshotter = "overlayfs"
  [plugins.'io.containerd.cri.v1.images'.pinned_images]
    sandbox = ${q(sandboxImage)}

[plugins.'io.containerd.cri.v1.runtime']
  enable_selinux = false
  # Never below containerd's own oom_score_adj: the kubelet asks -998 for every pod sandbox, and a
  # root without CAP_SYS_RESOURCE (this machine's) may not lower it, so runc's init would fail.
  restrict_oom_score_adj = true
  netns_mounts_under_state_dir = true
  cdi_spec_dirs = [${q(join(dir, 'cdi'))}]
  [plugins.'io.containerd.cri.v1.runtime'.containerd]
    default_runtime_name = "runc"
    [plugins.'io.containerd.cri.v1.runtime'.containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"
      [plugins.'io.containerd.cri.v1.runtime'.containerd.runtimes.runc.options]
        BinaryName = ${q(RUNC)}
        Root = ${q(join(dir, 'runc'))}
        SystemdCgroup = false
  [plugins.'io.containerd.cri.v1.runtime'.cni]
    bin_dirs = [${q(CNI_BIN_DIR)}]
    conf_dir = ${q(cniConfDir)}
    max_conf_num = 1

[plugins.'io.containerd.grpc.v1.cri']
  stream_server_address = "127.0.0.1"
  stream_server_port = "0"
`;
}

/** `ctr` against this containerd, in the CRI namespace. */
export function ctr(tools: Tools<NodeTool>, socket: string, args: readonly string[]): Promise<string> {
  return sh(tools.ctr, ['--address', socket, '--namespace', CRI_NAMESPACE, ...args]);
}

export async function startContainerd(
  dir: string,
  tools: Tools<NodeTool>,
  sandboxImage: string,
  cniConfDir: string,
  logFile: string,
  launch: Launch,
): Promise<Containerd> {
  await mkdir(dir, { recursive: true, mode: 0o711 });
  const config = join(dir, 'config.toml');
  await writeFile(config, containerdConfig(dir, sandboxImage, cniConfDir));
  const socket = join(dir, 'containerd.sock');
  const proc = await startProcess({
    name: 'containerd',
    command: tools.containerd,
    args: ['--config', config],
    logFile,
    // The shim is found on PATH (next to containerd here: each tool has its own cache directory).
    env: {
      ...process.env,
      PATH: [
        dirname(tools['containerd-shim-runc-v2']),
        '/usr/local/sbin',
        '/usr/sbin',
        '/usr/bin',
        '/sbin',
        '/bin',
      ].join(':'),
    },
    ...(launch.onSpawn ? { onSpawn: launch.onSpawn } : {}),
  });
  await waitReady(
    proc,
    async () => !((await trySh(tools.ctr, ['--address', socket, 'version'])) instanceof Error),
    60_000,
    launch.signal,
  );
  return { proc, socket };
}

/**
 * Imports an OCI image layout (a directory) into the CRI namespace under `name` (a full reference:
 * what a pod's `image:` resolves to, e.g. docker.io/library/aibom-vault:0.1.0) and unpacks it for
 * the overlayfs snapshotter, as a pull would. The layout's own ref name is replaced by `name`'s tag
 * in the archive handed to ctr (which names an OCI archive's image <base-name>:<ref name>).
 */
export async function importLayout(
  tools: Tools<NodeTool>,
  socket: string,
  layout: string,
  name: string,
  work: string,
): Promise<void> {
  const colon = name.lastIndexOf(':');
  const [repo, tag] = [name.slice(0, colon), name.slice(colon + 1)];
  await mkdir(work, { recursive: true });
  const stage = await mkdtemp(join(work, 'import-'));
  try {
    const index = JSON.parse(await readFile(join(layout, 'index.json'), 'utf8')) as {
      manifests: { annotations?: Record<string, string> }[];
    };
    if (index.manifests.length !== 1) throw new Error(`${layout}: expected one image in index.json`);
    index.manifests[0]!.annotations = {
      ...index.manifests[0]!.annotations,
      'org.opencontainers.image.ref.name': tag,
    };
    await writeFile(join(stage, 'index.json'), JSON.stringify(index));
    const tar = join(stage, 'image.tar');
    await sh('tar', ['-cf', tar, '-C', layout, 'oci-layout', 'blobs', '-C', stage, 'index.json']);
    await ctr(tools, socket, ['images', 'import', '--base-name', repo, tar]);
    const list = await ctr(tools, socket, ['images', 'ls', '-q']);
    if (!list.split('\n').includes(name))
      throw new Error(`ctr images import of ${layout} did not create ${name}`);
  } finally {
    await rm(stage, { recursive: true, force: true });
  }
}

/**
 * Stops every container and sandbox of the CRI namespace and deletes them with their snapshots,
 * so no runc process, shim, overlay mount or network namespace outlives the node. Returns the
 * problems it met (teardown goes on past them).
 */
export async function removeAllContainers(
  tools: Tools<NodeTool>,
  socket: string,
): Promise<{ ids: string[]; problems: string[] }> {
  const problems: string[] = [];
  const list = await trySh(tools.ctr, [
    '--address',
    socket,
    '--namespace',
    CRI_NAMESPACE,
    'containers',
    'ls',
    '-q',
  ]);
  if (list instanceof Error) return { ids: [], problems: [`listing containers: ${list.message}`] };
  const ids = list.split('\n').filter((l) => l.trim() !== '');
  for (const id of ids) {
    await trySh(tools.ctr, [
      '--address',
      socket,
      '--namespace',
      CRI_NAMESPACE,
      'tasks',
      'kill',
      '--signal',
      'SIGKILL',
      id,
    ]);
  }
  for (const id of ids) {
    // `tasks delete` waits for the task to exit and reaps it; then the container and its snapshot.
    for (let attempt = 0; attempt < 50; attempt++) {
      const r = await trySh(tools.ctr, [
        '--address',
        socket,
        '--namespace',
        CRI_NAMESPACE,
        'tasks',
        'delete',
        '--force',
        id,
      ]);
      if (!(r instanceof Error) || /not found|no running task/i.test(r.message)) break;
      await new Promise((res) => setTimeout(res, 100));
    }
    const r = await trySh(tools.ctr, [
      '--address',
      socket,
      '--namespace',
      CRI_NAMESPACE,
      'containers',
      'delete',
      id,
    ]);
    if (r instanceof Error && !/not found/i.test(r.message)) problems.push(`container ${id}: ${r.message}`);
  }
  return { ids, problems };
}
