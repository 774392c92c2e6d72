/**
 * The restarted controller of bench/restart.ts, in a process of its own, as it runs in a pod: the
 * controller's module graph and V8 flags (src/bin/node-flags.ts), nothing of the bench's heap (the
 * pipeline's Runs, the first controller's leftovers) beside it, so its latency and memory are its
 * own. Forked with an IPC channel; the protocol is in bench/restart-audit.ts:
 *
 *   bench → init         the child starts the controller (audited client and pool), answers `leading`
 *                        once it leads with a synced informer
 *   bench → settle       the child waits until it is idle (empty queue, no worker, no new reconcile
 *                        for 1.5 s), answers `report` (counts, its own memory after GC)
 *   bench → stop         the child stops the controller, closes its pool and exits with code 0
 *
 * Any failure is sent as `error` and the child exits non-zero; it also exits when the bench goes
 * away (the IPC channel closes), so an interrupted bench leaves no controller behind.
 */
import { readFileSync } from 'node:fs';
import { setTimeout as sleep } from 'node:timers/promises';
import v8 from 'node:v8';
import pino from 'pino';
import { Registry } from 'prom-client';
import { startHeapRelease, type HeapReleaseHandle } from '../src/bin/heap-release.ts';
import { biscuitWorkers } from '../src/capability/biscuit.ts';
import type { RunningController } from '../src/controller/manager.ts';
import { kubeClient } from '../src/kube/index.ts';
import { signerFromPem } from '../src/signing/index.ts';
import { openVault } from '../src/vault/index.ts';
import {
  controllerVaultPool,
  countingClient,
  loadKube,
  metric,
  settleController,
  startBenchController,
  waitLeading,
} from './controller-kit.ts';
import {
  auditingClient,
  auditPool,
  type ApiWrites,
  type ChildInit,
  type MemoryReport,
  type ChildMessage,
  type ParentMessage,
  type VaultWrites,
} from './restart-audit.ts';

const send = (m: ChildMessage): Promise<void> =>
  new Promise((resolve, reject) => process.send!(m, undefined, {}, (err) => (err ? reject(err) : resolve())));

if (process.send === undefined) {
  console.error('restart-child.ts is forked by bench/restart.ts (it needs an IPC channel)');
  process.exit(2);
}

let running: { controller: RunningController; end: () => Promise<void> } | undefined;
const api: ApiWrites = { total: 0, converged: 0, backlog: 0, examples: [] };
const vault: VaultWrites = { total: 0, converged: 0, backlog: 0 };
const registry = new Registry();
let heapRelease: HeapReleaseHandle | undefined;
let counted: ReturnType<typeof countingClient>['counted'] | undefined;

async function start(init: ChildInit): Promise<void> {
  const pool = controllerVaultPool(init.dbUrl, 'bench-restart-second');
  auditPool(pool, { converged: new Set(init.convergedUids), backlog: new Set(init.backlogUids) }, vault);
  const counting = countingClient(auditingClient(kubeClient(loadKube(init.kubeconfig)), api));
  counted = counting.counted;
  const signer = signerFromPem(init.pki);
  const controller = startBenchController({
    client: counting.client,
    vault: await openVault(pool),
    env: init.env,
    signer,
    registry,
    leaseName: init.leaseName,
    watchNamespace: init.watchNamespace,
  });
  // As src/bin/controller-process.ts starts it beside the controller; its lines go to stderr.
  heapRelease = startHeapRelease({ logger: pino({ base: null }, pino.destination(2)) });
  running = {
    controller,
    end: async () => {
      heapRelease?.stop();
      await pool.end();
    },
  };
  await waitLeading(controller, registry);
  await send({ type: 'leading' });
}

/** This process's memory after forced garbage collections (process.memoryUsage), and its peak RSS. */
function memoryNow(): MemoryReport {
  // Exposed by the bench's --expose-gc (bench/restart.ts forks this file with it).
  const gc = (globalThis as { gc?: () => void }).gc;
  if (gc === undefined) throw new Error('restart-child.ts needs --expose-gc');
  gc();
  gc();
  const m = process.memoryUsage();
  return {
    heapUsed: m.heapUsed,
    heapTotal: m.heapTotal,
    external: m.external,
    arrayBuffers: m.arrayBuffers,
    rss: m.rss,
    maxRss: process.resourceUsage().maxRSS * 1024,
    mappings: residentByMapping(),
    heapReleases: heapRelease?.releases ?? 0,
  };
}

/**
 * Resident bytes by what is mapped (Linux `/proc/self/smaps`): a file's path, `[heap]` (malloc's
 * main arena), `[anon]` for anonymous mappings (V8's heap pages, other malloc arenas, thread
 * stacks, WebAssembly code), largest first; empty where /proc is not there. Tells the RSS that is
 * neither V8's heap nor external memory apart.
 */
function residentByMapping(): [string, number][] {
  let text: string;
  try {
    text = readFileSync('/proc/self/smaps', 'utf8');
  } catch {
    return [];
  }
  const by = new Map<string, number>();
  let name = '[anon]';
  for (const line of text.split('\n')) {
    const head = /^[0-9a-f]+-[0-9a-f]+ \S+ \S+ \S+ \S+\s*(.*)$/.exec(line);
    if (head !== null) {
      name = head[1]!.trim() === '' ? '[anon]' : head[1]!.trim();
      continue;
    }
    const rss = /^Rss:\s+(\d+) kB/.exec(line);
    if (rss !== null) by.set(name, (by.get(name) ?? 0) + Number(rss[1]) * 1024);
  }
  return [...by].sort((a, b) => b[1] - a[1]).slice(0, 12);
}

async function settle(timeoutMs: number): Promise<void> {
  const never = { throwIfStopping: () => undefined };
  await settleController(never, registry, 'restarted controller idle', timeoutMs, () =>
    Promise.resolve(true),
  );
  // Measured before any snapshot: writing one allocates about the heap's size again.
  const memory = memoryNow();
  // Then at rest: the Biscuit worker stops after its idle time (ten seconds) without a call, and
  // the heap release has read an idle process three times.
  const idleUntil = Date.now() + 15_000;
  const restBy = Date.now() + 60_000;
  while ((biscuitWorkers() > 0 || Date.now() < idleUntil) && Date.now() < restBy) await sleep(250);
  const atRest = memoryNow();
  // Diagnosis: BENCH_RESTART_HEAP_SNAPSHOT=<file> writes the idle controller's heap snapshot there
  // (Node's native objects appear in it as `Node / …` nodes with their sizes).
  const snapshot = process.env.BENCH_RESTART_HEAP_SNAPSHOT;
  if (snapshot !== undefined && snapshot !== '') v8.writeHeapSnapshot(snapshot);
  await send({
    type: 'report',
    reconciles: await metric(registry, 'controller_runtime_reconcile_total'),
    byCategory: [...(counted?.byCategory ?? [])],
    failures: [...(counted?.failures ?? [])],
    api,
    vault,
    memory,
    atRest,
  });
}

/** Stops the controller and closes its pool (a no-op before `init` or after a first call). */
async function shutDown(): Promise<void> {
  const r = running;
  running = undefined;
  await r?.controller.stop();
  await r?.end();
}

async function stop(): Promise<void> {
  await shutDown();
  process.exit(0);
}

async function fail(err: unknown): Promise<never> {
  await send({
    type: 'error',
    message: err instanceof Error ? (err.stack ?? err.message) : String(err),
  }).catch(() => undefined);
  process.exit(1);
}

process.on('message', (m: ParentMessage) => {
  const act = m.type === 'init' ? start(m) : m.type === 'settle' ? settle(m.timeoutMs) : stop();
  act.catch(fail);
});
// The bench went away (finished, interrupted or crashed): stop as the pod would on SIGTERM.
process.on('disconnect', () => {
  void shutDown()
    .catch(() => undefined)
    .finally(() => process.exit(0));
});
