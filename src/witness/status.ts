import type { WitnessRecord } from '../vault/index.ts';

/**
 * The witness condition of one log (what `GET /v1/tlog/{log}/witnesses` shows), derived from what
 * the vault recorded: type `Consistent`, True after a cosignature newer than any alarm, False
 * after a witness refused a checkpoint as inconsistent (422) or showed it holds a larger tree
 * (409 beyond ours), Unknown while a witness only rejected (400/403/404) or never answered.
 * `lastTransitionTime` is when it last flipped: the refusal, or the first cosignature after it.
 */

export interface WitnessCondition {
  readonly type: 'Consistent';
  readonly status: 'True' | 'False' | 'Unknown';
  readonly reason:
    'Cosigned' | 'WitnessRefusedInconsistent' | 'WitnessAhead' | 'WitnessRejected' | 'NoAnswer';
  readonly message: string;
  readonly lastTransitionTime: string | null;
}

export function witnessCondition(rec: WitnessRecord | undefined): WitnessCondition {
  const refused = rec?.refused ?? null;
  const cosigned = rec?.cosigned ?? null;
  const alarm = refused !== null && refused.outcome !== 'rejected' ? refused : null;
  if (alarm !== null && (cosigned === null || cosigned.storedAt <= alarm.createdAt)) {
    return {
      type: 'Consistent',
      status: 'False',
      reason: alarm.outcome === 'inconsistent' ? 'WitnessRefusedInconsistent' : 'WitnessAhead',
      message:
        alarm.outcome === 'inconsistent'
          ? `refused the checkpoint of size ${alarm.treeSize} as inconsistent with the tree it cosigned (HTTP ${alarm.httpStatus}): ${alarm.detail}`
          : `holds a checkpoint of size ${alarm.witnessSize ?? '?'}, larger than this log's tree of ${alarm.treeSize}`,
      lastTransitionTime: alarm.createdAt.toISOString(),
    };
  }
  if (cosigned !== null) {
    return {
      type: 'Consistent',
      status: 'True',
      reason: 'Cosigned',
      message: `cosigned the checkpoint of size ${cosigned.treeSize}`,
      lastTransitionTime: (cosigned.since ?? cosigned.storedAt).toISOString(),
    };
  }
  if (refused !== null) {
    return {
      type: 'Consistent',
      status: 'Unknown',
      reason: 'WitnessRejected',
      message: `rejected the checkpoint of size ${refused.treeSize} (HTTP ${refused.httpStatus}: ${refused.detail}); does it know this log and its key?`,
      lastTransitionTime: refused.createdAt.toISOString(),
    };
  }
  return {
    type: 'Consistent',
    status: 'Unknown',
    reason: 'NoAnswer',
    message: 'no answer yet',
    lastTransitionTime: null,
  };
}
