import { EventReasons } from '../../crd/reasons.ts';
import type { Run } from '../../crd/run.ts';

/**
 * What one reconcile recorded, told in one Normal Event (not one per batch or per act): the acts
 * note lines as they go, and the reconcile tells them once, also when it fails afterwards (a retry
 * finds that work claimed and stays silent, so this is the only time it is told).
 */
export interface Telling {
  /** The lines noted so far (an act may push to it directly). */
  readonly notes: string[];
  /** Adds a line to the Event; `reason`, when given, becomes the Event's reason. */
  note(line: string, reason?: string): void;
  /** Emits one Event of the lines noted since the last call; nothing when there are none. */
  tell(run: Run): Promise<void>;
}

export function telling(api: {
  event(run: Run, type: 'Normal' | 'Warning', reason: string, note: string): Promise<void>;
}): Telling {
  const notes: string[] = [];
  let reason: string = EventReasons.Attested;
  return {
    notes,
    note(line, as) {
      notes.push(line);
      if (as !== undefined) reason = as;
    },
    async tell(run) {
      if (notes.length > 0) await api.event(run, 'Normal', reason, notes.splice(0).join('; '));
    },
  };
}
