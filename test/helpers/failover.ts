/**
 * What the failover and object-store fault tests share (test/integration/failover/): a burst of
 * Runs finished by a pipeline, a record of everything the service acknowledged while it ran (Run
 * statuses, Attestation resources, API answers), the controller's "AIBOM recorded" lines, and the
 * result table the issue asks for. Real processes throughout: the controller and the API are
 * src/bin/*.ts as children (controller-process.ts), PostgreSQL and the proxy are hack/stack's.
 */
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { PatchStrategy, setHeaderOptions } from '@kubernetes/client-node';
import pg from 'pg';
import { PIPELINE_FIELD_MANAGER } from '../../hack/sample-pipeline.ts';
import { stopAll } from '../../hack/stack/stack.ts';
import {
  failover,
  holdReplication,
  startReplicatedPostgres,
  type FailoverReport,
  type ReplicatedPostgres,
  type StandbyMode,
} from '../../hack/stack/standby.ts';
import type { DevPki } from '../../hack/dev-pki.ts';
import type { Run, RunSpec } from '../../src/crd/run.ts';
import { claimOf } from '../../src/recorder/index.ts';
import { migrate } from '../../src/vault/index.ts';
import {
  createRun,
  customObjects,
  poll,
  sleep,
  startControllerProcess,
  testEnv,
  type ControllerOptions,
  type ControllerProcess,
  type LogLine,
} from './controller-process.ts';
import { stack } from './stack.ts';

const GROUP = 'vault.service.dev';
const VERSION = 'v1';

/** One tool step: a Run of four records (step, policy, run, AIBOM) and an AIBOM. */
export const BURST_SPEC: RunSpec = {
  policyPack: { name: 'baseline', version: '1.0.0' },
  steps: [{ id: 'answer', tool: { name: 'echo', command: ['echo', 'ok'] } }],
};

/** Creates a Run and finishes it with one status write, as a pipeline whose only step is done. */
export async function finishRun(namespace: string, name: string, spec: RunSpec = BURST_SPEC): Promise<void> {
  await createRun(namespace, name, spec);
  const at = new Date().toISOString();
  await customObjects().patchNamespacedCustomObjectStatus(
    {
      group: GROUP,
      version: VERSION,
      namespace,
      plural: 'runs',
      name,
      body: {
        apiVersion: `${GROUP}/${VERSION}`,
        kind: 'Run',
        metadata: { name, namespace },
        status: {
          phase: 'Succeeded',
          steps: spec.steps.map((s) => ({
            id: s.id,
            phase: 'Succeeded',
            startedAt: at,
            finishedAt: at,
            output: { name },
          })),
        },
      },
      fieldManager: PIPELINE_FIELD_MANAGER,
      force: false,
    },
    setHeaderOptions('Content-Type', PatchStrategy.ServerSideApply),
  );
}

export async function listRuns(namespace: string): Promise<Run[]> {
  const list = (await customObjects().listNamespacedCustomObject({
    group: GROUP,
    version: VERSION,
    namespace,
    plural: 'runs',
  })) as { items: Run[] };
  return list.items;
}

export async function listAttestationIds(namespace: string): Promise<string[]> {
  const list = (await customObjects().listNamespacedCustomObject({
    group: GROUP,
    version: VERSION,
    namespace,
    plural: 'attestations',
  })) as { items: { spec: { id: string } }[] };
  return list.items.map((i) => i.spec.id);
}

export const aibomReadyRun = (r: Run): boolean =>
  r.status?.conditions?.some(
    (c) => c.type === 'AIBOMReady' && c.status === 'True' && c.reason === 'AIBOMRecorded',
  ) === true;

/**
 * Everything the service acknowledged while the burst ran, polled: ids named by Run statuses,
 * Attestation resources (created only after their record committed), and the API's answers (every
 * record of the namespace, NDJSON). An id in here was acknowledged to someone outside the vault.
 */
export class Acknowledged {
  readonly ids = new Set<string>();
  readonly fromStatus = new Set<string>();
  readonly fromResources = new Set<string>();
  readonly fromApi = new Set<string>();
  /** Runs seen with AIBOMReady=True (by name). */
  readonly ready = new Set<string>();
  #stop = false;
  #loop: Promise<void> | undefined;
  readonly #namespace: string;
  readonly #apiUrl: string | undefined;

  constructor(namespace: string, apiUrl?: string) {
    this.#namespace = namespace;
    this.#apiUrl = apiUrl;
  }

  #add(set: Set<string>, id: string): void {
    set.add(id);
    this.ids.add(id);
  }

  async poll(): Promise<void> {
    const [runs, resources, api] = await Promise.allSettled([
      listRuns(this.#namespace),
      listAttestationIds(this.#namespace),
      this.#apiIds(),
    ]);
    if (runs.status === 'fulfilled') {
      for (const r of runs.value) {
        for (const id of claimOf(r).ids) this.#add(this.fromStatus, id);
        if (aibomReadyRun(r)) this.ready.add(r.metadata.name);
      }
    }
    if (resources.status === 'fulfilled') for (const id of resources.value) this.#add(this.fromResources, id);
    if (api.status === 'fulfilled') for (const id of api.value) this.#add(this.fromApi, id);
  }

  async #apiIds(): Promise<string[]> {
    if (this.#apiUrl === undefined) return [];
    const res = await fetch(`${this.#apiUrl}/v1/attestations/query`, {
      method: 'POST',
      headers: {
        authorization: `Bearer ${stack().kube.tokens.admin}`,
        'content-type': 'application/json',
        accept: 'application/x-ndjson',
      },
      body: JSON.stringify({ namespaces: [this.#namespace] }),
      signal: AbortSignal.timeout(20_000),
    });
    if (!res.ok) throw new Error(`query: HTTP ${res.status}`);
    const lines = (await res.text()).split('\n').filter((l) => l.startsWith('{'));
    // A complete stream only (its trailer last): a cut one proves nothing either way.
    const items = lines.map((l) => JSON.parse(l) as { id?: string; trailer?: unknown });
    return items.flatMap((i) => (typeof i.id === 'string' ? [i.id] : []));
  }

  start(intervalMs = 400): void {
    this.#loop = (async () => {
      while (!this.#stop) {
        await this.poll().catch(() => undefined);
        await sleep(intervalMs);
      }
    })();
  }

  async stop(): Promise<void> {
    this.#stop = true;
    await this.#loop;
    await this.poll();
  }
}

/** `AIBOM recorded` lines of a controller that stored an AIBOM (created), with their times. */
export async function aibomsRecorded(proc: ControllerProcess): Promise<LogLine[]> {
  return (await proc.logs()).filter((l) => l.msg === 'AIBOM recorded' && l.created === true);
}

/** Waits until `proc` has recorded at least `n` AIBOMs. */
export async function waitAiboms(proc: ControllerProcess, n: number): Promise<void> {
  await proc.waitForLog((l) => l.msg === 'AIBOM recorded' && l.created === true, `${n} AIBOMs`, {
    count: n,
    timeoutMs: 300_000,
  });
}

/** Starts `count` Runs named `<prefix>-<i>`, `concurrency` at a time, until done or `stop` says so. */
export function burst(
  namespace: string,
  prefix: string,
  count: number,
  concurrency = 6,
): { names: string[]; done: Promise<void>; started: () => number } {
  const names = Array.from({ length: count }, (_, i) => `${prefix}-${i}`);
  let next = 0;
  const worker = async (): Promise<void> => {
    while (next < names.length) {
      const name = names[next++]!;
      await finishRun(namespace, name);
    }
  };
  return {
    names,
    done: Promise.all(Array.from({ length: concurrency }, worker)).then(() => undefined),
    started: () => next,
  };
}

/** Ids of every record in the vault database at `url` (superuser). */
export async function vaultIds(url: string): Promise<Set<string>> {
  const c = new pg.Client({ connectionString: url });
  await c.connect();
  try {
    const { rows } = await c.query<{ id: string }>('SELECT id::text AS id FROM attestations');
    return new Set(rows.map((r) => r.id));
  } finally {
    await c.end();
  }
}

export interface LossRow {
  scope: string;
  run_id: string | null;
  missing_ids: string[];
  details: Record<string, unknown>;
}

export async function lossRows(url: string): Promise<LossRow[]> {
  const c = new pg.Client({ connectionString: url });
  await c.connect();
  try {
    const { rows } = await c.query<LossRow>(
      'SELECT scope, run_id::text AS run_id, missing_ids::text[] AS missing_ids, details FROM vault_losses ORDER BY detected_at',
    );
    return rows;
  } finally {
    await c.end();
  }
}

/** A primary and a standby (`mode`) behind the proxy, migrated, in their own temp dir. */
export async function replicatedVault(
  mode: StandbyMode,
): Promise<ReplicatedPostgres & { dispose(): Promise<void> }> {
  const root = await mkdtemp(join(tmpdir(), `aibom-vault-${mode}-`));
  let pair: ReplicatedPostgres;
  const procs: { name: string; pid: number; logFile: string }[] = [];
  try {
    pair = await startReplicatedPostgres(root, mode, { onSpawn: (p) => procs.push(p) });
    await migrate(pair.ownerUrl);
  } catch (err) {
    await stopAll(procs);
    await rm(root, { recursive: true, force: true });
    throw err;
  }
  return {
    ...pair,
    async dispose() {
      await stopAll(pair.procs);
      if (process.env.KEEP_LOGS) console.log(`[failover] PostgreSQL logs kept in ${root}`);
      else await rm(root, { recursive: true, force: true });
    },
  };
}

/** One row of the result table (docs/failover.md). */
export interface FaultRow {
  readonly fault: string;
  readonly inFlight: number;
  readonly acknowledged: number;
  readonly lost: number;
  readonly duplicated: number;
  readonly dangling: string;
  readonly rto: string;
}

export function printRow(r: FaultRow): void {
  console.log(
    `[failover] | ${r.fault} | ${r.inFlight} | ${r.acknowledged} | ${r.lost} | ${r.duplicated} | ${r.dangling} | ${r.rto} |`,
  );
}

/** What a failover burst left, for the assertions of each mode. */
export interface FailoverOutcome {
  readonly namespace: string;
  readonly pair: Awaited<ReturnType<typeof replicatedVault>>;
  readonly controller: ControllerProcess;
  readonly sidecar: ControllerProcess;
  readonly apiUrl: string;
  readonly pki: DevPki;
  readonly ack: Acknowledged;
  /** Ids acknowledged before the primary was killed. */
  readonly ackedBeforeKill: ReadonlySet<string>;
  readonly runs: Run[];
  readonly inFlight: number;
  readonly killedAt: number;
  readonly report: FailoverReport;
  /** Milliseconds from the kill to the first AIBOM recorded on the promoted server. */
  readonly rtoMs: number;
  readonly env: Record<string, string>;
  readonly opts: Omit<ControllerOptions, 'name'>;
}

/**
 * The burst of a failover test: a replicated vault (`mode`), the controller and the API as real
 * processes on it, `count` Runs finished by a pipeline, the primary killed once `killAfter` AIBOMs
 * are recorded (after holding the replication link for `holdFor` more AIBOMs, when given: an
 * asynchronous standby then really misses them), the standby promoted and the address moved
 * (hack/stack/standby.ts failover(), what `npm run stack -- failover` does), the burst finished and
 * every Run awaited to AIBOMReady.
 */
export async function failoverBurst(o: {
  mode: StandbyMode;
  prefix: string;
  count: number;
  killAfter: number;
  holdFor?: number;
  /** Right before the kill (while the link is still held): e.g. ask for a checkpoint. */
  beforeKill?: (apiUrl: string) => Promise<void>;
  logDir: string;
  disposers: (() => Promise<void>)[];
}): Promise<FailoverOutcome> {
  const pair = await replicatedVault(o.mode);
  o.disposers.push(() => pair.dispose());
  const t = await testEnv(o.prefix, null, o.logDir);
  const env = {
    DATABASE_MIGRATION_URL: pair.ownerUrl,
    // A checkpoint every second: some are signed over records the standby may lack.
    VAULT_CHECKPOINT_INTERVAL_SECONDS: '1',
    PG_CONNECT_TIMEOUT_MS: '3000',
    PG_QUERY_TIMEOUT_MS: '5000',
  };
  const opts = t.opts(pair.runtimeUrl);
  const controller = await startControllerProcess({ ...opts, name: `${t.lease}-ctl`, env });
  const sidecar = await startControllerProcess({ ...opts, name: `${t.lease}-api`, bin: 'sidecar', env });
  await controller.waitLeading();
  const apiUrl = await sidecar.apiUrl();
  const ack = new Acknowledged(t.namespace, apiUrl);
  ack.start();
  const b = burst(t.namespace, 'r', o.count);
  await waitAiboms(controller, o.killAfter);
  if (o.holdFor !== undefined) {
    await holdReplication(pair.replication, true);
    await waitAiboms(controller, o.killAfter + o.holdFor);
    // What the service acknowledged meanwhile is on the primary only.
    await ack.poll();
  }
  await o.beforeKill?.(apiUrl);
  await ack.poll();
  const before = await listRuns(t.namespace);
  const inFlight = b.started() - before.filter(aibomReadyRun).length;
  const ackedBeforeKill = new Set(ack.ids);
  const killedAt = Date.now();
  const report = await failover(pair.replication);
  console.log(
    `[failover] ${o.mode}: primary killed ${report.killedMs} ms, standby promoted ${report.promotedMs} ms, ` +
      `address moved ${report.movedMs} ms after the start (${before.length} Runs created, ${inFlight} in flight)`,
  );
  await b.done;
  // Settled: every Run AIBOMReady and every record its status names held by the promoted vault. A
  // Run whose records were lost still shows its old AIBOMReady status until the controller's sweep
  // records it again (one status write carries the new ids and RecordsLost): a snapshot taken
  // before that would judge the Run on a status the controller has not rewritten yet.
  const runs = await poll(
    async () => {
      const all = await listRuns(t.namespace);
      if (all.length !== o.count || !all.every(aibomReadyRun)) return undefined;
      const held = await vaultIds(pair.url);
      return all.every((r) => claimOf(r).ids.every((id) => held.has(id))) ? all : undefined;
    },
    `all ${o.count} Runs AIBOMReady, with every record their status names in the vault, after the failover`,
    { timeoutMs: 600_000, intervalMs: 1000 },
  );
  await ack.stop();
  const after = (await aibomsRecorded(controller)).filter(
    (l) => Date.parse(l.time) >= killedAt + report.killedMs,
  );
  const first = after.map((l) => Date.parse(l.time)).sort((a, b) => a - b)[0];
  return {
    namespace: t.namespace,
    pair,
    controller,
    sidecar,
    apiUrl,
    pki: t.pki,
    ack,
    ackedBeforeKill,
    runs,
    inFlight,
    killedAt,
    report,
    rtoMs: first === undefined ? Number.NaN : first - killedAt,
    env,
    opts,
  };
}
