/**
 * Child of bench/controller-memory.ts: `node --expose-gc bench/memory-child.ts <kubeconfig> <ns>
 * controller|whole`. Loads the controller's module graph, lists the namespace's Runs into an
 * informer (the controller's own, or one keeping whole objects), waits for sync, collects garbage
 * and prints one JSON line: runs, rssMB, heapUsedMB, heapTotalMB, maxRssMB (the peak), syncMs.
 * The parent passes the controller's V8 flags (src/bin/node-flags.ts) unless a case leaves them out.
 */
import { pino } from 'pino';
import { Registry } from 'prom-client';
// The controller's modules, loaded as the controller process loads them.
import '../src/controller/manager.ts';
import { runInformer } from '../src/controller/run/informer.ts';
import { RUN_TYPE } from '../src/controller/run/kube-api.ts';
import type { Run } from '../src/crd/run.ts';
import { Informer, kubeClient, kubeListerWatcher, resourcePath } from '../src/kube/index.ts';
import { loadKube } from './controller-kit.ts';

const [kubeconfig, namespace, mode] = process.argv.slice(2);
if (kubeconfig === undefined || namespace === undefined || (mode !== 'controller' && mode !== 'whole')) {
  console.error('usage: memory-child.ts <kubeconfig> <namespace> controller|whole');
  process.exit(2);
}
const client = kubeClient(loadKube(kubeconfig));
const logger = pino({ level: 'silent' });
const registry = new Registry();
const informer =
  mode === 'controller'
    ? runInformer({ client, logger, registry, watchNamespace: namespace })
    : new Informer<Run>({
        name: 'runs',
        listerWatcher: kubeListerWatcher<Run>(client, resourcePath(RUN_TYPE, { namespace })),
        logger,
        registry,
      });
const t0 = performance.now();
informer.start();
await informer.waitForSync();
const syncMs = performance.now() - t0;
const gc = (globalThis as { gc?: () => void }).gc;
for (let i = 0; i < 3; i++) {
  gc?.();
  await new Promise((r) => setTimeout(r, 100));
}
const mem = process.memoryUsage();
const MB = 1024 * 1024;
console.log(
  JSON.stringify({
    runs: informer.keys().length,
    rssMB: mem.rss / MB,
    heapUsedMB: mem.heapUsed / MB,
    heapTotalMB: mem.heapTotal / MB,
    maxRssMB: process.resourceUsage().maxRSS / 1024,
    syncMs,
  }),
);
await informer.stop();
process.exit(0);
