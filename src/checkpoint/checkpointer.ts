import { Counter, Gauge, type Registry } from 'prom-client';
import type { Logger } from '../log/index.ts';
import type { Loop } from '../queue/loop.ts';
import { runWakeLoop } from '../queue/wake-loop.ts';
import type { Publisher } from '../transparency/publisher.ts';
import { CHECKPOINT_REQUEST_CHANNEL, type Vault } from '../vault/index.ts';
import { CheckpointError } from './errors.ts';
import { makeCheckpoint, type CheckpointerSigning } from './tree.ts';
import type { CheckpointWitness } from './witness.ts';

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
  /**
   * The newest checkpoint kept outside the database (witness.ts): checked before each round, kept
   * after. Without it a database that lost acknowledged records goes on signing the new history.
   */
  readonly witness?: CheckpointWitness;
  /**
   * VAULT_ACCEPT_LOST_CHECKPOINT: the kept checkpoint an operator has accepted as lost (its size and
   * root, hex): the checkpointer then signs the new history (the loss stays in vault_losses).
   */
  readonly acceptLost?: { readonly treeSize: number; readonly rootHash: string };
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

  const historyLost = deps.registry
    ? ((deps.registry.getSingleMetric('aibom_vault_checkpoint_history_lost') as Gauge | undefined) ??
      new Gauge({
        name: 'aibom_vault_checkpoint_history_lost',
        help:
          '1 while the checkpointer refuses to sign: a checkpoint kept in the object store covers records ' +
          'the vault no longer holds (docs/failover.md); 0 otherwise',
        registers: [deps.registry],
      }))
    : undefined;
  historyLost?.set(0);
  const lossCounters = (): {
    losses: Counter<'source'> | undefined;
    records: Counter<'source'> | undefined;
  } => ({
    losses: deps.registry?.getSingleMetric('aibom_vault_losses_recorded_total') as
      Counter<'source'> | undefined,
    records: deps.registry?.getSingleMetric('aibom_vault_lost_records_total') as
      Counter<'source'> | undefined,
  });

  /** Writes down (once) that the kept checkpoint covers records the vault lost. */
  const recordLostHistory = async (
    witnessed: NonNullable<Awaited<ReturnType<CheckpointWitness['latest']>>>,
    err: CheckpointError,
  ): Promise<void> => {
    historyLost?.set(1);
    const head = await deps.vault.checkpoints.head();
    const { loss, created } = await deps.vault.losses.record({
      scope: 'checkpoint',
      missingIds: [],
      identity: {
        source: 'checkpoint',
        tree_size: witnessed.treeSize,
        root_hash: witnessed.rootHash.toString('hex'),
      },
      details: {
        source: 'checkpoint',
        witnessed: {
          tree_size: witnessed.treeSize,
          root_hash: witnessed.rootHash.toString('hex'),
          last_id: witnessed.lastId,
          issued_at: witnessed.issuedAt,
          statement: witnessed.statement.toString('base64'),
        },
        vault_head: head.seq,
        reason: err.message,
      },
      detectedBy: 'checkpointer',
    });
    if (created) {
      const { losses, records } = lossCounters();
      losses?.inc({ source: 'checkpoint' });
      records?.inc({ source: 'checkpoint' }, Math.max(0, witnessed.treeSize - head.seq));
    }
    log.error(
      { loss: loss.id, treeSize: witnessed.treeSize, vaultHead: head.seq },
      'the vault lost records a signed checkpoint covers: no checkpoint is signed over the new history ' +
        `until VAULT_ACCEPT_LOST_CHECKPOINT=${witnessed.treeSize}:${witnessed.rootHash.toString('hex')} accepts the loss`,
    );
  };

  const round = async (): Promise<void> => {
    const witnessed = deps.witness ? await deps.witness.latest() : null;
    const accepted =
      witnessed !== null &&
      deps.acceptLost?.treeSize === witnessed.treeSize &&
      deps.acceptLost.rootHash === witnessed.rootHash.toString('hex');
    let made: Awaited<ReturnType<typeof makeCheckpoint>>;
    try {
      made = await makeCheckpoint(
        deps.vault.checkpoints,
        deps,
        undefined,
        accepted ? undefined : (witnessed ?? undefined),
      );
    } catch (err) {
      if (err instanceof CheckpointError && err.code === 'HISTORY_LOST' && witnessed !== null) {
        await recordLostHistory(witnessed, err);
      }
      throw err;
    }
    historyLost?.set(0);
    const { checkpoint, created } = made;
    if (checkpoint !== null) size?.set(checkpoint.treeSize);
    if (
      deps.witness !== undefined &&
      checkpoint !== null &&
      (witnessed === null ||
        checkpoint.treeSize > witnessed.treeSize ||
        (accepted && !checkpoint.rootHash.equals(witnessed.rootHash)))
    ) {
      await deps.witness.keep(checkpoint);
    }
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

  await runWakeLoop({
    signal,
    intervalMs: deps.intervalMs,
    subscribe: (poke) =>
      deps.vault.listener.subscribe(CHECKPOINT_REQUEST_CHANNEL, { onNotify: poke, resync: poke }),
    round,
    onError: (err) => {
      const code = (err as { code?: string }).code ?? 'ERROR';
      failures?.inc({ code });
      log[code === 'TREE_DIVERGED' || code === 'CHAIN_GAP' || code === 'HISTORY_LOST' ? 'error' : 'warn'](
        { err, code },
        'vault checkpoint round failed; retrying on the next round',
      );
    },
  });
}
