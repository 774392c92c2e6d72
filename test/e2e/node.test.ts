/**
 * Issue 27: the chart's pods under a real kubelet, and nothing lost through pod kills, rolling
 * upgrades and control-plane restarts.
 *
 * One stack with a node (hack/stack/node: containerd 2.x, Debian's runc and CNI plugins, the
 * kubelet, kube-scheduler and kube-proxy of the pinned Kubernetes, the pause image built here, the
 * image of hack/image.sh), the chart from the working tree installed onto it with both
 * Deployments at 2 replicas and the stack's PostgreSQL, MinIO and TSA as external services
 * (SERVICE_TRANSPARENCY_WRITER=1). Each fault happens while a burst of 200 Runs (a tool step, a
 * model step, a tool step; every tenth Failed) is finishing; afterwards every Run has exactly one
 * AIBOM and one record set, no Run is stuck, the vault's chain and newest checkpoint verify, and no
 * replica was restarted by its liveness probe (only the one the test killed restarted). The table
 * of faults, the graceful-shutdown and takeover times and the controller's memory peak against
 * its limit are printed, never asserted against a clock.
 *
 * Needs root (a kubelet, containerd, a bridge); skipped otherwise, saying so. Runs after the
 * integration project (vitest.config.ts: its own project, groupOrder 2), alone on the machine.
 */
import { execFile } from 'node:child_process';
import { mkdtemp, readdir, readFile, rm, stat } from 'node:fs/promises';
import { loadavg, tmpdir, userInfo } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { CoreV1Api, CustomObjectsApi, type KubeConfig } from '@kubernetes/client-node';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { parse as parseYaml } from 'yaml';
import { watchOwner } from '../../hack/stack/reaper.ts';
import { repoRoot, startStack, stopStack, type StackInfo } from '../../hack/stack/stack.ts';
import { bridgeExists, NODE_NETWORK } from '../../hack/stack/node/network.ts';
import { cgroupHierarchies, CGROUP_ROOT } from '../../hack/stack/node/kubelet.ts';
import { mountsUnder } from '../../hack/stack/node/mounts.ts';
import { helm, imageRef, installChart, kubectl, waitRolledOut } from '../../hack/stack/node/chart.ts';
import { importLayout } from '../../hack/stack/node/containerd.ts';
import { nodeOwner } from '../../hack/stack/node/index.ts';
import { processStartMs } from '../../hack/stack/proc.ts';
import { GROUP, VERSION } from '../../src/crd/run.ts';
import {
  adminConfig,
  containerPid,
  events,
  followLogs,
  leaseHolder,
  memoryCgroup,
  memoryOf,
  releasePods,
  resetPeak,
  restartServer,
  restartsAndLivenessKills,
  waitNewLeader,
  watchPodToDeletion,
} from './helpers/cluster.ts';
import { settle, startBurst, until, type Burst, type BurstOutcome } from './helpers/burst.ts';
import { burstSpec, createRun, drive, hugeSpec, retrying, statusSequence } from './helpers/pipeline.ts';
import { probeApi } from './helpers/probe.ts';
import {
  aibomCount,
  evidenceOf,
  followUpsOf,
  logAgainstQueue,
  sidecarCounts,
  type RunEvidence,
} from './helpers/vault.ts';

const run = promisify(execFile);
const isRoot = userInfo().uid === 0;
/** docs/runs.md "How many records one Run creates": 3·S + C + 6 for hugeSpec (every step succeeds with an output). */
const WORST_RECORDS = 3 * 128 + 256 + 6;
const RUNS = 200;
/**
 * How long the AIBOMs of a burst may make no progress before the Runs still without one count as
 * stuck (`lost`): a bound on a standstill, not on speed (a busy machine is slow, not stuck).
 */
const STANDSTILL_MS = 5 * 60_000;
const LEASE = 'aibom-vault-node-controller';

let stack: StackInfo;
let kc: KubeConfig;
let work: string;
let checkpoint: string | undefined;
let stopped = false;
const t0 = Date.now();

interface Row {
  fault: string;
  inFlight: number;
  aiboms: number;
  lost: number;
  duplicated: number;
  recoverS: number;
  notes: string;
}
const rows: Row[] = [];

const node = () => stack.node!;
const ns = () => node().namespace;
const log = (line: string): void => console.log(`[e2e] ${line}`);

/**
 * The node's owner file (what `npm run stack -- down` reads when the test run died) lists the
 * restarted server under its new process id and no process under the old one.
 */
async function expectOwnerLists(name: string, newPid: number, oldPid: number): Promise<void> {
  const listed = (await ownerFile())?.procs ?? [];
  expect(
    listed.filter((p) => p.name === name).map((p) => p.pid),
    `${name} in /run/aibom-vault-node.json`,
  ).toEqual([newPid]);
  expect(
    listed.map((p) => p.pid),
    'old pid in /run/aibom-vault-node.json',
  ).not.toContain(oldPid);
}

async function kubectlOut(args: string[]): Promise<string> {
  return kubectl(node().chart!, args);
}

/** `service-ctl verify --chain` through the API's Service: the whole vault and a fresh checkpoint. */
async function verifyChain(): Promise<string> {
  const next = join(work, `cp-${Date.now()}.cose`);
  const args = [
    join(repoRoot, 'src/bin/service-ctl.ts'),
    'verify',
    '--chain',
    '--trust-anchor',
    stack.env.SERVICE_TRUST_ANCHOR!,
    '--fresh',
    '--save-checkpoint',
    next,
    ...(checkpoint ? ['--checkpoint', checkpoint] : []),
  ];
  const env = { ...process.env, SERVICE_API_URL: node().apiUrl!, SERVICE_TOKEN: stack.env.SERVICE_TOKEN! };
  try {
    const { stdout } = await run(process.execPath, args, { env, maxBuffer: 64 * 1024 * 1024 });
    checkpoint = next;
    return stdout.trim();
  } catch (err) {
    const e = err as { stdout?: string; stderr?: string; message: string };
    throw new Error(`service-ctl verify --chain failed: ${e.message}\n${e.stdout ?? ''}\n${e.stderr ?? ''}`, {
      cause: err,
    });
  }
}

/** Restart counts per pod before a round, to tell the round's restarts apart. */
type Restarts = Record<string, number>;

/**
 * One fault round: a burst of RUNS Runs; once a third of them were driven to their terminal phase,
 * `inject` runs the fault; then every Run is driven to the end, the vault is read and checked.
 * `killed` (set by inject) names a pod the test itself killed (its one restart is expected).
 */
async function round(
  fault: string,
  inject: (ctx: { burst: Burst; faultAt: number }) => Promise<{ notes: string; killed?: string }>,
  opts: { apiMayFail?: boolean } = {},
): Promise<BurstOutcome> {
  const namespace = `e2e-${fault.replace(/[^a-z0-9]+/gi, '-').toLowerCase()}`.slice(0, 50).replace(/-$/, '');
  const roundStart = Date.now() - 1000; // Event times have second precision
  const before: Restarts = (await restartsAndLivenessKills(kc, ns())).restarts;
  const killsBefore = (await restartsAndLivenessKills(kc, ns())).livenessKills.length;
  const burst = await startBurst(kc, namespace, { n: RUNS, failEvery: 10, concurrency: 12 });
  await until(
    () => burst.terminal() >= RUNS / 3,
    STANDSTILL_MS,
    `${RUNS / 3} Runs of the burst driven to their end`,
  );
  const faultAt = Date.now();
  const idsNow = burst.runs.map((r) => r.uid);
  const inFlight = RUNS - (await aibomCount(stack.database.superuser, idsNow));
  log(`${fault}: fault at ${burst.terminal()} of ${RUNS} Runs finished, ${inFlight} without an AIBOM yet`);
  // The API through its Service, as a client sees it while the fault happens and the burst ends.
  const probe = probeApi(`${node().apiUrl}/v1/runs?namespace=e2e-first&limit=1`, stack.env.SERVICE_TOKEN!);
  const { notes, killed } = await inject({ burst, faultAt });
  await burst.driven;
  const api = await probe.stop();
  const out = await settle(kc, stack.database.superuser, burst, STANDSTILL_MS);
  const recoverS = (out.lastAibomAt - faultAt) / 1000;
  const sidecars = await sidecarCounts(
    {
      endpoint: stack.env.S3_ENDPOINT!,
      accessKey: stack.env.S3_ACCESS_KEY!,
      secretKey: stack.env.S3_SECRET_KEY!,
      bucket: stack.env.S3_BUCKET!,
    },
    namespace,
  );
  const extraSidecars = [...sidecars.entries()]
    .filter(([, n]) => n !== 1)
    .map(([id, n]) => `${id}: ${n} sidecars`);
  const row: Row = {
    fault,
    inFlight,
    aiboms: out.aiboms,
    lost: out.lost,
    duplicated: out.duplicated + extraSidecars.length,
    recoverS,
    notes: `${notes}; API through its Service: ${api.ok} answers, ${api.failed} failed${api.samples.length ? ` (${api.samples.join('; ')})` : ''}; load average ${loadavg()[0]!.toFixed(1)}`,
  };
  rows.push(row);
  log(
    `${fault}: ${RUNS} Runs, ${inFlight} in flight at the fault, ${out.aiboms} AIBOMs, ${out.lost} lost, ${row.duplicated} duplicated, last AIBOM ${recoverS.toFixed(1)} s after the fault; ${notes}`,
  );
  // What follows each record: its SCITT registration and its RFC 3161 time-stamp (queues every
  // replica drains), waited for like the AIBOMs: until done or standing still.
  const ids = burst.runs.map((r) => r.uid);
  let follow = await followUpsOf(stack.database.superuser, ids);
  let [seen, since] = [-1, Date.now()];
  while (follow.scitt.pending + follow.stamps.pending > 0 && Date.now() - since < STANDSTILL_MS) {
    const done = follow.scitt.published + follow.stamps.stamped;
    if (done > seen) [seen, since] = [done, Date.now()];
    await new Promise((r) => setTimeout(r, 1000));
    follow = await followUpsOf(stack.database.superuser, ids);
  }
  const logCheck = await logAgainstQueue(stack.database.superuser);
  log(
    `${fault}: ${follow.records} records: SCITT ${JSON.stringify(follow.scitt)}, time-stamps ${JSON.stringify(follow.stamps)}; local log ${JSON.stringify(logCheck)}`,
  );
  const chain = await verifyChain();
  log(
    `${fault}: ${
      chain
        .split('\n')
        .filter((l) => l.startsWith('CHAIN') || l.startsWith('OK'))
        .join(' | ') || chain
    }`,
  );
  // What the Runs and the pods reported meanwhile (Warning Events by reason): how the fault showed.
  const warnings = new Map<string, number>();
  for (const e of [...(await events(kc, namespace)), ...(await events(kc, ns()))]) {
    const when = new Date(e.lastTimestamp ?? e.eventTime ?? e.metadata.creationTimestamp ?? 0).getTime();
    if (e.type === 'Warning' && when >= roundStart)
      warnings.set(e.reason ?? '?', (warnings.get(e.reason ?? '?') ?? 0) + (e.count ?? 1));
  }
  log(`${fault}: Warning Events: ${[...warnings].map(([r, n]) => `${r} ×${n}`).join(', ') || 'none'}`);
  const after = await restartsAndLivenessKills(kc, ns());
  const unexpected = Object.entries(after.restarts)
    .map(([pod, n]) => [pod, n - (before[pod] ?? 0)] as const)
    .filter(([pod, n]) => n !== (pod === killed ? 1 : 0))
    .map(([pod, n]) => `${pod}: ${n} restarts`);
  expect(follow.scitt, 'SCITT registrations of the records').toEqual({
    published: follow.records,
    pending: 0,
    failed: 0,
    missing: 0,
  });
  expect(follow.stamps, 'time-stamps of the records').toEqual({
    stamped: follow.records,
    pending: 0,
    failed: 0,
    missing: 0,
  });
  expect(logCheck.entries, 'local log entries = published jobs + checkpoint registrations').toBe(
    logCheck.expected,
  );
  expect(logCheck.entriesOfNothing, 'log entries of no job and no checkpoint').toBe(0);
  // Without the API server nothing can authenticate a caller (TokenReview): those two faults
  // may fail requests; no other fault may.
  if (!opts.apiMayFail)
    expect(api.samples, `requests to the API through its Service that failed (${api.failed})`).toEqual([]);
  expect(out.stuck, 'Runs without AIBOMReady=True').toEqual([]);
  expect(out.lost, 'Runs that ended without an AIBOM').toBe(0);
  expect(out.wrongRecordSets, 'Runs whose records are not exactly one record set').toEqual([]);
  expect(out.duplicated, 'Runs with a second AIBOM or record set').toBe(0);
  expect(extraSidecars, 'Runs with other than one C2PA sidecar').toEqual([]);
  expect(after.livenessKills.slice(killsBefore), 'liveness restarts').toEqual([]);
  expect(
    unexpected,
    `restarts other than the killed pod's (unhealthy events: ${after.unhealthy.join('; ')})`,
  ).toEqual([]);
  return out;
}

beforeAll(async () => {
  if (!isRoot) return;
  work = await mkdtemp(join(tmpdir(), 'e2e-node-'));
  stack = await startStack({
    node: true,
    // Another test run on this machine (a check of the same tree beside CI) may hold the node:
    // take turns with it rather than fail. Inside the hook's 40 minutes with the node's own start.
    nodeClaimWaitMs: 20 * 60_000,
    settings: { SERVICE_TRANSPARENCY_WRITER: '1' },
    log: (l) => log(`[stack] ${l}`),
  });
  // A test worker killed without its afterAll (vitest's SIGINT/SIGTERM, a SIGKILL) stops nothing:
  // the reaper then takes the node and the stack down (hack/stack/reaper.ts).
  await watchOwner(stack);
  kc = adminConfig(stack.kube.kubeconfigs.admin);
  log(`node up in ${((Date.now() - t0) / 1000).toFixed(0)} s; API through its Service at ${node().apiUrl}`);
}, 40 * 60_000);

afterAll(async () => {
  if (rows.length) {
    const table = [
      '| fault | Runs in flight | AIBOMs | lost | duplicated | time to last AIBOM |',
      '| --- | ---: | ---: | ---: | ---: | ---: |',
      ...rows.map(
        (r) =>
          `| ${r.fault} | ${r.inFlight} | ${r.aiboms} | ${r.lost} | ${r.duplicated} | ${r.recoverS.toFixed(1)} s |`,
      ),
    ];
    log(
      `fault table (${RUNS} Runs per fault):\n${table.join('\n')}\n${rows.map((r) => `- ${r.fault}: ${r.notes}`).join('\n')}`,
    );
  }
  if (stack && !stopped) await stopStack(stack);
  if (work) await rm(work, { recursive: true, force: true });
  log(`e2e total ${((Date.now() - t0) / 1000 / 60).toFixed(1)} min`);
}, 10 * 60_000);

describe.skipIf(!isRoot)('the chart on a real node (kubelet, containerd, kube-proxy)', () => {
  it(
    'installs the chart: both Deployments at 2 replicas Ready through their probes, the API through its Service, and kubectl shows pods, Services and Runs',
    async () => {
      const pods = await releasePods(kc, ns());
      expect(pods.controller).toHaveLength(2);
      expect(pods.api).toHaveLength(2);
      for (const p of [...pods.controller, ...pods.api]) {
        const c = p.spec!.containers[0]!;
        expect(c.readinessProbe?.httpGet?.path, p.metadata!.name).toBe('/readyz');
        expect(c.livenessProbe?.httpGet?.path, p.metadata!.name).toBe('/healthz');
        expect(p.status?.conditions?.find((x) => x.type === 'Ready')?.status, p.metadata!.name).toBe('True');
        expect(p.spec!.nodeName).toBe('aibom-node');
        expect(p.status?.podIP, 'a pod address on the node bridge').toMatch(/^10\.244\.0\./);
      }
      // Through the Service (kube-proxy's nftables rules), as a user on a node reaches it.
      expect(node().apiUrl).toMatch(/^http:\/\/10\.0\.0\.\d+:8080$/);
      const r = await fetch(`${node().apiUrl}/v1/runs?namespace=default`, {
        headers: { authorization: `Bearer ${stack.env.SERVICE_TOKEN}` },
      });
      expect(r.status).toBe(200);
      // A first Run through the pods, so `kubectl get runs` has one to show.
      const name = 'first-run';
      await retrying(() =>
        kc.makeApiClient(CoreV1Api).createNamespace({ body: { metadata: { name: 'e2e-first' } } }),
      );
      const spec = burstSpec(0);
      await createRun(kc, 'e2e-first', name, spec, {});
      await drive(kc, 'e2e-first', name, statusSequence(spec, false));
      await until(
        async () => {
          const got = (await kc.makeApiClient(CustomObjectsApi).getNamespacedCustomObject({
            group: GROUP,
            version: VERSION,
            namespace: 'e2e-first',
            plural: 'runs',
            name,
          })) as { status?: { conditions?: { type: string; status: string }[] } };
          return got.status?.conditions?.some((c) => c.type === 'AIBOMReady' && c.status === 'True') === true;
        },
        120_000,
        'the first Run to have its AIBOM',
      );
      log(`kubectl get pods,svc,runs -A\n${await kubectlOut(['get', 'pods,svc,runs', '-A', '-o', 'wide'])}`);
    },
    10 * 60_000,
  );

  it(
    'delete the leader controller pod while it records the largest Run: SIGTERM finishes or hands over within the grace period, the new leader takes over at once',
    async () => {
      let large: { uid: string; atDelete: RunEvidence; deletedAt: number; stoppedAt: number } | undefined;
      await round('delete leader pod', async () => {
        // In-flight work at the SIGTERM beside the burst's: a Run whose recording takes the leader
        // many batches (128 steps, 256 capabilities), deleted once its first step claims landed
        // and before its AIBOM. Its recording either finishes before the exit or is handed over.
        await retrying(() =>
          kc.makeApiClient(CoreV1Api).createNamespace({ body: { metadata: { name: 'e2e-sigterm' } } }),
        );
        const spec = hugeSpec();
        const uid = await createRun(kc, 'e2e-sigterm', 'largest-at-sigterm', spec, {});
        await drive(kc, 'e2e-sigterm', 'largest-at-sigterm', statusSequence(spec, false).slice(-1));
        let atDelete: RunEvidence | undefined;
        await until(
          async () => {
            atDelete = (await evidenceOf(stack.database.superuser, [uid])).get(uid);
            return (atDelete?.stepClaims ?? 0) > 0;
          },
          STANDSTILL_MS,
          'the leader to start recording the largest Run',
          250,
        );
        const leader = await leaseHolder(kc, ns(), LEASE);
        const pod = leader.replace(/-[0-9a-f]{6}$/, '');
        const grace = (await releasePods(kc, ns())).controller.find((p) => p.metadata!.name === pod)!.spec!
          .terminationGracePeriodSeconds!;
        const logs = followLogs(stack.tools.kubectl, stack.kube.kubeconfigs.admin, ns(), pod);
        const watched = await watchPodToDeletion(kc, ns(), pod);
        const deleted = Date.now();
        await retrying(() => kc.makeApiClient(CoreV1Api).deleteNamespacedPod({ name: pod, namespace: ns() }));
        const next = await waitNewLeader(kc, ns(), LEASE, leader, 120_000);
        const takeover = (Date.now() - deleted) / 1000;
        const exit = await watched.gone;
        const gone = (exit.goneAt - deleted) / 1000;
        await logs.done;
        const lastWords = logs
          .text()
          .split('\n')
          .filter((l) =>
            /shutting down|lease released|release the lease|stopped|term ended|exceeded|did not stop in time/.test(
              l,
            ),
          )
          .map((l) => l.slice(0, 240));
        log(`old leader ${pod} on the way out:\n${lastWords.join('\n')}`);
        // Graceful: exit code 0 (a process still running when the grace period ends is SIGKILLed:
        // 137; one whose stop outlasts its own 20 s bound exits 1). The term's workers get what is
        // left of the renew deadline to finish their reconciles; then the Lease is released (the
        // standby takes over at once) or, on a machine too slow for that, left to expire (the
        // standby takes over after the lease duration): both hand over, the output says which.
        expect(exit.exitCode, `${pod}'s exit code after SIGTERM`).toBe(0);
        const released = logs.text().includes('"msg":"lease released"');
        const leftToExpire = logs.text().includes('leaving the lease to expire');
        expect(released || leftToExpire, 'the Lease released, or left to expire, on the way out').toBe(true);
        // The process's own account (pino, ms): SIGTERM received → stopped.
        const at = (msg: string): number | undefined => {
          const line = logs
            .text()
            .split('\n')
            .find((l) => l.includes(`"msg":"${msg}"`));
          return line ? Date.parse((JSON.parse(line) as { time: string }).time) : undefined;
        };
        const [sigterm, stoppedAt, termEnded] = [
          at('shutting down'),
          at('stopped'),
          at('term ended: informer and workers stopped'),
        ];
        const since = (t: number | undefined): string =>
          sigterm !== undefined && t !== undefined ? `${((t - sigterm) / 1000).toFixed(1)} s` : 'not logged';
        large = {
          uid,
          atDelete: atDelete!,
          deletedAt: deleted,
          stoppedAt: Math.max(stoppedAt ?? 0, termEnded ?? 0) || exit.goneAt,
        };
        const lease = released
          ? 'lease released'
          : 'term work outlasted the renew deadline: lease left to expire';
        return {
          notes: `SIGTERM → workers stopped ${since(termEnded)}, process stopped ${since(stoppedAt)} (exit 0), pod gone ${gone.toFixed(1)} s after the delete (grace period ${grace} s); ${lease}; new leader ${next.replace(/-[0-9a-f]{6}$/, '')} ${takeover.toFixed(1)} s after the delete (lease duration 15 s)`,
        };
      });
      // The Run in flight at the SIGTERM: exactly one AIBOM and one record set, whoever finished it.
      await until(
        async () =>
          (await evidenceOf(stack.database.superuser, [large!.uid])).get(large!.uid)?.artifacts === 1,
        STANDSTILL_MS,
        'the largest Run of the SIGTERM round to have its AIBOM',
        1000,
      );
      const e = (await evidenceOf(stack.database.superuser, [large!.uid])).get(large!.uid)!;
      expect([e.stepClaims, e.terminalClaims, e.unclaimed, e.claimedTwice, e.aiboms, e.records]).toEqual([
        128,
        2,
        0,
        0,
        1,
        WORST_RECORDS,
      ]);
      const aibomAt = e.aibomAt!.getTime();
      const how =
        aibomAt > large!.stoppedAt
          ? `handed over: the new leader wrote the rest and its AIBOM ${((aibomAt - large!.deletedAt) / 1000).toFixed(1)} s after the delete`
          : `finished by the old leader before it stopped (AIBOM ${((aibomAt - large!.deletedAt) / 1000).toFixed(1)} s after the delete)`;
      const row = rows.at(-1)!;
      row.notes += `; the largest Run (128 steps, 256 capabilities) had ${large!.atDelete.stepClaims} of 128 step claims and no AIBOM at the delete: ${how}; now one AIBOM, ${e.records} records, none unclaimed or claimed twice`;
      log(`delete leader pod: largest Run in flight at the SIGTERM: ${how}`);
    },
    90 * 60_000,
  );

  it(
    "kill -9 of the leader controller's process inside its container: the kubelet restarts it; once the lease expires another process leads (the standby, or the restarted container if it asks first)",
    async () => {
      await round('kill -9 leader process', async () => {
        const leader = await leaseHolder(kc, ns(), LEASE);
        const podName = leader.replace(/-[0-9a-f]{6}$/, '');
        const pod = (await releasePods(kc, ns())).controller.find((p) => p.metadata!.name === podName)!;
        const pid = await containerPid(pod);
        const killed = Date.now();
        process.kill(pid, 'SIGKILL');
        // Any other process: leader election prefers none, so the standby and the container the
        // kubelet restarted in the same pod (a new identity) race for the expired lease.
        const next = await waitNewLeader(kc, ns(), LEASE, leader, 120_000);
        const nextPod = next.replace(/-[0-9a-f]{6}$/, '');
        const takeover = (Date.now() - killed) / 1000;
        await until(
          async () =>
            (await releasePods(kc, ns())).controller.every(
              (p) => p.status?.conditions?.find((c) => c.type === 'Ready')?.status === 'True',
            ),
          180_000,
          'the killed container to be restarted and Ready',
        );
        const restarted = (await releasePods(kc, ns())).controller.find((p) => p.metadata!.name === podName)!;
        const last = restarted.status?.containerStatuses?.[0]?.lastState?.terminated;
        expect(last?.exitCode, 'the killed container ended by SIGKILL').toBe(137);
        return {
          killed: podName,
          notes: `pid ${pid} of ${podName} killed (exit 137, restarted by the kubelet); new leader ${nextPod} (${nextPod === podName ? "the killed pod's restarted container" : 'the standby'}) after ${takeover.toFixed(1)} s (lease duration 15 s: no release, it expired)`,
        };
      });
    },
    90 * 60_000,
  );

  it(
    'helm upgrade to a new image tag: both Deployments roll, one pod at a time, while Runs finish',
    async () => {
      await round('helm upgrade (new image tag)', async () => {
        const tag = 'e2e-upgrade';
        const n = node();
        await importLayout(
          n.tools!,
          n.containerdSocket!,
          n.image!.layout,
          imageRef(tag),
          join(n.dir, 'images'),
        );
        const started = Date.now();
        const values = JSON.parse(
          await helm(n.chart!, ['get', 'values', n.release, '-n', n.namespace, '-o', 'json']),
        ) as Record<string, unknown>;
        await installChart(
          n.chart!,
          { ...values, image: { ...(values.image as object), tag } },
          join(n.dir, 'values'),
          'upgrade',
        );
        await waitRolledOut(n.chart!, 600_000);
        const pods = await releasePods(kc, ns());
        for (const p of [...pods.controller, ...pods.api])
          expect(p.spec!.containers[0]!.image).toBe(`aibom-vault:${tag}`);
        return {
          notes: `both Deployments rolled out to aibom-vault:${tag} in ${((Date.now() - started) / 1000).toFixed(1)} s`,
        };
      });
    },
    90 * 60_000,
  );

  it(
    'kube-apiserver stopped for 8 s and started again',
    async () => {
      await round(
        'kube-apiserver restart (8 s)',
        async () => {
          const { stoppedAt, startedAt, oldPid, newPid } = await restartServer(stack, 'kube-apiserver', 8000);
          await expectOwnerLists('kube-apiserver', newPid, oldPid);
          await until(
            async () => (await kubectlOut(['get', '--raw', '/readyz']).catch(() => '')) === 'ok',
            180_000,
            'kube-apiserver ready',
          );
          return {
            notes: `down ${((startedAt - stoppedAt) / 1000).toFixed(1)} s, ready again ${((Date.now() - stoppedAt) / 1000).toFixed(1)} s after the stop`,
          };
        },
        { apiMayFail: true },
      );
    },
    90 * 60_000,
  );

  it(
    'etcd stopped for 8 s and started again',
    async () => {
      await round(
        'etcd restart (8 s)',
        async () => {
          const { stoppedAt, startedAt, oldPid, newPid } = await restartServer(stack, 'etcd', 8000);
          await expectOwnerLists('etcd', newPid, oldPid);
          await until(
            async () => (await kubectlOut(['get', '--raw', '/readyz']).catch(() => '')) === 'ok',
            180_000,
            'kube-apiserver ready with etcd back',
          );
          return {
            notes: `down ${((startedAt - stoppedAt) / 1000).toFixed(1)} s, API ready again ${((Date.now() - stoppedAt) / 1000).toFixed(1)} s after the stop`,
          };
        },
        { apiMayFail: true },
      );
    },
    90 * 60_000,
  );

  it(
    "one Run as large as admission allows beside the burst: the controller's memory peak stays under its limit, no OOM kill",
    async () => {
      const limits: string[] = [];
      let huge: { uid: string; name: string } | undefined;
      const cgroups = new Map<string, string>();
      await round('largest Run (128 steps, 256 capabilities) + burst', async () => {
        for (const p of (await releasePods(kc, ns())).controller) {
          const dir = await memoryCgroup(p);
          cgroups.set(p.metadata!.name!, dir);
          await resetPeak(dir);
        }
        const name = 'largest';
        const spec = hugeSpec();
        await retrying(() =>
          kc.makeApiClient(CoreV1Api).createNamespace({ body: { metadata: { name: 'e2e-largest' } } }),
        );
        const uid = await createRun(kc, 'e2e-largest', name, spec, {});
        huge = { uid, name };
        // The pipeline reports the whole Run at once (every step finished, the Run Succeeded).
        await drive(kc, 'e2e-largest', name, statusSequence(spec, false).slice(-1));
        return { notes: 'memory: see below' };
      });
      // The large Run's own record set: 128 step claims, `run:` and `aibom:`.
      await until(
        async () => (await evidenceOf(stack.database.superuser, [huge!.uid])).get(huge!.uid)?.artifacts === 1,
        STANDSTILL_MS,
        'the largest Run to have its AIBOM',
        1000,
      );
      const e = (await evidenceOf(stack.database.superuser, [huge!.uid])).get(huge!.uid)!;
      expect([e.stepClaims, e.terminalClaims, e.unclaimed, e.claimedTwice, e.aiboms, e.records]).toEqual([
        128,
        2,
        0,
        0,
        1,
        WORST_RECORDS,
      ]);
      let peak = 0;
      let limit = 0;
      for (const [pod, dir] of cgroups) {
        const m = await memoryOf(dir);
        limits.push(
          `${pod}: peak ${(m.peak / 2 ** 20).toFixed(0)} MiB of ${(m.limit / 2 ** 20).toFixed(0)} MiB, OOM kills ${m.oomKills}, limit hits ${m.failcnt}`,
        );
        expect(m.oomKills, `${pod} OOM kills`).toBe(0);
        expect(m.peak, `${pod} peak below its limit`).toBeLessThan(m.limit);
        peak = Math.max(peak, m.peak);
        limit = m.limit;
      }
      const chartDefault = await chartControllerMemoryLimit();
      expect(limit).toBe(chartDefault);
      const row = rows.at(-1)!;
      row.notes = `controller memory peak ${(peak / 2 ** 20).toFixed(0)} MiB of the chart's default limit ${(limit / 2 ** 20).toFixed(0)} MiB (${((100 * peak) / limit).toFixed(0)} %), no OOM kill; ${limits.join('; ')}`;
      log(`memory: ${row.notes}`);
    },
    90 * 60_000,
  );

  it(
    'down removes the node: pods, containers, mounts, cgroups, network state; the kernel settings as they were',
    async () => {
      const dir = node().dir;
      const sysctls = node().sysctls ?? {};
      const left = await stopStack(stack);
      stopped = true;
      expect(left).toEqual([]);
      expect(await bridgeExists(), `bridge ${NODE_NETWORK.bridge}`).toBe(false);
      expect(await mountsUnder(dir)).toEqual([]);
      for (const h of await cgroupHierarchies()) {
        expect(await stat(join(h, CGROUP_ROOT)).catch(() => undefined), `${h}${CGROUP_ROOT}`).toBeUndefined();
      }
      const tables = await run('nft', ['list', 'tables']).then((r) => r.stdout);
      expect(tables).not.toMatch(/kube-proxy/);
      for (const [k, v] of Object.entries(sysctls))
        expect((await readFile(`/proc/sys/${k}`, 'utf8')).trim(), k).toBe(v);
      const shims = (
        await run('sh', ['-c', 'ls -l /proc/*/exe 2>/dev/null | grep -c containerd-shim || true'])
      ).stdout.trim();
      expect(shims).toBe('0');
      expect(await stat('/run/aibom-vault-node.json').catch(() => undefined)).toBeUndefined();
    },
    10 * 60_000,
  );

  it(
    'a node left by a run killed with its session (every server SIGKILLed, its pods still running) is taken over by the next start; a down in the old checkout or in one without a stack leaves the new node alone',
    async () => {
      const cli = (state: string, ...args: string[]) =>
        run(process.execPath, ['hack/stack/cli.ts', ...args], {
          cwd: repoRoot,
          env: { ...process.env, STACK_STATE_DIR: state },
          maxBuffer: 16 << 20,
        });
      const [killedState, nextState] = [join(work, 'killed-state'), join(work, 'next-state')];
      try {
        await cli(killedState, 'up', '--node');
        const killed = await ownerFile();
        expect(killed?.procs?.length, 'the owner file lists the servers').toBeGreaterThan(5);
        for (const p of killed!.procs!) {
          try {
            process.kill(-p.pid, 'SIGKILL');
          } catch {
            /* already gone */
          }
        }
        const pods = await nodePids();
        expect(pods.length, "the killed node's pods outlive its servers").toBeGreaterThan(0);
        const t = Date.now();
        await cli(nextState, 'up', '--node');
        log(
          `a killed node taken over by the next start: up --node took ${((Date.now() - t) / 1000).toFixed(1)} s`,
        );
        const next = await ownerFile();
        expect(next?.root).toBeDefined();
        expect(next!.root).not.toBe(killed!.root);
        expect(
          await stat(killed!.root).catch(() => undefined),
          "the killed stack's temp dir",
        ).toBeUndefined();
        const stillThere = pods.filter((pid) => {
          const started = processStartMs(pid);
          return started !== undefined && started < t;
        });
        expect(stillThere, "the killed node's pod processes").toEqual([]);
        // The killed checkout's `down` (its state still says it runs) stops nothing of the new node,
        // nor does a `down` in a checkout with no stack at all.
        await cli(killedState, 'down');
        const elsewhere = await cli(join(work, 'no-state'), 'down');
        expect(elsewhere.stdout).toContain(`the node on this machine is the stack of ${nextState}`);
        expect(await ownerFile().then((o) => o?.root)).toBe(next!.root);
        expect(await bridgeExists(), 'the new node keeps its bridge').toBe(true);
        const status = await cli(nextState, 'status');
        expect(status.stdout).not.toMatch(/DEAD/);
      } finally {
        await cli(nextState, 'down').catch((e: unknown) => log(`down of the next stack: ${String(e)}`));
        await rm(killedState, { recursive: true, force: true });
      }
      expect(await bridgeExists()).toBe(false);
      expect(await stat('/run/aibom-vault-node.json').catch(() => undefined)).toBeUndefined();
      expect(await nodePids()).toEqual([]);
    },
    15 * 60_000,
  );
});

/** The stack the node's owner file names (its processes, its node). */
async function ownerFile(): Promise<NonNullable<Awaited<ReturnType<typeof nodeOwner>>>['owner'] | undefined> {
  return (await nodeOwner())?.owner;
}

/** The processes in the node's cgroups (the pods' containers and sandboxes). */
async function nodePids(): Promise<number[]> {
  const [h] = await cgroupHierarchies();
  const out: number[] = [];
  const walk = async (d: string): Promise<void> => {
    const entries = await readdir(d, { withFileTypes: true }).catch(() => []);
    const procs = await readFile(join(d, 'cgroup.procs'), 'utf8').catch(() => '');
    out.push(
      ...procs
        .split('\n')
        .filter((l) => /^\d+$/.test(l))
        .map(Number),
    );
    for (const e of entries) if (e.isDirectory()) await walk(join(d, e.name));
  };
  if (h) await walk(join(h, CGROUP_ROOT));
  return out;
}

/** `controller.resources.limits.memory` of the chart's values.yaml, in bytes (Mi or Gi). */
async function chartControllerMemoryLimit(): Promise<number> {
  const values = parseYaml(await readFile(join(repoRoot, 'charts/aibom-vault/values.yaml'), 'utf8')) as {
    controller: { resources: { limits: { memory: string } } };
  };
  const text = values.controller.resources.limits.memory;
  const m = /^(\d+)(Mi|Gi)$/.exec(text);
  if (m === null) throw new Error(`controller.resources.limits.memory ${text}: expected <n>Mi or <n>Gi`);
  return Number(m[1]) * 2 ** (m[2] === 'Gi' ? 30 : 20);
}
