/**
 * `npm run stack -- up|down|status`: the local stack in the background, described by .stack/env.
 * State lives in .stack/state.json so `down` (another process) can stop exactly what `up` started.
 */
import { mkdir, readFile, rm, symlink, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { isAlive } from './proc.ts';
import { repoRoot, startStack, stopStack, writeEnvFile, type StackInfo } from './stack.ts';

const stateDir = join(repoRoot, '.stack');
const stateFile = join(stateDir, 'state.json');

async function readState(): Promise<StackInfo | undefined> {
  try {
    return JSON.parse(await readFile(stateFile, 'utf8')) as StackInfo;
  } catch {
    return undefined;
  }
}

async function linkBins(info: StackInfo): Promise<string> {
  const bin = join(stateDir, 'bin');
  await rm(bin, { recursive: true, force: true });
  await mkdir(bin, { recursive: true });
  for (const [name, path] of Object.entries(info.tools)) await symlink(path, join(bin, name));
  // Node 24 from node_modules first; service-ctl and the sample pipeline (a dev tool, not in the
  // image) run this checkout's source.
  await symlink(process.execPath, join(bin, 'node'));
  for (const [name, script] of [
    ['service-ctl', 'src/bin/service-ctl.ts'],
    ['sample-pipeline', 'hack/sample-pipeline.ts'],
  ] as const) {
    await writeFile(
      join(bin, name),
      `#!/bin/sh\nexec '${process.execPath}' '${join(repoRoot, script)}' "$@"\n`,
      { mode: 0o755 },
    );
  }
  return bin;
}

async function up(): Promise<number> {
  const existing = await readState();
  if (existing) {
    if (existing.procs.every((p) => isAlive(p.pid))) {
      console.log(`stack already running (started from ${existing.root}); source .stack/env`);
      return 0;
    }
    console.log('found a partly dead stack; stopping what is left of it first');
    await stopStack(existing);
    await rm(stateFile, { force: true });
  }
  const t0 = performance.now();
  const info = await startStack({ services: true, log: (l) => console.log(`  ${l}`) });
  await mkdir(stateDir, { recursive: true });
  await writeFile(stateFile, JSON.stringify(info, null, 2), { mode: 0o600 });
  await writeEnvFile(join(stateDir, 'env'), info, await linkBins(info));
  console.log(`stack up in ${((performance.now() - t0) / 1000).toFixed(1)} s (logs in ${info.root})`);
  console.log(
    '  source .stack/env   # KUBECONFIG, DATABASE_URL, S3_*, SERVICE_API_URL, SERVICE_TOKEN, PATH (kubectl, service-ctl, sample-pipeline)',
  );
  return 0;
}

async function down(): Promise<number> {
  const info = await readState();
  if (!info) {
    console.log('no stack running');
    return 0;
  }
  await stopStack(info);
  await rm(stateDir, { recursive: true, force: true });
  console.log('stack stopped and its temp dir removed');
  return 0;
}

async function status(): Promise<number> {
  const info = await readState();
  if (!info) {
    console.log('no stack running');
    return 3;
  }
  let dead = 0;
  for (const p of info.procs) {
    const alive = isAlive(p.pid);
    if (!alive) dead++;
    console.log(
      `${p.name.padEnd(24)} pid ${String(p.pid).padEnd(8)} ${alive ? 'running' : 'DEAD'}  log ${p.logFile}`,
    );
  }
  for (const k of ['KUBECONFIG', 'DATABASE_URL', 'S3_ENDPOINT', 'SERVICE_API_URL'] as const) {
    const v = info.env[k] ?? '';
    console.log(`${k.padEnd(24)} ${k === 'DATABASE_URL' ? v.replace(/:[^:@/]+@/, ':***@') : v}`);
  }
  return dead === 0 ? 0 : 1;
}

const commands: Record<string, () => Promise<number>> = { up, down, status };
const cmd = process.argv[2] ?? '';
const fn = commands[cmd];
if (!fn) {
  console.error(`usage: npm run stack -- up|down|status (got "${cmd}")`);
  process.exitCode = 2;
} else {
  try {
    process.exitCode = await fn();
  } catch (err) {
    console.error((err as Error).message);
    process.exitCode = 1;
  }
}
