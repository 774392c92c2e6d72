import type { Run } from '../crd/run.ts';
import type { Informer } from '../kube/index.ts';
import type { Loop } from '../queue/loop.ts';

/** One leadership term, as the leader's loops see it. */
export interface Term {
  /** Aborts when the term ends (leadership lost or the process stopping). */
  readonly signal: AbortSignal;
  /**
   * The Run cache of this term, already synced: the Run controller and the transparency projection
   * share it (a standby keeps no cache: ADR 0002).
   */
  readonly runs: Informer<Run>;
}

/** A loop that runs while this replica leads: started at each term, stopped when it ends. */
export interface LeaderLoop {
  readonly name: string;
  run(term: Term): Promise<void>;
}

/** A loop that needs no Run cache, run while leading (the checkpointer). */
export function whileLeading(loop: Loop): LeaderLoop {
  return { name: loop.name, run: (term) => loop.run(term.signal) };
}
