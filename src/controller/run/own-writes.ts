import type { Written } from './plan.ts';

/**
 * The Runs the reconciler wrote the status of this term, as it left them (ADR 0017): the watch
 * event of its own write is recognised and not reconciled again.
 *
 * Invariant: a Run enqueued for a reason its watch events do not show (a manifest repair the API
 * asked for, a loss found by the sweep) is reconciled in full by the next reconcile that starts,
 * even when a reconcile of that Run was in flight when it was asked for. Deleting the entry is not
 * enough: the reconcile in flight would put it back when it writes its status, and the next one
 * would take the Run for that echo and skip the request. So the request is a mark, consumed by the
 * next `take`, that outlives any `remember` made meanwhile.
 */
export class OwnWrites {
  readonly #written = new Map<string, Written>();
  readonly #forced = new Set<string>();
  readonly #losses = new Map<string, string>();

  /** At the start of a reconcile: what its echo would look like, or undefined when it must run in full. */
  take(key: string): Written | undefined {
    const written = this.#written.get(key);
    this.#written.delete(key);
    return this.#forced.delete(key) ? undefined : written;
  }

  /** After a status write: the Run as this reconcile left it. */
  remember(key: string, written: Written): void {
    this.#written.set(key, written);
  }

  /** The next reconcile of `key` that starts runs in full, whatever was remembered before or meanwhile. */
  force(key: string): void {
    this.#forced.add(key);
    this.#written.delete(key);
  }

  /**
   * A loss said on the Run `uid` (its RecordsLost message): every status this term computes for it
   * says it too, even one computed from a cached copy older than the status that said it first, whose
   * apply would otherwise drop the condition (server-side apply removes an owned field left out).
   * By uid: a Run deleted and made again under the same name is another Run.
   */
  sayLoss(uid: string, message: string): void {
    this.#losses.set(uid, message);
  }

  /** The loss said on the Run `uid` this term, if any. */
  lossOf(uid: string): string | undefined {
    return this.#losses.get(uid);
  }

  /** Entries held (tests, metrics). */
  get size(): number {
    return this.#written.size;
  }
}
