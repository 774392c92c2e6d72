import type { KeyObject } from 'node:crypto';
import type { Registry } from 'prom-client';
import type { Logger } from '../log/index.ts';
import { parseWitnessVkey } from '../tlog/cosignature.ts';
import { ed25519NoteSigner, type NoteSigner } from '../tlog/note.ts';
import type { Vault } from '../vault/index.ts';
import { createWitnessClient } from './client.ts';
import { originOf, scittLog, vaultLog } from './logs.ts';
import { runWitnesser, type WitnessAlarm } from './witnesser.ts';

/** What the controller is configured with (TLOG_* keys, docs/configuration.md). */
export interface WitnessingConfig {
  /** TLOG_NOTE_SECRET's Ed25519 key: signs the checkpoints of both logs. */
  readonly noteKey: KeyObject;
  /** TLOG_ORIGIN: the origins are `<prefix>/v1/tlog/vault` and `<prefix>/v1/tlog/scitt`. */
  readonly originPrefix: string;
  /** TLOG_WITNESSES. */
  readonly witnesses: readonly { readonly url: string; readonly vkey: string }[];
  /** TLOG_WITNESS_TIMEOUT_MS. */
  readonly timeoutMs: number;
  /** Between rounds when no vault checkpoint wakes the loop (the SCITT log grows without one). */
  readonly intervalMs: number;
}

export interface WitnessingDeps {
  readonly vault: Vault;
  readonly config: WitnessingConfig;
  readonly logger: Logger;
  readonly registry?: Registry;
  readonly onAlarm?: (alarm: WitnessAlarm) => void;
}

/**
 * The leader's witnessing loop, built from configuration: both logs, one note signer per origin
 * (the same key), one wire client per witness. Runs while the replica leads.
 */
export function witnessingLoop(deps: WitnessingDeps): {
  readonly name: string;
  run(signal: AbortSignal): Promise<void>;
} {
  const { config } = deps;
  const signers = new Map<string, NoteSigner>();
  const witnesses = config.witnesses.map((w) => ({
    key: parseWitnessVkey(w.vkey),
    client: createWitnessClient({ url: w.url, timeoutMs: config.timeoutMs }),
  }));
  return {
    name: 'witnesser',
    run: (signal) =>
      runWitnesser(
        {
          vault: deps.vault,
          logs: [
            vaultLog(deps.vault, originOf(config.originPrefix, 'vault')),
            scittLog(deps.vault, originOf(config.originPrefix, 'scitt')),
          ],
          signer: (origin) => {
            let s = signers.get(origin);
            if (s === undefined) signers.set(origin, (s = ed25519NoteSigner(origin, config.noteKey)));
            return s;
          },
          witnesses,
          intervalMs: config.intervalMs,
          logger: deps.logger,
          ...(deps.registry !== undefined ? { registry: deps.registry } : {}),
          ...(deps.onAlarm !== undefined ? { onAlarm: deps.onAlarm } : {}),
        },
        signal,
      ),
  };
}

/** The Warning Event of an alarm, on the controller's leader-election Lease (kubectl get events). */
export const WITNESS_ALARM_REASON = {
  inconsistent: 'WitnessRefusedCheckpoint',
  ahead: 'WitnessAheadOfLog',
} as const;

/** Where alarms go as Kubernetes Events (the controller's EventRecorder). */
export interface EventSink {
  event(
    obj: {
      apiVersion: string;
      kind: string;
      metadata: { name: string; namespace: string };
    },
    type: 'Warning',
    reason: string,
    note: string,
  ): Promise<void>;
}

/**
 * An alarm as a Warning Event regarding the controller's leader-election Lease, the one object
 * that stands for "the controller" (`kubectl get events -n <release namespace>`): reason
 * WitnessRefusedCheckpoint or WitnessAheadOfLog, the witnessing loop's message as the note.
 */
export function alarmEvents(
  sink: EventSink,
  lease: { namespace: string; name: string },
): (a: WitnessAlarm) => void {
  return (a) => {
    void sink.event(
      {
        apiVersion: 'coordination.k8s.io/v1',
        kind: 'Lease',
        metadata: { name: lease.name, namespace: lease.namespace },
      },
      'Warning',
      WITNESS_ALARM_REASON[a.outcome],
      a.message,
    );
  };
}
