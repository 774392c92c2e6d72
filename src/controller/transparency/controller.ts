import type { Registry } from 'prom-client';
import type { EventRecorder, KubeClient } from '../../kube/index.ts';
import type { Logger } from '../../log/index.ts';
import { defaultControllerRateLimiter, runWorkers, WorkQueue } from '../../queue/index.ts';
import type { Recorder } from '../../recorder/index.ts';
import { TRANSPARENCY_CHANNEL, type Vault } from '../../vault/index.ts';
import { RUN_MAX_BACKOFF_MS } from '../run/controller.ts';
import type { LeaderLoop, Term } from '../term.ts';
import { kubeProjectionApi } from './kube-api.ts';
import {
  mayNeedProjection,
  projectionTargetsChanged,
  projectRun,
  type ProjectionDeps,
} from './projection.ts';

export interface ProjectionControllerDeps {
  readonly client: KubeClient;
  readonly vault: Vault;
  /** Refreshes an AIBOM's metadata once its SCITT entry is known. */
  readonly recorder: Pick<Recorder, 'refreshAibomMetadata'>;
  readonly events: EventRecorder;
  readonly logger: Logger;
  readonly registry: Registry;
}

/**
 * The transparency projection, a loop of the leader: a keyed queue of run ids fed by the vault's
 * job notifications (from any replica) and by Run updates that add resources to project onto.
 */
export function projectionController(deps: ProjectionControllerDeps): LeaderLoop {
  return {
    name: 'transparency projection',
    run: async ({ signal, runs }: Term) => {
      const queue = new WorkQueue({
        name: 'transparency',
        registry: deps.registry,
        rateLimiter: defaultControllerRateLimiter(Date.now, RUN_MAX_BACKOFF_MS),
      });
      const api = kubeProjectionApi(deps.client, deps.events, (ns, name) => runs.get(`${ns}/${name}`));
      const rescan = (): void => {
        for (const run of runs.list()) if (mayNeedProjection(run)) queue.add(run.metadata.uid);
      };
      const removeHandler = runs.addHandler({
        onUpdate: (old, next) => {
          if (projectionTargetsChanged(old, next)) queue.add(next.metadata.uid);
        },
      });
      const unsubscribe = await deps.vault.listener.subscribe(TRANSPARENCY_CHANNEL, {
        onNotify: (payload) => {
          if (payload === '*') return rescan();
          for (const id of payload.split(',')) if (id !== '') queue.add(id);
        },
        // (Re)connected: notifications sent meanwhile are lost; project whatever may lag.
        resync: rescan,
      });
      const ctx: ProjectionDeps = {
        api,
        jobs: deps.vault.transparencyJobs,
        logger: deps.logger,
        refreshAibomMetadata: (id, entry) => deps.recorder.refreshAibomMetadata(id, entry),
      };
      try {
        await runWorkers(queue, 2, (runId) => projectRun(ctx, runId), {
          logger: deps.logger,
          registry: deps.registry,
          name: 'transparency',
          signal,
        });
      } finally {
        unsubscribe();
        removeHandler();
      }
    },
  };
}
