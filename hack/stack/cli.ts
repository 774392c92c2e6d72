/**
 * `npm run stack -- up [--node] [--standby sync|async] [--s3 minio|seaweedfs] | failover |
 * restart controller | down | status`: the local stack in the background, described by .stack/env.
 * `--node` adds a real node (hack/stack/node) with the chart installed onto it: its pods are then
 * the controller and the API, SERVICE_API_URL is the API's Service, SERVICE_NAMESPACE the chart's
 * namespace.
 * State lives in .stack/state.json so `down` (another process) can stop exactly what `up` started.
 * STACK_STATE_DIR moves that directory (tests run a second stack beside a developer's own).
 */
import { mkdir, readFile, rm, symlink, writeFile } from 'node:fs/promises';
import { join, resolve } from 'node:path';
import { tmpdir } from 'node:os';
import { nodeOwner } from './node/index.ts';
import { isRunning, stopProc } from './proc.ts';
import { restartService } from './restart.ts';
import { isS3Server, S3_SERVERS, type S3Server } from './s3.ts';
import { failover as failOver, STANDBY_MODES, type StandbyMode } from './standby.ts';
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

/** The saved stack of the state dir `dir` (this checkout's by default). */
async function readState(dir = stateDir): Promise<StackInfo | undefined> {
  try {
    return JSON.parse(await readFile(join(dir, 'state.json'), 'utf8')) as StackInfo;
  } catch {
    return undefined;
  }
}

async function linkBins(info: StackInfo): Promise<string> {
  const bin = join(stateDir, 'bin');
  await rm(bin, { recursive: true, force: true });
  await mkdir(bin, { recursive: true });
  const tools = { ...info.tools, ...(info.node?.tools ?? {}) };
  for (const [name, path] of Object.entries(tools)) await symlink(path, join(bin, name));
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
  const servicesUp = services.length === SERVICE_NAMES.length && services.every(isRunning);
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
  for (const p of services) await stopProc(p);
  const servers = existing.procs.filter((p) => !services.includes(p));
  const info: StackInfo = { ...existing, procs: [...servers], settings: want, env: { ...existing.env } };
  const oldPort = existing.env.SERVICE_API_URL
    ? Number(new URL(existing.env.SERVICE_API_URL).port)
    : undefined;
  try {
    await startServices(info, want, oldPort);
  } catch (err) {
    // Whatever of the services started is stopped again; the servers keep running.
    for (const p of info.procs.filter((q) => !servers.includes(q))) await stopProc(p);
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

/** The servers `up` was asked for. */
interface Shape {
  readonly standby?: StandbyMode;
  readonly s3: S3Server;
  /** A real node with the chart on it (hack/stack/node) in place of the host controller and sidecar. */
  readonly node: boolean;
}

class UsageError extends Error {}

function parseUp(args: readonly string[]): Shape {
  let standby: StandbyMode | undefined;
  let s3: S3Server = 'minio';
  let node = false;
  for (let i = 0; i < args.length; i++) {
    const [flag, value] = [args[i], args[i + 1]];
    if (flag === '--node') {
      node = true;
    } else if (flag === '--standby') {
      if (!(STANDBY_MODES as readonly string[]).includes(value ?? '')) {
        throw new UsageError(
          `--standby takes ${STANDBY_MODES.join(' or ')}, got ${JSON.stringify(value ?? '')}`,
        );
      }
      standby = value as StandbyMode;
      i++;
    } else if (flag === '--s3') {
      if (value === undefined || !isS3Server(value)) {
        throw new UsageError(`--s3 takes ${S3_SERVERS.join(' or ')}, got ${JSON.stringify(value ?? '')}`);
      }
      s3 = value;
      i++;
    } else {
      throw new UsageError(`up: unknown argument ${JSON.stringify(flag)}`);
    }
  }
  return { ...(standby !== undefined ? { standby } : {}), s3, node };
}

/** What differs between the servers the stack was started with and the ones asked for. */
function shapeDiff(info: StackInfo, want: Shape): string[] {
  const had = info.servers ?? { standby: 'none', s3: 'minio' };
  const out: string[] = [];
  if (had.standby !== (want.standby ?? 'none'))
    out.push(`standby: ${had.standby} → ${want.standby ?? 'none'}`);
  if (had.s3 !== want.s3) out.push(`s3: ${had.s3} → ${want.s3}`);
  return out;
}

async function up(args: readonly string[]): Promise<number> {
  const shape = parseUp(args);
  const withNode = shape.node;
  const existing = await readState();
  if (existing && !!existing.node !== withNode) {
    console.error(
      existing.node
        ? 'the stack is running with the node: `npm run stack -- up --node` keeps it; `npm run stack -- down` first to run it without'
        : 'the stack is running without the node: `npm run stack -- down` first, then `npm run stack -- up --node`',
    );
    return 1;
  }
  if (existing?.node) {
    const diff = shapeDiff(existing, shape);
    if (diff.length === 0 && existing.procs.every(isRunning)) {
      console.log(`stack with the node already running (started from ${existing.root}); source .stack/env`);
      return 0;
    }
    console.log(
      diff.length > 0
        ? `stack with the node running with other servers (${diff.join(', ')}); stopping it and starting a new one`
        : 'found a partly dead stack with the node; stopping what is left of it first',
    );
    reportLeft(await stopStack(existing));
    await rm(stateFile, { force: true });
  } else if (existing) {
    const servers = existing.procs.filter((p) => !(SERVICE_NAMES as readonly string[]).includes(p.name));
    const diff = shapeDiff(existing, shape);
    if (diff.length === 0 && servers.every(isRunning)) return reconcileServices(existing);
    console.log(
      diff.length > 0
        ? `stack running with other servers (${diff.join(', ')}); stopping it and starting a new one`
        : 'found a partly dead stack; stopping what is left of it first',
    );
    await stopStack(existing);
    await rm(stateFile, { force: true });
  }
  const t0 = performance.now();
  // Ctrl-C (or SIGTERM) during the start stops what started instead of leaving it behind.
  const interrupted = new AbortController();
  const onSignal = (): void => {
    console.log('interrupted: stopping what started');
    interrupted.abort();
  };
  process.once('SIGINT', onSignal);
  process.once('SIGTERM', onSignal);
  let info;
  try {
    info = await startStack({
      services: !withNode,
      node: withNode,
      stateDir,
      log: (l) => console.log(`  ${l}`),
      signal: interrupted.signal,
      ...(shape.standby !== undefined ? { standby: shape.standby } : {}),
      s3: shape.s3,
    });
  } finally {
    process.off('SIGINT', onSignal);
    process.off('SIGTERM', onSignal);
  }
  await saveState(info);
  console.log(`stack up in ${((performance.now() - t0) / 1000).toFixed(1)} s (logs in ${info.root})`);
  console.log(
    '  source .stack/env   # KUBECONFIG, DATABASE_URL, S3_*, SERVICE_API_URL, SERVICE_TOKEN, PATH (kubectl, service-ctl, sample-pipeline)',
  );
  if (info.node) {
    console.log(
      `  the chart runs on the node: release ${info.node.release} in namespace ${info.node.namespace} (SERVICE_NAMESPACE); the API through its Service at ${info.node.apiUrl}`,
    );
    console.log('  kubectl get pods,svc,runs -A');
  }
  return 0;
}

/** Prints what a node teardown could not remove; none is the normal case. */
function reportLeft(left: readonly string[]): void {
  for (const l of left) console.error(`left behind: ${l}`);
}

/**
 * Why the machine's node is not this checkout's to stop, if it is not: another checkout's stack
 * (its state names the node's stack) or a process that still holds it (a test run, an `up` still
 * starting). Otherwise the node is an orphan: its `up` died before saving any state.
 */
async function othersNode(
  root: string,
  otherStateDir: string | undefined,
  claimantRuns: boolean,
): Promise<string | undefined> {
  if (otherStateDir !== undefined && otherStateDir !== stateDir) {
    if ((await readState(otherStateDir))?.root === root)
      return `the node on this machine is the stack of ${otherStateDir} (STACK_STATE_DIR); \`npm run stack -- down\` there stops it`;
  }
  if (claimantRuns)
    return `the node on this machine is held by the stack in ${root}, whose process still runs (a test run, or an \`up\` still starting)`;
  return undefined;
}

async function down(): Promise<number> {
  const info = await readState();
  if (!info) {
    // A node whose `up` was killed before it saved the state: the owner file still lists it.
    const held = await nodeOwner();
    const notOurs = held && (await othersNode(held.owner.root, held.owner.node.stateDir, held.claimantRuns));
    if (notOurs) {
      console.log(`no stack running here; ${notOurs}`);
      return 0;
    }
    const orphan = held?.owner;
    if (orphan && orphan.root.startsWith(tmpdir())) {
      console.log(`no stack state here; stopping the orphaned node of the stack in ${orphan.root}`);
      const left = await stopStack({
        root: orphan.root,
        procs: [...(orphan.procs ?? [])],
        node: orphan.node,
      });
      reportLeft(left);
      return left.length === 0 ? 0 : 1;
    }
    console.log('no stack running');
    return 0;
  }
  const left = await stopStack(info);
  await rm(stateDir, { recursive: true, force: true });
  reportLeft(left);
  console.log(
    info.node
      ? 'stack and node stopped: pods, containers, mounts, cgroups, network and its temp dir removed'
      : 'stack stopped and its temp dir removed',
  );
  return left.length === 0 ? 0 : 1;
}

async function status(): Promise<number> {
  const info = await readState();
  if (!info) {
    console.log('no stack running');
    return 3;
  }
  let dead = 0;
  for (const p of info.procs) {
    const alive = isRunning(p);
    if (!alive) dead++;
    console.log(
      `${p.name.padEnd(24)} pid ${String(p.pid).padEnd(8)} ${alive ? 'running' : 'DEAD'}  log ${p.logFile}`,
    );
  }
  const rep = info.replication;
  if (rep !== undefined) {
    console.log(
      `${'postgres'.padEnd(24)} primary 127.0.0.1:${rep.primary.port} (pid ${rep.primary.pid}), ` +
        (rep.standby !== null
          ? `${rep.mode} standby 127.0.0.1:${rep.standby.port} (pid ${rep.standby.pid})`
          : 'no standby (failed over)') +
        `, clients through 127.0.0.1:${rep.proxy.listen}`,
    );
  }
  if (info.servers) console.log(`${'s3'.padEnd(24)} ${info.servers.s3}`);
  for (const k of [
    'KUBECONFIG',
    'DATABASE_URL',
    'S3_ENDPOINT',
    'SERVICE_API_URL',
    'SERVICE_NAMESPACE',
  ] as const) {
    if (k === 'SERVICE_NAMESPACE' && !info.node) continue;
    const v = info.env[k] ?? '';
    console.log(`${k.padEnd(24)} ${k === 'DATABASE_URL' ? v.replace(/:[^:@/]+@/, ':***@') : v}`);
  }
  return dead === 0 ? 0 : 1;
}

/**
 * SIGKILL of the primary, promotion of the standby, the proxy moved: what a managed service's
 * failover does, timed. The stack then runs on the promoted server alone.
 */
async function failover(): Promise<number> {
  const info = await readState();
  if (!info) {
    console.error('no stack running: npm run stack -- up --standby sync|async');
    return 1;
  }
  const rep = info.replication;
  if (rep === undefined || rep.standby === null) {
    console.error(
      rep === undefined
        ? 'this stack has no standby: start it with npm run stack -- up --standby sync|async'
        : 'this stack has failed over already and runs without a standby: npm run stack -- up --standby sync|async after down',
    );
    return 1;
  }
  const report = await failOver(rep);
  // The killed primary leaves the stack: what is left runs as started, minus the standby.
  await saveState({
    ...info,
    procs: info.procs.filter((p) => p.pid !== report.killedPid),
    replication: report.replication,
  });
  console.log(
    `failover (${rep.mode}): primary pid ${report.killedPid} killed (SIGKILL) at ${report.killedMs} ms, ` +
      `standby promoted at ${report.promotedMs} ms, proxy 127.0.0.1:${rep.proxy.listen} moved to ` +
      `127.0.0.1:${report.promotedPort} at ${report.movedMs} ms`,
  );
  console.log(
    `failover took ${report.movedMs} ms; the stack now runs on the promoted server without a standby`,
  );
  return 0;
}

/** `restart controller`: SIGTERM, then the same process again (hack/stack/restart.ts). */
async function restart(args: readonly string[]): Promise<number> {
  if (args.length !== 1 || args[0] !== 'controller')
    throw new UsageError(`restart takes one service: controller (got "${args.join(' ')}")`);
  const info = await readState();
  if (!info) {
    console.error('no stack running: `npm run stack -- up` starts one');
    return 1;
  }
  if (info.node) {
    console.error(
      `the controller runs as pods on the node: kubectl -n ${info.node.namespace} delete pod <controller pod> restarts one`,
    );
    return 1;
  }
  const t0 = performance.now();
  const procs = await restartService(info.procs, 'controller');
  await saveState({ ...info, procs });
  const pid = procs.find((p) => p.name === 'controller')?.pid;
  console.log(
    `controller restarted (pid ${pid}) and ready in ${((performance.now() - t0) / 1000).toFixed(1)} s`,
  );
  return 0;
}

const USAGE =
  'usage: npm run stack -- up [--node] [--standby sync|async] [--s3 minio|seaweedfs] | failover | restart controller | down | status';
/** A command that takes no arguments: anything given is a usage error, never silently ignored. */
const bare =
  (name: string, fn: () => Promise<number>) =>
  (args: readonly string[]): Promise<number> => {
    if (args.length > 0) throw new UsageError(`${name} takes no arguments (got "${args.join(' ')}")`);
    return fn();
  };
const commands: Record<string, (args: readonly string[]) => Promise<number>> = {
  up,
  failover: bare('failover', failover),
  restart,
  down: bare('down', down),
  status: bare('status', status),
};
const cmd = process.argv[2] ?? '';
const fn = commands[cmd];
if (!fn) {
  console.error(`${USAGE} (got "${cmd}")`);
  process.exitCode = 2;
} else {
  try {
    process.exitCode = await fn(process.argv.slice(3));
  } catch (err) {
    console.error(err instanceof UsageError ? `${err.message}\n${USAGE}` : (err as Error).message);
    process.exitCode = err instanceof UsageError ? 2 : 1;
  }
}
