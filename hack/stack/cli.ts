/**
 * `npm run stack -- up|down|status|restart controller`: the local stack in the background, described by
 * .stack/env.
 * State lives in .stack/state.json so `down` (another process) can stop exactly what `up` started.
 * STACK_STATE_DIR moves that directory (tests run a second stack beside a developer's own).
 */
import { mkdir, readFile, rm, symlink, writeFile } from 'node:fs/promises';
import { join, resolve } from 'node:path';
import { isAlive, stopProcess } from './proc.ts';
import { restartService } from './restart.ts';
import {
  repoRoot,
  SERVICE_NAMES,
  serviceSettings,
  startServices,
  startStack,
  stopStack,
  writeEnvFile,
  type StackInfo,
} from './stack.ts';

const stateDir = resolve(process.env.STACK_STATE_DIR ?? join(repoRoot, '.stack'));
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

async function saveState(info: StackInfo): Promise<void> {
  await mkdir(stateDir, { recursive: true });
  await writeFile(stateFile, JSON.stringify(info, null, 2), { mode: 0o600 });
  await writeEnvFile(join(stateDir, 'env'), info, await linkBins(info));
}

/** `KEY: old → new` for every setting that differs (values of secret-looking keys hidden). */
function settingsDiff(from: Record<string, string>, to: Record<string, string>): string[] {
  const show = (k: string, v: string | undefined): string =>
    v === undefined ? '(unset)' : /TOKEN|SECRET_KEY|PASSWORD/.test(k) ? '***' : JSON.stringify(v);
  return [...new Set([...Object.keys(from), ...Object.keys(to)])]
    .sort()
    .filter((k) => from[k] !== to[k])
    .map((k) => `${k}: ${show(k, from[k])} → ${show(k, to[k])}`);
}

/**
 * The servers of a running stack are kept; its controller and sidecar must run with the caller's
 * settings (the SERVICE_* switches and every other configuration key in the environment). When
 * they differ, or a service is gone, only the services restart, on the same API address.
 */
async function reconcileServices(existing: StackInfo): Promise<number> {
  const want = serviceSettings();
  const had = existing.settings ?? {};
  const services = existing.procs.filter((p) => (SERVICE_NAMES as readonly string[]).includes(p.name));
  const diff = settingsDiff(had, want);
  const servicesUp = services.length === SERVICE_NAMES.length && services.every((p) => isAlive(p.pid));
  if (diff.length === 0 && servicesUp) {
    console.log(
      `stack already running with these settings (started from ${existing.root}); source .stack/env`,
    );
    return 0;
  }
  console.log(
    diff.length > 0
      ? `stack running with other settings; restarting the controller and sidecar:\n  ${diff.join('\n  ')}`
      : 'stack running without its controller and sidecar; starting them',
  );
  for (const p of services) await stopProcess(p.pid);
  const servers = existing.procs.filter((p) => !services.includes(p));
  const info: StackInfo = { ...existing, procs: [...servers], settings: want, env: { ...existing.env } };
  const oldPort = existing.env.SERVICE_API_URL
    ? Number(new URL(existing.env.SERVICE_API_URL).port)
    : undefined;
  try {
    await startServices(info, want, oldPort);
  } catch (err) {
    // Whatever of the services started is stopped again; the servers keep running.
    for (const p of info.procs.filter((q) => !servers.includes(q))) await stopProcess(p.pid);
    await saveState({ ...info, procs: servers });
    console.error((err as Error).message);
    console.error(
      'the servers keep running without the controller and sidecar: fix the setting and run `npm run stack -- up` again, or `npm run stack -- down`',
    );
    return 1;
  }
  await saveState(info);
  console.log('controller and sidecar restarted; source .stack/env');
  return 0;
}

async function up(): Promise<number> {
  const existing = await readState();
  if (existing) {
    const servers = existing.procs.filter((p) => !(SERVICE_NAMES as readonly string[]).includes(p.name));
    if (servers.every((p) => isAlive(p.pid))) return reconcileServices(existing);
    console.log('found a partly dead stack; stopping what is left of it first');
    await stopStack(existing);
    await rm(stateFile, { force: true });
  }
  const t0 = performance.now();
  const info = await startStack({ services: true, log: (l) => console.log(`  ${l}`) });
  await saveState(info);
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

/** `restart controller`: SIGTERM, then the same process again (hack/stack/restart.ts). */
async function restart(): Promise<number> {
  const what = process.argv[3];
  if (what !== 'controller') {
    console.error(`usage: npm run stack -- restart controller (got "${what ?? ''}")`);
    return 2;
  }
  const info = await readState();
  if (!info) {
    console.error('no stack running: `npm run stack -- up` starts one');
    return 1;
  }
  const t0 = performance.now();
  const procs = await restartService(info.procs, what);
  await saveState({ ...info, procs });
  const pid = procs.find((p) => p.name === what)?.pid;
  console.log(
    `${what} restarted (pid ${pid}) and ready in ${((performance.now() - t0) / 1000).toFixed(1)} s`,
  );
  return 0;
}

const commands: Record<string, () => Promise<number>> = { up, down, status, restart };
const cmd = process.argv[2] ?? '';
const fn = commands[cmd];
if (!fn) {
  console.error(`usage: npm run stack -- up|down|status|restart controller (got "${cmd}")`);
  process.exitCode = 2;
} else {
  try {
    process.exitCode = await fn();
  } catch (err) {
    console.error((err as Error).message);
    process.exitCode = 1;
  }
}
