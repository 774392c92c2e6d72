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

/** The kept checkpoint, as the witness returns it. */
type Witnessed = NonNullable<Awaited<ReturnType<CheckpointWitness['latest']>>>;

interface CheckpointerMetrics {
  readonly failures: Counter<'code'> | undefined;
  readonly size: Gauge | undefined;
  readonly historyLost: Gauge | undefined;
}

/** The metric `name` of the registry, made once: a replica leads many terms, each a new checkpointer. */
function registered<T>(registry: Registry, name: string, make: () => T): T {
  return (registry.getSingleMetric(name) as T | undefined) ?? make();
}

function checkpointerMetrics(registry: Registry | undefined): CheckpointerMetrics {
  if (registry === undefined) return { failures: undefined, size: undefined, historyLost: undefined };
  return {
    failures: registered(
      registry,
      'vault_checkpoint_failures_total',
      () =>
        new Counter({
          name: 'vault_checkpoint_failures_total',
          help: 'Checkpoint rounds that failed, by error code (TREE_DIVERGED means the vault was changed)',
          labelNames: ['code'],
          registers: [registry],
        }),
    ),
    size: registered(
      registry,
      'vault_checkpoint_tree_size',
      () =>
        new Gauge({
          name: 'vault_checkpoint_tree_size',
          help: 'Records covered by the newest signed checkpoint',
          registers: [registry],
        }),
    ),
    historyLost: registered(
      registry,
      'aibom_vault_checkpoint_history_lost',
      () =>
        new Gauge({
          name: 'aibom_vault_checkpoint_history_lost',
          help:
            '1 while the checkpointer refuses to sign: a checkpoint kept in the object store covers records ' +
            'the vault no longer holds (docs/failover.md); 0 otherwise',
          registers: [registry],
        }),
    ),
  };
}

/** The kept checkpoint is the one the operator accepted as lost (VAULT_ACCEPT_LOST_CHECKPOINT). */
export function acceptsLoss(
  acceptLost: CheckpointerDeps['acceptLost'],
  witnessed: { readonly treeSize: number; readonly rootHash: Buffer } | null,
): boolean {
  return (
    witnessed !== null &&
    acceptLost?.treeSize === witnessed.treeSize &&
    acceptLost.rootHash === witnessed.rootHash.toString('hex')
  );
}

/**
 * The new checkpoint replaces the kept one: it covers more records, or it is the first over the
 * new history after an accepted loss (same size or smaller, another root). Never a step back.
 */
export function supersedes(
  checkpoint: { readonly treeSize: number; readonly rootHash: Buffer },
  kept: { readonly treeSize: number; readonly rootHash: Buffer } | null,
  accepted: boolean,
): boolean {
  return (
    kept === null ||
    checkpoint.treeSize > kept.treeSize ||
    (accepted && !checkpoint.rootHash.equals(kept.rootHash))
  );
}

/** A failed round's log level: the vault's history changed (error) or a passing fault (warn). */
export function failureLevel(code: string): 'error' | 'warn' {
  return code === 'TREE_DIVERGED' || code === 'CHAIN_GAP' || code === 'HISTORY_LOST' ? 'error' : 'warn';
}

/** Writes down (once) that the kept checkpoint covers records the vault lost. */
async function recordLostHistory(
  deps: CheckpointerDeps,
  log: Logger,
  witnessed: Witnessed,
  err: CheckpointError,
): Promise<void> {
  const head = await deps.vault.checkpoints.head();
  const rootHash = witnessed.rootHash.toString('hex');
  const { loss, created } = await deps.vault.losses.record({
    scope: 'checkpoint',
    missingIds: [],
    identity: { source: 'checkpoint', tree_size: witnessed.treeSize, root_hash: rootHash },
    details: {
      source: 'checkpoint',
      witnessed: {
        tree_size: witnessed.treeSize,
        root_hash: rootHash,
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
    // Registered by the vault's loss recording (looked up now: it may register them after us).
    const counter = (name: string): Counter<'source'> | undefined =>
      deps.registry?.getSingleMetric(name) as Counter<'source'> | undefined;
    counter('aibom_vault_losses_recorded_total')?.inc({ source: 'checkpoint' });
    counter('aibom_vault_lost_records_total')?.inc(
      { source: 'checkpoint' },
      Math.max(0, witnessed.treeSize - head.seq),
    );
  }
  log.error(
    { loss: loss.id, treeSize: witnessed.treeSize, vaultHead: head.seq },
    'the vault lost records a signed checkpoint covers: no checkpoint is signed over the new history ' +
      `until VAULT_ACCEPT_LOST_CHECKPOINT=${witnessed.treeSize}:${rootHash} accepts the loss`,
  );
}

/** Registers up to PUBLISH_BATCH checkpoints that have no receipt yet and stores their receipts. */
async function publishCheckpoints(
  deps: CheckpointerDeps & { publisher: Publisher },
  log: Logger,
  signal: AbortSignal,
): Promise<void> {
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
}

/**
 * One round: check against the kept checkpoint, extend and sign (a loss of history is recorded and
 * fails the round), keep the new checkpoint outside the database, register the unpublished ones.
 */
async function checkpointRound(
  deps: CheckpointerDeps,
  log: Logger,
  metrics: CheckpointerMetrics,
  signal: AbortSignal,
): Promise<void> {
  const witnessed = deps.witness ? await deps.witness.latest() : null;
  const accepted = acceptsLoss(deps.acceptLost, witnessed);
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
      metrics.historyLost?.set(1);
      await recordLostHistory(deps, log, witnessed, err);
    }
    throw err;
  }
  metrics.historyLost?.set(0);
  const { checkpoint, created } = made;
  if (checkpoint !== null) metrics.size?.set(checkpoint.treeSize);
  if (deps.witness !== undefined && checkpoint !== null && supersedes(checkpoint, witnessed, accepted)) {
    await deps.witness.keep(checkpoint);
  }
  if (created && checkpoint !== null) {
    log.info(
      { treeSize: checkpoint.treeSize, root: checkpoint.rootHash.toString('hex') },
      'vault checkpoint signed',
    );
  }
  if (deps.publisher !== undefined)
    await publishCheckpoints({ ...deps, publisher: deps.publisher }, log, signal);
}

/** Runs until `signal` aborts. Never throws for a failed round. */
export async function runCheckpointer(deps: CheckpointerDeps, signal: AbortSignal): Promise<void> {
  const log = deps.logger.child({ component: 'checkpointer' });
  const metrics = checkpointerMetrics(deps.registry);
  metrics.historyLost?.set(0);
  await runWakeLoop({
    signal,
    intervalMs: deps.intervalMs,
    subscribe: (poke) =>
      deps.vault.listener.subscribe(CHECKPOINT_REQUEST_CHANNEL, { onNotify: poke, resync: poke }),
    round: () => checkpointRound(deps, log, metrics, signal),
    onError: (err) => {
      const code = (err as { code?: string }).code ?? 'ERROR';
      metrics.failures?.inc({ code });
      log[failureLevel(code)]({ err, code }, 'vault checkpoint round failed; retrying on the next round');
    },
  });
}
