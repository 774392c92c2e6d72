import { createHash } from 'node:crypto';
import { CustomObjectsApi, PatchStrategy, setHeaderOptions, type KubeConfig } from '@kubernetes/client-node';
import { GROUP, VERSION, type Run, type RunSpec, type StepStatus } from '../../../src/crd/run.ts';
import { canonicalJson } from '../../../src/attest/index.ts';
import { PIPELINE_FIELD_MANAGER } from '../../../hack/sample-pipeline.ts';

/**
 * The pipelines of the e2e bursts: each Run is created, then moved through its steps by
 * server-side apply under the sample pipeline's field manager, as hack/sample-pipeline.ts does,
 * except that every status document is fixed before the first write (timestamps included), so a
 * write that failed (the API server restarting, etcd gone) is retried with the same bytes: a
 * finished step is immutable, and a retried apply of the same document is a no-op.
 */

/** A Run of both step kinds: a tool step, a model step that depends on it, and a second tool step. */
export function burstSpec(i: number): RunSpec {
  return {
    policyPack: { name: 'baseline', version: '1.2.0', guardrails: ['pii-redaction'] },
    inputs: { ticket: `E2E-${i}` },
    steps: [
      {
        id: 'retrieve',
        tool: { name: 'vector-search', command: ['vector-search', '--top-k', '5'] },
        capabilities: [
          {
            scope: 'kb:read',
            grantedBy: 'team:support-platform',
            approvedBy: 'user:alice',
            delegatedFrom: [{ scope: 'kb', grantedBy: 'org:acme-it', approvedBy: 'user:ciso' }],
          },
        ],
      },
      {
        id: 'summarise',
        dependsOn: ['retrieve'],
        model: { name: 'claude-sonnet', provider: 'anthropic', version: '2025-05-14', temperature: 0.2 },
        inputs: { prompt: `Summarise ticket E2E-${i}` },
        capabilities: [{ scope: 'model:invoke', grantedBy: 'team:support-platform' }],
      },
      {
        id: 'post',
        dependsOn: ['summarise'],
        tool: { name: 'ticket-commenter' },
        policyPack: { name: 'egress', version: '0.3.0' },
        capabilities: [{ scope: 'tickets:comment', grantedBy: 'team:support-platform' }],
      },
    ],
  };
}

/**
 * The largest Run admission allows in steps and capabilities (128 steps, 256 capabilities: 646
 * records, docs/runs.md), each step with an input and an output of a few KiB, so that recording it and building
 * its AIBOM is the largest piece of work one Run gives the controller.
 */
export function hugeSpec(): RunSpec {
  const filler = (i: number, n: number): string =>
    createHash('sha256').update(`${i}`).digest('hex').repeat(n);
  return {
    policyPack: { name: 'baseline', version: '1.2.0' },
    inputs: { corpus: filler(0, 64) },
    steps: Array.from({ length: 128 }, (_, i) => ({
      id: `s${i}`,
      ...(i > 0 ? { dependsOn: [`s${i - 1}`] } : {}),
      policyPack: { name: `pack-${i}`, version: '1' },
      ...(i % 2 === 0
        ? { tool: { name: `tool-${i}`, command: ['run', String(i)] } }
        : { model: { name: `model-${i}`, provider: 'e2e', version: '1' } }),
      inputs: { text: filler(i, 24) },
      capabilities: [0, 1].map((c) => ({
        scope: `scope:${i}:${c}`,
        grantedBy: 'team:x',
        approvedBy: 'user:y',
      })),
    })),
  };
}

/** The status documents of one Run, in order; `fail` ends it Failed at its last step. */
export function statusSequence(spec: RunSpec, fail: boolean): { phase: string; steps: StepStatus[] }[] {
  const docs: { phase: string; steps: StepStatus[] }[] = [];
  const steps: StepStatus[] = [];
  const t0 = Date.now();
  spec.steps.forEach((s, i) => {
    const startedAt = new Date(t0 + 2 * i).toISOString();
    const finishedAt = new Date(t0 + 2 * i + 1).toISOString();
    steps.push({ id: s.id, phase: 'Running', startedAt });
    docs.push({ phase: 'Running', steps: [...steps] });
    const last = i === spec.steps.length - 1;
    if (fail && last) {
      steps[i] = { id: s.id, phase: 'Failed', startedAt, finishedAt, error: `step ${s.id} failed (e2e)` };
    } else {
      const output = { result: `output of ${s.id}`, at: finishedAt };
      const outputDigest = `sha256:${createHash('sha256').update(canonicalJson(output)).digest('hex')}`;
      steps[i] = { id: s.id, phase: 'Succeeded', startedAt, finishedAt, output, outputDigest };
    }
    if (!last) docs.push({ phase: 'Running', steps: [...steps] });
  });
  docs.push({ phase: fail ? 'Failed' : 'Succeeded', steps: [...steps] });
  return docs;
}

const code = (err: unknown): number | undefined => (err as { code?: number }).code;

/**
 * Retries `fn` while the cluster is briefly away (connection errors, 5xx, 429, timeouts) for up
 * to `budgetMs`; any other answer (a 4xx: the request itself is wrong) is thrown at once.
 */
export async function retrying<T>(fn: () => Promise<T>, budgetMs = 180_000): Promise<T> {
  const deadline = Date.now() + budgetMs;
  for (let attempt = 0; ; attempt++) {
    try {
      return await fn();
    } catch (err) {
      const c = code(err);
      const transient = c === undefined || c >= 500 || c === 429 || c === 0;
      if (!transient || Date.now() > deadline) throw err;
      await new Promise((r) => setTimeout(r, Math.min(2000, 100 * 2 ** Math.min(attempt, 5))));
    }
  }
}

export interface DrivenRun {
  readonly name: string;
  readonly uid: string;
  readonly fail: boolean;
  /** When the terminal apply was acknowledged (ms since the epoch). */
  terminalAt?: number;
}

/** Creates a Run (or finds the one an earlier, unanswered create made) and returns its uid. */
export async function createRun(
  kc: KubeConfig,
  namespace: string,
  name: string,
  spec: RunSpec,
  labels: Record<string, string>,
): Promise<string> {
  const api = kc.makeApiClient(CustomObjectsApi);
  const ref = { group: GROUP, version: VERSION, namespace, plural: 'runs' };
  return retrying(async () => {
    try {
      const r = (await api.createNamespacedCustomObject({
        ...ref,
        body: { apiVersion: `${GROUP}/${VERSION}`, kind: 'Run', metadata: { name, namespace, labels }, spec },
      })) as Run;
      return r.metadata.uid;
    } catch (err) {
      // A create whose answer was lost to a restart may have been stored: 409 AlreadyExists.
      if (code(err) !== 409) throw err;
      return ((await api.getNamespacedCustomObject({ ...ref, name })) as Run).metadata.uid;
    }
  });
}

/** Applies each status document in order, as the pipeline's field manager. */
export async function drive(
  kc: KubeConfig,
  namespace: string,
  name: string,
  docs: readonly { phase: string; steps: StepStatus[] }[],
): Promise<void> {
  const api = kc.makeApiClient(CustomObjectsApi);
  const apply = setHeaderOptions('Content-Type', PatchStrategy.ServerSideApply);
  for (const d of docs) {
    await retrying(() =>
      api.patchNamespacedCustomObjectStatus(
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
            status: d,
          },
          fieldManager: PIPELINE_FIELD_MANAGER,
          force: false,
        },
        apply,
      ),
    );
  }
}

/** Runs `fn` over `items` with at most `limit` at a time; rejects with the first failure. */
export async function pool<T>(
  items: readonly T[],
  limit: number,
  fn: (item: T) => Promise<void>,
): Promise<void> {
  let next = 0;
  let failed: Error | undefined;
  const worker = async (): Promise<void> => {
    while (failed === undefined && next < items.length) {
      const item = items[next++]!;
      try {
        await fn(item);
      } catch (err) {
        failed ??= err instanceof Error ? err : new Error(String(err));
      }
    }
  };
  await Promise.all(Array.from({ length: Math.min(limit, items.length) }, worker));
  if (failed !== undefined) throw failed;
}
