#!/usr/bin/env node
/**
 * The sample pipeline: a development tool that plays the part of a pipeline and moves a Run through
 * its steps to a terminal phase, the way a real one would — server-side apply of `status.phase` and
 * `status.steps` under the pipeline's own field manager (so the controller's fields are never
 * touched), one step at a time in dependency order. Not part of the product: it talks to the
 * Kubernetes API only, through @kubernetes/client-node, and knows nothing of the controller.
 *
 *   sample-pipeline [NAMESPACE/]NAME [-n NAMESPACE] [--fail STEP] [--step-delay MS] [--wait]
 *                   [--timeout SECONDS] [--context CTX]
 *
 * The pipeline's job ends at the terminal phase; the controller builds the AIBOM after it. With
 * `--wait` the tool also waits for that (the Run's AIBOMReady condition) and prints where the
 * AIBOM is, or why it is not there when `--timeout` runs out (exit 1).
 *
 * On the local stack (`source .stack/env`) it is on PATH as `sample-pipeline`; elsewhere
 * `npm run sample-pipeline -- ...` or `node hack/sample-pipeline.ts ...` (Node 24). KUBECONFIG
 * selects the cluster (else ~/.kube/config or the in-cluster service account).
 */
import { createHash } from 'node:crypto';
import { realpathSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import { CustomObjectsApi, KubeConfig, PatchStrategy, setHeaderOptions } from '@kubernetes/client-node';
import { GROUP, isTerminal, VERSION, type Run, type StepStatus } from '../src/crd/run.ts';
import { canonicalJson } from '../src/attest/index.ts';

/** The pipeline's own SSA field manager: it owns status.phase and status.steps, nothing else. */
export const PIPELINE_FIELD_MANAGER = 'aibom-vault-sample-pipeline';

/** A failure to print as one line on stderr; exit code 2 for usage errors, 1 otherwise. */
export class PipelineUsageError extends Error {
  readonly exitCode: number;
  constructor(message: string, exitCode = 1) {
    super(message);
    this.exitCode = exitCode;
  }
}

/** Steps in dependency order (Kahn); a cycle or an unknown dependency is a usage error. */
export function topoOrder(run: Run): string[] {
  const ids = new Set(run.spec.steps.map((s) => s.id));
  const pending = new Map(run.spec.steps.map((s) => [s.id, new Set(s.dependsOn ?? [])]));
  for (const [id, deps] of pending) {
    for (const d of deps)
      if (!ids.has(d)) throw new PipelineUsageError(`step ${id} depends on unknown step ${d}`, 2);
  }
  const order: string[] = [];
  while (pending.size > 0) {
    const ready = [...pending]
      .filter(([, deps]) => [...deps].every((d) => order.includes(d)))
      .map(([id]) => id);
    if (ready.length === 0)
      throw new PipelineUsageError(`steps form a cycle: ${[...pending.keys()].join(', ')}`, 2);
    for (const id of ready) {
      order.push(id);
      pending.delete(id);
    }
  }
  return order;
}

const statusCode = (err: unknown): number | undefined => (err as { code?: number }).code;

/**
 * Drives a Run through its steps to a terminal phase, one step at a time in dependency order.
 * Resolves to the phase it ended in.
 */
export async function driveRun(
  kc: KubeConfig,
  namespace: string,
  name: string,
  opts: { fail?: string; stepDelayMs?: number; log?: (line: string) => void } = {},
): Promise<'Succeeded' | 'Failed'> {
  const api = kc.makeApiClient(CustomObjectsApi);
  const ref = { group: GROUP, version: VERSION, namespace, plural: 'runs', name };
  let run: Run;
  try {
    run = (await api.getNamespacedCustomObject(ref)) as Run;
  } catch (err) {
    if (statusCode(err) === 404) throw new PipelineUsageError(`run ${namespace}/${name} not found`);
    throw err;
  }
  // A finished run is finished: its phase and results cannot change (the API server refuses it
  // too), so say so before writing anything.
  if (isTerminal(run.status?.phase)) {
    throw new PipelineUsageError(
      `run ${namespace}/${name} is already ${run.status.phase}: a finished run cannot be driven again`,
    );
  }
  if (opts.fail !== undefined && !run.spec.steps.some((s) => s.id === opts.fail)) {
    throw new PipelineUsageError(`--fail: run has no step ${opts.fail}`, 2);
  }
  const apply = setHeaderOptions('Content-Type', PatchStrategy.ServerSideApply);
  const setStatus = async (phase: string, steps: StepStatus[]): Promise<void> => {
    await api.patchNamespacedCustomObjectStatus(
      {
        ...ref,
        body: {
          apiVersion: `${GROUP}/${VERSION}`,
          kind: 'Run',
          metadata: { name, namespace },
          status: { phase, steps },
        },
        fieldManager: PIPELINE_FIELD_MANAGER,
        force: false,
      },
      apply,
    );
  };
  const log = opts.log ?? (() => undefined);
  const steps: StepStatus[] = [];
  for (const id of topoOrder(run)) {
    const startedAt = new Date().toISOString();
    steps.push({ id, phase: 'Running', startedAt });
    await setStatus('Running', steps);
    if (opts.stepDelayMs) await new Promise((r) => setTimeout(r, opts.stepDelayMs));
    const finishedAt = new Date().toISOString();
    if (id === opts.fail) {
      steps[steps.length - 1] = {
        id,
        phase: 'Failed',
        startedAt,
        finishedAt,
        error: `step ${id} failed (simulated)`,
      };
      await setStatus('Failed', steps);
      log(`${id}: Failed → run Failed`);
      return 'Failed';
    }
    const output = { result: `output of ${id}`, at: finishedAt };
    const outputDigest = `sha256:${createHash('sha256').update(canonicalJson(output)).digest('hex')}`;
    steps[steps.length - 1] = { id, phase: 'Succeeded', startedAt, finishedAt, output, outputDigest };
    await setStatus('Running', steps);
    log(`${id}: Succeeded`);
  }
  await setStatus('Succeeded', steps);
  log('run Succeeded');
  return 'Succeeded';
}

/** What `--wait` reports: the AIBOM the controller stored for the Run. */
export interface AibomShown {
  readonly digest: string;
  readonly location: string;
}

/**
 * Waits until the Run's AIBOMReady condition is True (the controller built, signed and stored its
 * AIBOM) and returns where it is. Rejects after `timeoutMs` with the condition's reason and message
 * (e.g. `VaultUnavailable: the vault (PostgreSQL) is unavailable: ...`).
 */
export async function waitForAibom(
  kc: KubeConfig,
  namespace: string,
  name: string,
  opts: { timeoutMs?: number; intervalMs?: number } = {},
): Promise<AibomShown> {
  const api = kc.makeApiClient(CustomObjectsApi);
  const deadline = Date.now() + (opts.timeoutMs ?? 120_000);
  for (;;) {
    const run = (await api.getNamespacedCustomObject({
      group: GROUP,
      version: VERSION,
      namespace,
      plural: 'runs',
      name,
    })) as Run;
    const ready = run.status?.conditions?.find((c) => c.type === 'AIBOMReady');
    const aibom = run.status?.artifacts?.aibom as
      { digest?: string; bucket?: string; key?: string } | undefined;
    if (ready?.status === 'True' && aibom?.digest !== undefined) {
      return { digest: aibom.digest, location: `s3://${aibom.bucket ?? ''}/${aibom.key ?? ''}` };
    }
    if (Date.now() > deadline) {
      const why = ready ? `${ready.reason}: ${ready.message}` : 'the controller has not reported on it';
      throw new PipelineUsageError(`run ${namespace}/${name}: no AIBOM yet (${why})`);
    }
    await new Promise((r) => setTimeout(r, opts.intervalMs ?? 500));
  }
}

const USAGE =
  'usage: sample-pipeline [NAMESPACE/]NAME [-n NAMESPACE] [--fail STEP] [--step-delay MS] [--wait] [--timeout SECONDS] [--context CTX]';

/** The command line; resolves to the exit code (errors are one line on stderr). */
export async function main(argv: readonly string[]): Promise<number> {
  try {
    const { values, positionals } = parseArgs({
      args: [...argv],
      allowPositionals: true,
      options: {
        namespace: { type: 'string', short: 'n', default: 'default' },
        fail: { type: 'string' },
        'step-delay': { type: 'string', default: '200' },
        wait: { type: 'boolean', default: false },
        timeout: { type: 'string', default: '120' },
        context: { type: 'string' },
        help: { type: 'boolean', short: 'h' },
      },
    });
    if (values.help) {
      process.stdout.write(`${USAGE}\n`);
      return 0;
    }
    const target = positionals[0];
    if (!target || positionals.length > 1) throw new PipelineUsageError(USAGE, 2);
    const [namespace, name] = target.includes('/')
      ? (target.split('/', 2) as [string, string])
      : [values.namespace, target];
    const delay = Number(values['step-delay']);
    if (!Number.isFinite(delay) || delay < 0)
      throw new PipelineUsageError('--step-delay takes milliseconds', 2);
    const timeout = Number(values.timeout);
    if (!Number.isFinite(timeout) || timeout <= 0) throw new PipelineUsageError('--timeout takes seconds', 2);
    const kc = new KubeConfig();
    kc.loadFromDefault();
    if (values.context !== undefined) kc.setCurrentContext(values.context);
    const phase = await driveRun(kc, namespace, name, {
      ...(values.fail !== undefined ? { fail: values.fail } : {}),
      stepDelayMs: delay,
      log: (l) => process.stdout.write(`${l}\n`),
    });
    if (values.wait) {
      const aibom = await waitForAibom(kc, namespace, name, { timeoutMs: timeout * 1000 });
      process.stdout.write(`AIBOM ready: ${aibom.digest} at ${aibom.location}\n`);
    }
    return phase === 'Succeeded' || values.fail !== undefined ? 0 : 1;
  } catch (err) {
    const code = (err as { code?: unknown }).code;
    const usage =
      err instanceof PipelineUsageError
        ? err.exitCode
        : typeof code === 'string' && code.startsWith('ERR_PARSE_ARGS')
          ? 2
          : 1;
    console.error(`sample-pipeline: ${(err as Error).message.split('\n').join('; ')}`);
    return usage;
  }
}

// Run as a program (not when imported by tests and benchmarks).
if (process.argv[1] !== undefined && realpathSync(process.argv[1]) === fileURLToPath(import.meta.url)) {
  process.exitCode = await main(process.argv.slice(2));
}
