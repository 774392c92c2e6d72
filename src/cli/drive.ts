import { createHash } from 'node:crypto';
import { parseArgs } from 'node:util';
import { KubeConfig } from '@kubernetes/client-node';
import type { Run, StepStatus } from '../api/run.ts';
import { canonicalJson } from '../attest/index.ts';
import { loadConfig } from '../config/index.ts';
import { RUN_TYPE } from '../controller/run/kube-api.ts';
import {
  applyStatus,
  isNotFound,
  kubeClient,
  resourcePath,
  type KubeClient,
} from '../controller/runtime/index.ts';
import { CliError, type Command } from './command.ts';

/** The pipeline's own SSA field manager: it owns status.phase and status.steps, nothing else. */
export const PIPELINE_FIELD_MANAGER = 'aibom-vault-sample-pipeline';

/** Steps in dependency order (Kahn); a cycle or an unknown dependency is a usage error. */
export function topoOrder(run: Run): string[] {
  const ids = new Set(run.spec.steps.map((s) => s.id));
  const pending = new Map(run.spec.steps.map((s) => [s.id, new Set(s.dependsOn ?? [])]));
  for (const [id, deps] of pending) {
    for (const d of deps) if (!ids.has(d)) throw new CliError(`step ${id} depends on unknown step ${d}`, 2);
  }
  const order: string[] = [];
  while (pending.size > 0) {
    const ready = [...pending]
      .filter(([, deps]) => [...deps].every((d) => order.includes(d)))
      .map(([id]) => id);
    if (ready.length === 0) throw new CliError(`steps form a cycle: ${[...pending.keys()].join(', ')}`, 2);
    for (const id of ready) {
      order.push(id);
      pending.delete(id);
    }
  }
  return order;
}

async function setStatus(client: KubeClient, run: Run, phase: string, steps: StepStatus[]): Promise<void> {
  await applyStatus(
    client,
    RUN_TYPE,
    { namespace: run.metadata.namespace, name: run.metadata.name },
    { phase, steps },
    { fieldManager: PIPELINE_FIELD_MANAGER, force: false },
  );
}

/**
 * Drives a Run through its steps to a terminal phase the way a pipeline would: server-side apply of
 * status.phase and status.steps under the pipeline's own field manager (so the controller's fields
 * are never touched), one step at a time in dependency order.
 */
export async function driveRun(
  client: KubeClient,
  namespace: string,
  name: string,
  opts: { fail?: string; stepDelayMs?: number; log?: (line: string) => void } = {},
): Promise<'Succeeded' | 'Failed'> {
  let run: Run;
  try {
    run = await client.request<Run>({ method: 'GET', path: resourcePath(RUN_TYPE, { namespace, name }) });
  } catch (err) {
    if (isNotFound(err)) throw new CliError(`run ${namespace}/${name} not found`);
    throw err;
  }
  if (opts.fail !== undefined && !run.spec.steps.some((s) => s.id === opts.fail)) {
    throw new CliError(`--fail: run has no step ${opts.fail}`, 2);
  }
  const log = opts.log ?? (() => undefined);
  const steps: StepStatus[] = [];
  for (const id of topoOrder(run)) {
    const startedAt = new Date().toISOString();
    steps.push({ id, phase: 'Running', startedAt });
    await setStatus(client, run, 'Running', steps);
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
      await setStatus(client, run, 'Failed', steps);
      log(`${id}: Failed → run Failed`);
      return 'Failed';
    }
    const output = { result: `output of ${id}`, at: finishedAt };
    const outputDigest = `sha256:${createHash('sha256').update(canonicalJson(output)).digest('hex')}`;
    steps[steps.length - 1] = { id, phase: 'Succeeded', startedAt, finishedAt, output, outputDigest };
    await setStatus(client, run, 'Running', steps);
    log(`${id}: Succeeded`);
  }
  await setStatus(client, run, 'Succeeded', steps);
  log('run Succeeded');
  return 'Succeeded';
}

export const driveCommand: Command = {
  path: ['run', 'drive'],
  summary: 'act as a pipeline: move a Run through its steps to Succeeded (or Failed with --fail STEP)',
  async run(args) {
    const { values, positionals } = parseArgs({
      args: [...args],
      allowPositionals: true,
      options: {
        namespace: { type: 'string', short: 'n', default: 'default' },
        fail: { type: 'string' },
        'step-delay': { type: 'string', default: '200' },
      },
    });
    const target = positionals[0];
    if (!target) throw new CliError('usage: service-ctl run drive [NAMESPACE/]NAME [--fail STEP]', 2);
    const [namespace, name] = target.includes('/')
      ? (target.split('/', 2) as [string, string])
      : [values.namespace, target];
    const config = loadConfig('cli');
    const kc = new KubeConfig();
    if (config.KUBECONFIG !== undefined) kc.loadFromFile(config.KUBECONFIG);
    else kc.loadFromDefault();
    const delay = Number(values['step-delay']);
    if (!Number.isFinite(delay) || delay < 0) throw new CliError('--step-delay takes milliseconds', 2);
    const phase = await driveRun(kubeClient(kc), namespace, name, {
      ...(values.fail !== undefined ? { fail: values.fail } : {}),
      stepDelayMs: delay,
      log: (l) => process.stdout.write(`${l}\n`),
    });
    return phase === 'Succeeded' || values.fail !== undefined ? 0 : 1;
  },
};
