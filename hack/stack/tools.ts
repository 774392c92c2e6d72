import { execFile } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';

export const TOOL_NAMES = [
  'kube-apiserver',
  'kubectl',
  'kube-controller-manager',
  'kube-scheduler',
  'kubelet',
  'kube-proxy',
  'etcd',
  'helm',
  'minio',
  'cosign',
  'crane',
  'timestamp-authority',
  'weed',
  'containerd',
  'ctr',
  'containerd-shim-runc-v2',
  'pause',
  'litewitness',
  'witness-add-log',
  'tlog-tiles-check',
  'tlog-cosign-check',
] as const;
export type Tool = (typeof TOOL_NAMES)[number];

/**
 * The sets of hack/ensure-tools.sh (@stack, @test, @node): what `npm run stack -- up` (and so the
 * demo) runs, what the test suite adds, what the node of `up --node` and the e2e suite adds.
 * The demo builds only the first; the test command builds all three. SeaweedFS (`weed`) is in
 * @test: the everyday stack runs MinIO, the integration-seaweedfs project and `up --s3 seaweedfs`
 * (which asks for it on its own) run SeaweedFS.
 */
export const STACK_TOOLS = [
  'kube-apiserver',
  'kubectl',
  'kube-controller-manager',
  'etcd',
  'minio',
  'timestamp-authority',
  'litewitness',
  'witness-add-log',
] as const satisfies readonly Tool[];
export const TEST_TOOLS = [
  ...STACK_TOOLS,
  'helm',
  'cosign',
  'crane',
  'weed',
  'tlog-tiles-check',
  'tlog-cosign-check',
] as const satisfies readonly Tool[];
export const NODE_TOOLS = [
  'kube-scheduler',
  'kubelet',
  'kube-proxy',
  'containerd',
  'ctr',
  'containerd-shim-runc-v2',
  'pause',
  'helm',
] as const satisfies readonly Tool[];
export type StackTool = (typeof STACK_TOOLS)[number];
export type TestTool = (typeof TEST_TOOLS)[number];
export type NodeTool = (typeof NODE_TOOLS)[number];

/** Absolute paths of the tools of a set. */
export type Tools<T extends Tool = Tool> = Record<T, string>;

const script = fileURLToPath(new URL('../ensure-tools.sh', import.meta.url));

/**
 * Builds (first time, from the Go module proxy) or finds (cached under ~/.cache/aibom-vault) the
 * pinned binaries; hack/versions.env is the one place their versions live.
 */
export async function ensureTools<T extends Tool>(names: readonly T[]): Promise<Tools<T>> {
  let stdout: string;
  try {
    ({ stdout } = await promisify(execFile)('bash', [script, ...new Set(names)], {
      maxBuffer: 16 * 1024 * 1024,
      // Builds can take many minutes on a cold cache; their progress goes to our stderr.
      timeout: 80 * 60_000,
    }));
  } catch (err) {
    const e = err as { stderr?: string; message: string };
    throw new Error(
      `hack/ensure-tools.sh failed: ${e.message}\n${(e.stderr ?? '').split('\n').slice(-30).join('\n')}`,
      { cause: err },
    );
  }
  const tools: Partial<Record<Tool, string>> = {};
  for (const line of stdout.split('\n')) {
    const m = /^([a-z0-9-]+)=(\/.+)$/.exec(line.trim());
    if (m && (TOOL_NAMES as readonly string[]).includes(m[1]!)) tools[m[1] as Tool] = m[2]!;
  }
  const missing = names.filter((n) => !tools[n]);
  if (missing.length) throw new Error(`hack/ensure-tools.sh did not report: ${missing.join(', ')}`);
  return tools as Tools<T>;
}
