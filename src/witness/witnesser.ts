import { Counter, Gauge, type Registry } from 'prom-client';
import type { Logger } from '../log/index.ts';
import { verifyConsistency } from '../transparency/merkle.ts';
import { signCheckpoint } from '../tlog/checkpoint.ts';
import { hexKeyId, type NoteSigner } from '../tlog/note.ts';
import type { WitnessKey } from '../tlog/cosignature.ts';
import { CHECKPOINT_CHANNEL, type StoredNote, type TlogName, type Vault } from '../vault/index.ts';
import type { WitnessClient } from './client.ts';
import { WitnessError } from './errors.ts';
import type { WitnessedLog } from './logs.ts';
import { pushCheckpoint, type PushOutcome } from './push.ts';
import { runWakeLoop } from '../queue/wake-loop.ts';

/**
 * The leader's witnessing loop (c2sp.org/tlog-witness): for each of the service's logs, sign a
 * C2SP checkpoint (signed note) of its current tree whenever it grew, store it, and push it with
 * its consistency proof to every configured witness; store each cosignature, and each refusal.
 *
 * Rounds run when a vault checkpoint is stored (NOTIFY), every `intervalMs` (the SCITT log grows
 * without one), and at the start of each leadership term. A log never signs a note that does not
 * extend the last one it signed (checked with an RFC 9162 consistency proof against its own stored
 * tree): the note would be a split view of its own making (CHECKPOINT_INCONSISTENT).
 *
 * The alarm: a witness answering 422 (the tree shown does not extend the one it cosigned: two
 * histories of one log) or 409 with a size beyond this log's tree (it has seen more of this log
 * than the log now has) raises `aibom_vault_tlog_witness_consistent{log,witness}` to 0, counts
 * `aibom_vault_tlog_witness_refusals_total`, records the refusal (the API's witness condition,
 * docs/transparency.md) and calls `onAlarm` (the controller emits a Warning Event). A later
 * cosignature clears it. A refused note is not pushed to that witness again; the next note is.
 */

export interface ConfiguredWitness {
  readonly key: WitnessKey;
  readonly client: WitnessClient;
}

export interface WitnessAlarm {
  readonly log: TlogName;
  readonly origin: string;
  readonly witness: string;
  readonly outcome: 'inconsistent' | 'ahead';
  readonly treeSize: number;
  readonly message: string;
}

export interface WitnesserDeps {
  readonly vault: Pick<Vault, 'tlog' | 'listener'>;
  readonly logs: readonly WitnessedLog[];
  /** The log's note signer under a key name (the origin): one Ed25519 key for both logs. */
  readonly signer: (origin: string) => NoteSigner;
  readonly witnesses: readonly ConfiguredWitness[];
  readonly intervalMs: number;
  readonly logger: Logger;
  readonly registry?: Registry;
  /** Told of every refusal that is an alarm (inconsistent, ahead); never throws. */
  readonly onAlarm?: (alarm: WitnessAlarm) => void;
  /** Told of every push outcome (tests print them). */
  readonly onOutcome?: (log: TlogName, witness: string, outcome: PushOutcome) => void;
}

function metric<T extends Counter<string> | Gauge<string>>(
  registry: Registry | undefined,
  name: string,
  make: (registers: Registry[]) => T,
): T | undefined {
  if (registry === undefined) return undefined;
  return (registry.getSingleMetric(name) as T | undefined) ?? make([registry]);
}

export function witnessMetrics(registry?: Registry) {
  return {
    consistent: metric(
      registry,
      'aibom_vault_tlog_witness_consistent',
      (registers) =>
        new Gauge({
          name: 'aibom_vault_tlog_witness_consistent',
          help: '1 after the witness cosigned this log, 0 after it refused a checkpoint as inconsistent with what it cosigned (a split view: alarm)',
          labelNames: ['log', 'witness'],
          registers,
        }),
    ),
    cosignedSize: metric(
      registry,
      'aibom_vault_tlog_witness_cosigned_size',
      (registers) =>
        new Gauge({
          name: 'aibom_vault_tlog_witness_cosigned_size',
          help: 'Tree size of the newest checkpoint of this log the witness cosigned',
          labelNames: ['log', 'witness'],
          registers,
        }),
    ),
    refusals: metric(
      registry,
      'aibom_vault_tlog_witness_refusals_total',
      (registers) =>
        new Counter({
          name: 'aibom_vault_tlog_witness_refusals_total',
          help: 'Checkpoints a witness refused: inconsistent (422), ahead (409 beyond our tree), rejected (400/403/404)',
          labelNames: ['log', 'witness', 'outcome'],
          registers,
        }),
    ),
    errors: metric(
      registry,
      'aibom_vault_tlog_witness_errors_total',
      (registers) =>
        new Counter({
          name: 'aibom_vault_tlog_witness_errors_total',
          help: 'Pushes to a witness that failed without an answer (unreachable, 5xx, protocol errors), by code',
          labelNames: ['log', 'witness', 'code'],
          registers,
        }),
    ),
    inconsistentLog: metric(registry, 'aibom_vault_tlog_checkpoint_failures_total', (registers) => {
      const c = new Counter({
        name: 'aibom_vault_tlog_checkpoint_failures_total',
        help: 'Rounds in which a log refused to sign a checkpoint of its tree, by code (CHECKPOINT_INCONSISTENT: its stored tree no longer extends its last signed note)',
        labelNames: ['log', 'code'],
        registers,
      });
      // Both logs and the one code exist from the start (0), so an alert can tell "never" from "no data".
      for (const log of ['vault', 'scitt'] satisfies TlogName[])
        c.labels(log, 'CHECKPOINT_INCONSISTENT').inc(0);
      return c;
    }),
  };
}

/**
 * Signs (when the tree grew) and stores the note of `log`; returns the newest stored note, or null
 * while the tree is empty.
 */
export async function noteOf(
  deps: Pick<WitnesserDeps, 'vault' | 'signer'>,
  log: WitnessedLog,
): Promise<StoredNote | null> {
  const [cur, last] = await Promise.all([log.current(), deps.vault.tlog.checkpoint(log.name)]);
  if (cur === null) return last;
  if (last !== null && last.treeSize >= cur.treeSize) {
    if (last.treeSize === cur.treeSize && last.rootHash.equals(cur.rootHash)) return last;
    throw new WitnessError(
      'CHECKPOINT_INCONSISTENT',
      `${log.origin}: the stored tree (${cur.treeSize}) no longer matches the last signed checkpoint (${last.treeSize})`,
    );
  }
  if (last !== null) {
    const proof = await log.consistencyProof(last.treeSize, cur.treeSize);
    if (!verifyConsistency(last.treeSize, cur.treeSize, last.rootHash, cur.rootHash, proof)) {
      throw new WitnessError(
        'CHECKPOINT_INCONSISTENT',
        `${log.origin}: the tree of ${cur.treeSize} does not extend the signed checkpoint of ${last.treeSize}`,
      );
    }
  }
  const signer = deps.signer(log.origin);
  const note = signCheckpoint({ origin: log.origin, treeSize: cur.treeSize, rootHash: cur.rootHash }, signer);
  await deps.vault.tlog.addCheckpoint({
    log: log.name,
    treeSize: cur.treeSize,
    rootHash: cur.rootHash,
    origin: log.origin,
    note,
    vkey: signer.vkey,
  });
  return deps.vault.tlog.checkpoint(log.name, cur.treeSize);
}

/** Runs until `signal` aborts. Never throws for a failed round. */
export async function runWitnesser(deps: WitnesserDeps, signal: AbortSignal): Promise<void> {
  const log = deps.logger.child({ component: 'witnesser' });
  const m = witnessMetrics(deps.registry);
  // Notes whose push to a witness ended in an answer (cosigned or refused): not sent again.
  const answered = new Map<string, number>();

  const pushTo = async (wl: WitnessedLog, note: StoredNote, w: ConfiguredWitness, known: number) => {
    const labels = { log: wl.name, witness: w.key.name };
    const keyId = hexKeyId(w.key.keyId);
    const slot = `${wl.name}\u0000${w.key.vkey}`;
    if (note.cosignatures.some((c) => c.witness === w.key.name && c.keyId === keyId)) {
      m.cosignedSize?.set(labels, note.treeSize);
      return;
    }
    if (answered.get(slot) === note.treeSize) return;
    let outcome: PushOutcome;
    try {
      outcome = await pushCheckpoint({
        client: w.client,
        witness: w.key,
        note: note.note,
        treeSize: note.treeSize,
        knownSize: known,
        consistencyProof: (from) => wl.consistencyProof(from, note.treeSize),
        signal,
      });
    } catch (err) {
      const code = (err as { code?: string }).code ?? 'ERROR';
      m.errors?.inc({ ...labels, code });
      log.warn(
        { err, code, log: wl.name, witness: w.key.name, url: w.client.url },
        'witness push failed; retried next round',
      );
      return;
    }
    deps.onOutcome?.(wl.name, w.key.name, outcome);
    answered.set(slot, note.treeSize);
    if (outcome.kind === 'cosigned') {
      await deps.vault.tlog.addCosignature(wl.name, note.treeSize, {
        witness: w.key.name,
        keyId,
        line: outcome.signature.line,
        cosignedAt: new Date(Number(outcome.timestamp) * 1000),
      });
      m.consistent?.set(labels, 1);
      m.cosignedSize?.set(labels, note.treeSize);
      log.info(
        {
          log: wl.name,
          witness: w.key.name,
          treeSize: note.treeSize,
          oldSize: outcome.oldSize,
          conflicts: outcome.conflicts,
        },
        'checkpoint cosigned by witness',
      );
      return;
    }
    const witnessSize = outcome.kind === 'ahead' ? outcome.witnessSize : null;
    const status = outcome.kind === 'ahead' ? 409 : outcome.status;
    const detail =
      outcome.kind === 'ahead' ? `the witness holds size ${outcome.witnessSize}` : outcome.detail;
    await deps.vault.tlog.addRefusal({
      log: wl.name,
      treeSize: note.treeSize,
      witness: w.key.name,
      keyId,
      outcome: outcome.kind,
      httpStatus: status,
      oldSize: outcome.oldSize,
      witnessSize,
      detail,
    });
    m.refusals?.inc({ ...labels, outcome: outcome.kind });
    if (outcome.kind === 'rejected') {
      log.error(
        { log: wl.name, witness: w.key.name, status, detail },
        'witness rejected the checkpoint (does it know this log and its key?)',
      );
      return;
    }
    m.consistent?.set(labels, 0);
    const message =
      outcome.kind === 'inconsistent'
        ? `witness ${w.key.name} refused checkpoint ${wl.origin} size ${note.treeSize} as inconsistent with the tree it cosigned (HTTP ${status}, sent from size ${outcome.oldSize}): this log has shown it another history (split view)`
        : `witness ${w.key.name} holds a checkpoint of ${wl.origin} of size ${outcome.witnessSize}, larger than this log's tree of ${note.treeSize}: entries it cosigned are gone, or another copy of this log showed it a longer history`;
    log.error({ log: wl.name, witness: w.key.name, outcome: outcome.kind, treeSize: note.treeSize }, message);
    try {
      deps.onAlarm?.({
        log: wl.name,
        origin: wl.origin,
        witness: w.key.name,
        outcome: outcome.kind,
        treeSize: note.treeSize,
        message,
      });
    } catch (err) {
      log.warn({ err }, 'witness alarm handler failed');
    }
  };

  const round = async (): Promise<void> => {
    for (const wl of deps.logs) {
      let note: StoredNote | null;
      try {
        note = await noteOf(deps, wl);
      } catch (err) {
        const code = (err as { code?: string }).code ?? 'ERROR';
        m.inconsistentLog?.inc({ log: wl.name, code });
        log[code === 'CHECKPOINT_INCONSISTENT' ? 'error' : 'warn'](
          { err, code, log: wl.name },
          'checkpoint not signed',
        );
        continue;
      }
      if (note === null || deps.witnesses.length === 0) continue;
      const records = await deps.vault.tlog.witnesses(wl.name);
      await Promise.all(
        deps.witnesses.map((w) => {
          const rec = records.find((r) => r.witness === w.key.name && r.keyId === hexKeyId(w.key.keyId));
          return pushTo(wl, note, w, rec?.cosigned?.treeSize ?? 0);
        }),
      );
    }
  };

  await runWakeLoop({
    signal,
    intervalMs: deps.intervalMs,
    subscribe: (poke) => deps.vault.listener.subscribe(CHECKPOINT_CHANNEL, { onNotify: poke, resync: poke }),
    round,
    onError: (err) => log.warn({ err }, 'witnessing round failed; retrying on the next round'),
  });
}
