import { execFile } from 'node:child_process';
import { readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { buildLayer } from '../../image/layer.ts';
import { assemble, writeLayout } from '../../image/oci.ts';

/**
 * The pod sandbox image, built here: one layer with the static `pause` binary of
 * hack/ensure-tools.sh (Kubernetes' own build/pause/linux/pause.c), run as 65535:65535 as
 * registry.k8s.io/pause is. Named under aibom-vault.local/ so nobody mistakes it for the
 * registry's bytes; containerd's CRI plugin is configured to use (and pin) exactly this name.
 * Deterministic (hack/image/layer.ts): the same binary gives the same digest.
 */
export async function buildPauseLayout(pauseBinary: string, dir: string, version: string): Promise<string> {
  const layer = await buildLayer([
    { path: 'pause', type: 'file', data: await readFile(pauseBinary), mode: 0o755 },
  ]);
  const image = assemble([layer], {
    user: '65535:65535',
    env: [],
    workingDir: '/',
    cmd: ['/pause'],
    exposedPorts: [],
    labels: { 'org.opencontainers.image.source': 'k8s.io/kubernetes build/pause/linux/pause.c' },
    history: [`COPY pause.c ${version} (static) /pause`],
  });
  const layout = join(dir, 'pause-layout');
  await writeLayout(layout, image, version);
  return layout;
}

export const pauseImageName = (version: string): string => `aibom-vault.local/pause:${version}`;

/** The image of hack/image.sh (cached by its inputs): its OCI layout and digest. */
export async function projectImage(repoRoot: string): Promise<{ layout: string; digest: string }> {
  const { stdout } = await promisify(execFile)('bash', [join(repoRoot, 'hack/image.sh')], {
    maxBuffer: 16 * 1024 * 1024,
    timeout: 30 * 60_000,
  });
  const kv = Object.fromEntries(
    stdout
      .trim()
      .split('\n')
      .map((l): [string, string] => [l.slice(0, l.indexOf('=')), l.slice(l.indexOf('=') + 1)]),
  );
  if (!kv.layout || !kv.digest) throw new Error(`hack/image.sh printed no layout/digest: ${stdout}`);
  return { layout: kv.layout, digest: kv.digest };
}
