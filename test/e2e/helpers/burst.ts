import { CoreV1Api, CustomObjectsApi, type KubeConfig } from '@kubernetes/client-node';
import { GROUP, VERSION, type Run } from '../../../src/crd/run.ts';
import { burstSpec, createRun, drive, pool, retrying, statusSequence, type DrivenRun } from './pipeline.ts';
import { aibomCount, evidenceOf, type RunEvidence } from './vault.ts';

export interface Burst {
  readonly namespace: string;
  readonly label: string;
  readonly runs: DrivenRun[];
  /** Resolves when every Run of the burst was driven to its terminal phase. */
  readonly driven: Promise<void>;
  /** Runs whose terminal phase the API server has acknowledged so far. */
  terminal(): number;
}

/**
 * `n` Runs (burstSpec: a tool step, a model step, a tool step), every `failEvery`-th ending Failed,
 * created and driven by `concurrency` pipelines at once in a namespace of their own.
 */
export async function startBurst(
  kc: KubeConfig,
  namespace: string,
  opts: { n: number; failEvery: number; concurrency: number },
): Promise<Burst> {
  await retrying(() =>
    kc.makeApiClient(CoreV1Api).createNamespace({ body: { metadata: { name: namespace } } }),
  );
  const label = namespace;
  const runs: DrivenRun[] = [];
  let terminal = 0;
  const indices = Array.from({ length: opts.n }, (_, i) => i);
  const driven = pool(indices, opts.concurrency, async (i) => {
    const name = `run-${String(i).padStart(4, '0')}`;
    const spec = burstSpec(i);
    const fail = i % opts.failEvery === opts.failEvery - 1;
    const uid = await createRun(kc, namespace, name, spec, { 'e2e-burst': label });
    const run: DrivenRun = { name, uid, fail };
    runs.push(run);
    await drive(kc, namespace, name, statusSequence(spec, fail));
    run.terminalAt = Date.now();
    terminal++;
  });
  return { namespace, label, runs, driven, terminal: () => terminal };
}

/** Resolves once `pred()` is true; polls every `intervalMs`; rejects after `timeoutMs`. */
export async function until(
  pred: () => boolean | Promise<boolean>,
  timeoutMs: number,
  what: string,
  intervalMs = 200,
): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!(await pred())) {
    if (Date.now() > deadline) throw new Error(`timed out after ${timeoutMs / 1000} s waiting for ${what}`);
    await new Promise((r) => setTimeout(r, intervalMs));
  }
}

export interface BurstOutcome {
  readonly evidence: Map<string, RunEvidence>;
  /** Runs whose status does not say AIBOMReady=True with the AIBOM's digest. */
  readonly stuck: string[];
  readonly lost: number;
  readonly duplicated: number;
  readonly aiboms: number;
  /** The newest AIBOM of the burst (PostgreSQL's clock, the same machine's). */
  readonly lastAibomAt: number;
  /** Records each run should have, and runs that have other counts (with what they have). */
  readonly wrongRecordSets: string[];
}

/**
 * Waits until every Run of the burst has its AIBOM in the vault and its status says so, as long
 * as that makes progress: once `standstillMs` pass without a new AIBOM (or a new Run status
 * reporting one), the Runs still without one are counted `lost` (and `stuck`), for the caller to
 * assert on. Never throws for a missing AIBOM.
 */
export async function settle(
  kc: KubeConfig,
  superuser: string,
  burst: Burst,
  standstillMs: number,
): Promise<BurstOutcome> {
  const ids = burst.runs.map((r) => r.uid);
  let seen = -1;
  let deadline = Date.now() + standstillMs;
  for (;;) {
    const n = await aibomCount(superuser, ids);
    if (n >= ids.length || Date.now() > deadline) break;
    if (n > seen) [seen, deadline] = [n, Date.now() + standstillMs];
    await new Promise((r) => setTimeout(r, 500));
  }
  const api = kc.makeApiClient(CustomObjectsApi);
  const ready = (r: Run): boolean =>
    r.status?.conditions?.some((c) => c.type === 'AIBOMReady' && c.status === 'True') === true &&
    typeof (r.status?.artifacts?.aibom as { digest?: string } | undefined)?.digest === 'string';
  let stuck: string[] | undefined;
  deadline = Date.now() + standstillMs;
  for (;;) {
    const list = (await retrying(() =>
      api.listNamespacedCustomObject({
        group: GROUP,
        version: VERSION,
        namespace: burst.namespace,
        plural: 'runs',
        labelSelector: `e2e-burst=${burst.label}`,
      }),
    )) as { items: Run[] };
    const now = list.items
      .filter((r) => !ready(r))
      .map((r) => `${r.metadata.name} (${r.status?.phase ?? 'no phase'})`);
    if (stuck !== undefined && now.length < stuck.length) deadline = Date.now() + standstillMs;
    stuck = now;
    if (stuck.length === 0 || Date.now() > deadline) break;
    await new Promise((r) => setTimeout(r, 500));
  }
  const evidence = await evidenceOf(superuser, ids);
  let lost = 0;
  let duplicated = 0;
  let aiboms = 0;
  let lastAibomAt = 0;
  const wrongRecordSets: string[] = [];
  for (const run of burst.runs) {
    const e = evidence.get(run.uid);
    if (!e || e.artifacts === 0 || e.aiboms === 0) {
      lost++;
      continue;
    }
    aiboms += e.aiboms;
    if (e.aiboms > 1 || e.artifacts > 1 || e.unclaimed > 0 || e.claimedTwice > 0) duplicated++;
    if (e.aibomAt) lastAibomAt = Math.max(lastAibomAt, e.aibomAt.getTime());
    // burstSpec: 3 finished steps (one claim each), `run:` and `aibom:`.
    if (e.stepClaims !== 3 || e.terminalClaims !== 2 || e.unclaimed !== 0 || e.claimedTwice !== 0) {
      wrongRecordSets.push(`${run.name}: ${JSON.stringify(e)}`);
    }
  }
  return { evidence, stuck, lost, duplicated, aiboms, lastAibomAt, wrongRecordSets };
}
