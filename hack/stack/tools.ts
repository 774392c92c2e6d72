import { execFile } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';

export const TOOL_NAMES = [
  'kube-apiserver',
  'kubectl',
  'kube-controller-manager',
  'etcd',
  'helm',
  'minio',
  'cosign',
  'crane',
  'timestamp-authority',
  'weed',
  'litewitness',
  'witness-add-log',
  'tlog-tiles-check',
  'tlog-cosign-check',
] as const;
export type Tool = (typeof TOOL_NAMES)[number];
export type Tools = Record<Tool, string>;

const script = fileURLToPath(new URL('../ensure-tools.sh', import.meta.url));

/**
 * Builds (first time, from the Go module proxy) or finds (cached under ~/.cache/aibom-vault) the
 * pinned binaries; hack/versions.env is the one place their versions live.
 */
export async function ensureTools(names: readonly Tool[] = TOOL_NAMES): Promise<Tools> {
  let stdout: string;
  try {
    ({ stdout } = await promisify(execFile)('bash', [script, ...names], {
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
  const tools: Partial<Tools> = {};
  for (const line of stdout.split('\n')) {
    const m = /^([a-z-]+)=(\/.+)$/.exec(line.trim());
    if (m && (TOOL_NAMES as readonly string[]).includes(m[1]!)) tools[m[1] as Tool] = m[2]!;
  }
  const missing = names.filter((n) => !tools[n]);
  if (missing.length) throw new Error(`hack/ensure-tools.sh did not report: ${missing.join(', ')}`);
  return tools as Tools;
}
