import type { Run } from '../../crd/run.ts';
import {
  Informer,
  kubeListerWatcher,
  resourcePath,
  slimForCache,
  type KubeClient,
} from '../../kube/index.ts';
import type { Logger } from '../../log/index.ts';
import type { Registry } from 'prom-client';
import { RUN_TYPE } from './kube-api.ts';

export interface RunInformerOptions {
  readonly client: KubeClient;
  /** Runs of one namespace only (WATCH_NAMESPACE); all namespaces when unset. */
  readonly watchNamespace?: string;
  /** Only Runs matching this label selector (shards; tests scope a controller to their Runs). */
  readonly labelSelector?: string;
  readonly logger: Logger;
  readonly registry: Registry;
}

/** The Run cache of one leadership term (an informer runs once: each term makes a new one). */
export function runInformer(options: RunInformerOptions): Informer<Run> {
  return new Informer<Run>({
    name: 'runs',
    listerWatcher: kubeListerWatcher<Run>(
      options.client,
      resourcePath(RUN_TYPE, { namespace: options.watchNamespace }),
      // The reconcilers read the cache, never managedFields nor kubectl's last-applied copy: at
      // 10,000 Runs what they would cost is most of the controller's memory (docs/bench.md).
      {
        transform: slimForCache,
        ...(options.labelSelector !== undefined ? { labelSelector: options.labelSelector } : {}),
      },
    ),
    logger: options.logger,
    registry: options.registry,
  });
}
