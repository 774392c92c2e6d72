/**
 * Every logger the controller and the sidecar create writes each key once per line (issue 22 item
 * 18: the checkpointer's lines carried `component` twice). Not a sample of lines: the processes'
 * own wiring (src/bin/controller-process.ts, src/bin/sidecar-process.ts, what the entry points
 * run) runs in-process on the real stack with every loop on (transparency writer and worker,
 * projection, checkpointer every second, record stamper against the stack's TSA, customer-signer
 * watch, ops servers, the API), each root logger recording every child created from it, at any
 * depth (Fastify's request loggers too). A Run is driven to its AIBOM, the API is called, then both
 * stop; every line they wrote is checked on the raw text, and every logger they created writes one
 * more line naming its own bindings again (the way a call can collide with them).
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { driveRun } from '../../hack/sample-pipeline.ts';
import { startControllerProcess } from '../../src/bin/controller-process.ts';
import type { Stop } from '../../src/bin/lifecycle.ts';
import { startSidecarProcess } from '../../src/bin/sidecar-process.ts';
import { loadConfig } from '../../src/config/index.ts';
import type { Run } from '../../src/crd/run.ts';
import { createLogger, type Logger } from '../../src/log/index.ts';
import { createRun, getRun, poll, sampleRunSpec } from '../helpers/controller-process.ts';
import { duplicateKeys } from '../helpers/json-keys.ts';
import { createNamespace } from '../helpers/rbac.ts';
import { freshDatabaseLogins, kubeConfig, stack, uniqueName } from '../helpers/stack.ts';

const ns = uniqueName('logs');

/** A root logger as createLogger makes it, writing into `lines`, recording every descendant. */
function recordingRoot(name: string): { root: Logger; lines: string[]; loggers: Logger[] } {
  const lines: string[] = [];
  const root = createLogger(name, 'debug', { write: (s: string) => void lines.push(s.trimEnd()) });
  const loggers: Logger[] = [root];
  type ChildFn = (this: Logger, bindings: Record<string, unknown>) => Logger;
  const original = (Object.getPrototypeOf(root) as { child: unknown }).child as ChildFn;
  // Children are Object.create(parent): every descendant finds this wrapper through its chain.
  const recording: ChildFn = function (this: Logger, ...args) {
    const c = original.apply(this, args);
    loggers.push(c);
    return c;
  };
  Object.defineProperty(root, 'child', { value: recording });
  return { root, lines, loggers };
}

const controller = recordingRoot('controller');
const sidecar = recordingRoot('sidecar');
const stops: Stop[] = [];
let apiUrl: string;
let runId: string;

beforeAll(async () => {
  const db = await freshDatabaseLogins('logs', { migrated: false });
  await createNamespace(ns);
  const s = stack();
  const common = {
    ...s.settings,
    ...s.env,
    DATABASE_URL: db.runtime,
    DATABASE_MIGRATION_URL: db.owner,
    POD_NAMESPACE: 'aibom-vault-system',
    LOG_LEVEL: 'debug',
    SERVICE_TRANSPARENCY_WRITER: '1',
    VAULT_CHECKPOINT_INTERVAL_SECONDS: '1',
    METRICS_HOST: '127.0.0.1',
    METRICS_PORT: '0',
  };
  const controllerConfig = loadConfig('controller', {
    ...common,
    KUBECONFIG: s.kube.kubeconfigs['aibom-vault-controller'],
    POD_NAME: 'logs-0',
    LEADER_ELECTION_LEASE: uniqueName('logs-lease'),
    WATCH_NAMESPACE: ns,
  });
  stops.push(await startControllerProcess(controllerConfig, controller.root));
  const sidecarConfig = loadConfig('sidecar', {
    ...common,
    KUBECONFIG: s.kube.kubeconfigs['aibom-vault-api'],
    HTTP_HOST: '127.0.0.1',
    HTTP_PORT: '0',
  });
  stops.push(await startSidecarProcess(sidecarConfig, sidecar.root));
  const listening = sidecar.lines.map((l) => JSON.parse(l) as { msg: string; address?: string });
  apiUrl = listening.find((l) => l.msg === 'sidecar listening')!.address!;
  await createRun(ns, 'logged', await sampleRunSpec());
  await driveRun(kubeConfig('admin'), ns, 'logged');
  const run = await poll(async () => {
    const r: Run = await getRun(ns, 'logged');
    const ready = r.status?.conditions?.some((c) => c.type === 'AIBOMReady' && c.status === 'True');
    return ready && r.status?.transparency?.state === 'published' ? r : undefined;
  }, 'the AIBOM ready and every record published');
  runId = run.metadata.uid!;
  // Lines of every loop: a checkpoint covering the run's records, and records time-stamped.
  await poll(
    () =>
      controller.lines.some((l) => l.includes('"component":"checkpointer"')) &&
      controller.lines.some((l) => l.includes('"component":"stamper"')),
    'lines of the checkpointer and the stamper',
  );
  const admin = { authorization: `Bearer ${s.kube.tokens.admin}` };
  for (const path of [`/v1/runs/${runId}`, `/v1/runs/${runId}/artifacts/aibom`, '/v1/keys', '/v1/nothing']) {
    await (await fetch(`${apiUrl}${path}`, { headers: admin })).arrayBuffer();
  }
  await (await fetch(`${apiUrl}/v1/runs`, { headers: { authorization: 'Bearer nope' } })).arrayBuffer();
  // A graceful stop, so the shutdown lines are written too.
  while (stops.length > 0) await stops.pop()!();
}, 300_000);

afterAll(async () => {
  while (stops.length > 0) await stops.pop()!().catch(() => undefined);
});

/** The lines among `lines` that hold a key twice, with the keys. */
const withDuplicates = (lines: readonly string[]): string[] =>
  lines.flatMap((l) => {
    const dups = duplicateKeys(l);
    return dups.length > 0 ? [`${dups.join(',')}: ${l.slice(0, 240)}`] : [];
  });

describe('the processes’ logs', () => {
  for (const [name, proc] of [
    ['controller', controller],
    ['sidecar', sidecar],
  ] as const) {
    it(`${name}: no line it wrote holds a key twice`, () => {
      // Start, the Run's reconciles or the requests (one line each), shutdown.
      expect(proc.lines.length, name).toBeGreaterThanOrEqual(name === 'controller' ? 20 : 9);
      if (name === 'sidecar') {
        expect(proc.lines.filter((l) => l.includes('"msg":"request"')).length).toBeGreaterThanOrEqual(5);
      }
      expect(withDuplicates(proc.lines)).toEqual([]);
      console.log(`${name}: ${proc.lines.length} lines, ${proc.loggers.length} loggers created`);
    });

    it(`${name}: no logger it created writes a key twice, even when a call names its bindings`, () => {
      const probes: string[] = [];
      // A snapshot: a probe naming a bound key logs through a new child, which is recorded too.
      const created = [...proc.loggers];
      for (const logger of created) {
        const before = proc.lines.length;
        logger.info({ ...logger.bindings(), probe: true }, 'probe');
        logger.info('probe');
        probes.push(...proc.lines.slice(before));
      }
      expect(probes.length).toBe(2 * created.length);
      expect(withDuplicates(probes)).toEqual([]);
    });
  }

  it('saw the loggers where duplicates came from: every component the processes bind', () => {
    const components = (lines: readonly string[]) =>
      new Set(lines.map((l) => (JSON.parse(l) as { component?: string }).component).filter(Boolean));
    expect([...components(controller.lines)].sort()).toEqual(
      expect.arrayContaining([
        'checkpointer',
        'controller',
        'customer-signers',
        'leader-election',
        'stamper',
        'transparency-projection',
        'transparency-publisher',
        'transparency-worker',
      ]),
    );
    const checkpointer = controller.lines.find((l) => l.includes('"component":"checkpointer"'))!;
    expect(JSON.parse(checkpointer)).toMatchObject({ component: 'checkpointer', name: 'controller' });
  });
});
