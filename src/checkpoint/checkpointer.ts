import { Counter, Gauge, type Registry } from 'prom-client';
import type { Logger } from '../log/index.ts';
import type { Loop } from '../queue/loop.ts';
import type { Publisher } from '../transparency/publisher.ts';
import { CHECKPOINT_REQUEST_CHANNEL, type Vault } from '../vault/index.ts';
import { makeCheckpoint, type CheckpointerSigning } from './tree.ts';

/**
 * The controller's checkpointer (the leader runs one): signs a checkpoint of the vault whenever
 * the head has moved, every `intervalMs`, at once when asked (NOTIFY on CHECKPOINT_REQUEST_CHANNEL,
 * which the API's POST /v1/chain/checkpoint sends), and at the start of each leadership term. With
 * the transparency writer on, every checkpoint is registered in the transparency log and its
 * receipt stored; one that failed to register is retried on the next round.
 *
 * Requests arriving while a round runs coalesce into one more round. A round that fails (the
 * database is down, the tree diverged) is logged and counted, and the next round tries again; a
 * diverged tree keeps failing, loudly, rather than being signed over.
 */

export interface CheckpointerDeps extends CheckpointerSigning {
  readonly vault: Vault;
  /** Between rounds when nothing asks; the head may not have moved, then a round is one query. */
  readonly intervalMs: number;
  /** SERVICE_TRANSPARENCY_WRITER=1: registers every checkpoint in the transparency log. */
  readonly publisher?: Publisher;
  readonly logger: Logger;
  readonly registry?: Registry;
}

/** Unpublished checkpoints registered per round. */
const PUBLISH_BATCH = 20;

/** The checkpointer as a loop of the leader (src/controller/manager.ts). */
export function checkpointerLoop(deps: CheckpointerDeps): Loop {
  return { name: 'checkpointer', run: (signal) => runCheckpointer(deps, signal) };
}

/** Runs until `signal` aborts. Never throws for a failed round. */
export async function runCheckpointer(deps: CheckpointerDeps, signal: AbortSignal): Promise<void> {
  const log = deps.logger.child({ component: 'checkpointer' });
  // Once per registry: a replica leads many terms.
  const failures = deps.registry
    ? ((deps.registry.getSingleMetric('vault_checkpoint_failures_total') as Counter<'code'> | undefined) ??
      new Counter({
        name: 'vault_checkpoint_failures_total',
        help: 'Checkpoint rounds that failed, by error code (TREE_DIVERGED means the vault was changed)',
        labelNames: ['code'],
        registers: [deps.registry],
      }))
    : undefined;
  const size = deps.registry
    ? ((deps.registry.getSingleMetric('vault_checkpoint_tree_size') as Gauge | undefined) ??
      new Gauge({
        name: 'vault_checkpoint_tree_size',
        help: 'Records covered by the newest signed checkpoint',
        registers: [deps.registry],
      }))
    : undefined;

  let wanted = true; // a round at the start of the term
  let wake: (() => void) | undefined;
  const poke = (): void => {
    wanted = true;
    wake?.();
  };
  const unsubscribe = await deps.vault.listener.subscribe(CHECKPOINT_REQUEST_CHANNEL, {
    onNotify: poke,
    resync: poke,
  });
  const onAbort = (): void => wake?.();
  signal.addEventListener('abort', onAbort);

  const round = async (): Promise<void> => {
    const { checkpoint, created } = await makeCheckpoint(deps.vault.checkpoints, deps);
    if (checkpoint !== null) size?.set(checkpoint.treeSize);
    if (created && checkpoint !== null) {
      log.info(
        { treeSize: checkpoint.treeSize, root: checkpoint.rootHash.toString('hex') },
        'vault checkpoint signed',
      );
    }
    if (deps.publisher === undefined) return;
    for (const c of await deps.vault.checkpoints.unpublished(PUBLISH_BATCH)) {
      const publication = await deps.publisher.register(c.statement, { signal });
      await deps.vault.checkpoints.addReceipt(c.treeSize, {
        backend: publication.backend,
        entryId: publication.entryId,
        logIndex: publication.logIndex,
        receipt: publication.receipt,
      });
      log.info(
        { treeSize: c.treeSize, entryId: publication.entryId },
        'vault checkpoint registered in the transparency log',
      );
    }
  };

  try {
    while (!signal.aborted) {
      if (wanted) {
        wanted = false;
        try {
          await round();
        } catch (err) {
          const code = (err as { code?: string }).code ?? 'ERROR';
          failures?.inc({ code });
          log[code === 'TREE_DIVERGED' || code === 'CHAIN_GAP' ? 'error' : 'warn'](
            { err, code },
            'vault checkpoint round failed; retrying on the next round',
          );
        }
        continue;
      }
      await new Promise<void>((resolve) => {
        const timer = setTimeout(() => {
          wanted = true;
          resolve();
        }, deps.intervalMs);
        wake = () => {
          clearTimeout(timer);
          resolve();
        };
        if (signal.aborted || wanted) wake();
      });
      wake = undefined;
    }
  } finally {
    signal.removeEventListener('abort', onAbort);
    unsubscribe();
  }
}
