import type { Registry } from 'prom-client';
import type { Logger } from '../log/index.ts';
import { isConflict, isNotFound, microTime, type KubeClient } from './client.ts';
import { leaderMetrics } from '../metrics/runtime.ts';
import { sleep } from '../queue/sleep.ts';

/** `coordination.k8s.io/v1` Lease, the fields leader election uses. Times are MicroTime strings. */
export interface Lease {
  apiVersion?: 'coordination.k8s.io/v1';
  kind?: 'Lease';
  metadata: { name: string; namespace: string; resourceVersion?: string };
  spec: {
    holderIdentity?: string;
    leaseDurationSeconds?: number;
    acquireTime?: string;
    renewTime?: string;
    leaseTransitions?: number;
  };
}

/**
 * Storage of one Lease. `update` must send `metadata.resourceVersion` so that a concurrent writer
 * makes it fail with 409: that compare-and-swap is the whole mutual exclusion.
 */
export interface LeaseStore {
  readonly namespace: string;
  readonly name: string;
  get(signal: AbortSignal): Promise<Lease | undefined>;
  create(lease: Lease, signal: AbortSignal): Promise<Lease>;
  update(lease: Lease, signal: AbortSignal): Promise<Lease>;
}

export function kubeLeaseStore(client: KubeClient, namespace: string, name: string): LeaseStore {
  const collection = `/apis/coordination.k8s.io/v1/namespaces/${encodeURIComponent(namespace)}/leases`;
  const item = `${collection}/${encodeURIComponent(name)}`;
  const typed = (l: Lease): Lease => ({ apiVersion: 'coordination.k8s.io/v1', kind: 'Lease', ...l });
  return {
    namespace,
    name,
    async get(signal) {
      try {
        return await client.request<Lease>({ method: 'GET', path: item, signal });
      } catch (err) {
        if (isNotFound(err)) return undefined;
        throw err;
      }
    },
    create: (lease, signal) =>
      client.request<Lease>({ method: 'POST', path: collection, body: typed(lease), signal }),
    update: (lease, signal) =>
      client.request<Lease>({ method: 'PUT', path: item, body: typed(lease), signal }),
  };
}

export interface LeaderElectorOptions {
  store: LeaseStore;
  /** Unique per process (pod name plus a random suffix): two processes with one identity would both lead. */
  identity: string;
  logger: Logger;
  registry?: Registry;
  /** How long a lease stays valid after the holder's last renewal, as seen by the others. Default 15. */
  leaseDurationSeconds?: number;
  /** The leader gives up if it could not renew for this long. Must be < leaseDuration. Default 10. */
  renewDeadlineSeconds?: number;
  /** Interval of renewals and of acquisition attempts (the latter jittered ×1–2.2). Default 2. */
  retryPeriodSeconds?: number;
  /**
   * Starts the work of one term. `signal` aborts when the term ends (leadership lost or shutdown); the
   * work must stop then. A returned promise is awaited before this process campaigns again, so two
   * terms never overlap within one process.
   */
  onStartedLeading(signal: AbortSignal): void | Promise<void>;
  /** Called after a term ended and, on graceful shutdown, after the lease was released. */
  onStoppedLeading?(): void;
  /** Called when the observed holder changes (including to this process). */
  onNewLeader?(identity: string): void;
}

type Attempt = 'ok' | 'held' | 'failed';

/**
 * Leader election on a Lease, as client-go's `leaderelection` package.
 *
 * Safety rests on three rules:
 * 1. Writes are compare-and-swap on resourceVersion (409 = someone else wrote first = not us).
 * 2. A candidate treats a lease as expired only `leaseDuration` after it *itself observed* the last
 *    change of the record (local monotonic clock), never by comparing the holder's `renewTime` with
 *    its own wall clock, so clock skew between nodes cannot cut a term short.
 * 3. The leader stops (aborts its signal) once it failed to renew for `renewDeadline` < `leaseDuration`:
 *    it has stopped before any candidate can consider the lease expired.
 * On graceful shutdown the lease is released (empty holder) so a candidate takes over on its next
 * attempt instead of waiting for expiry.
 */
export class LeaderElector {
  readonly #o: LeaderElectorOptions;
  readonly #log: Logger;
  readonly #metrics: ReturnType<typeof leaderMetrics> | undefined;
  readonly #leaseMs: number;
  readonly #renewDeadlineMs: number;
  readonly #retryMs: number;
  /** Last lease read or written, and the local monotonic time its content was first seen. */
  #observed: Lease | undefined;
  #observedAt = 0;
  #leading = false;

  constructor(options: LeaderElectorOptions) {
    const lease = options.leaseDurationSeconds ?? 15;
    const renew = options.renewDeadlineSeconds ?? 10;
    const retry = options.retryPeriodSeconds ?? 2;
    if (!(lease > renew)) throw new RangeError('leaseDurationSeconds must exceed renewDeadlineSeconds');
    if (!(renew > retry * 1.2))
      throw new RangeError('renewDeadlineSeconds must exceed 1.2 × retryPeriodSeconds');
    if (!(retry > 0)) throw new RangeError('retryPeriodSeconds must be positive');
    if (options.identity === '') throw new RangeError('identity must not be empty');
    this.#o = options;
    this.#log = options.logger.child({
      lease: `${options.store.namespace}/${options.store.name}`,
      identity: options.identity,
    });
    this.#metrics = options.registry ? leaderMetrics(options.registry) : undefined;
    this.#leaseMs = lease * 1000;
    this.#renewDeadlineMs = renew * 1000;
    this.#retryMs = retry * 1000;
  }

  isLeader(): boolean {
    return this.#leading;
  }

  /** The holder last observed in the lease ('' when released or unknown). */
  get leader(): string {
    return this.#observed?.spec.holderIdentity ?? '';
  }

  /** Campaigns, leads and campaigns again until `signal` aborts; resolves after releasing the lease. */
  async run(signal: AbortSignal): Promise<void> {
    while (!signal.aborted) {
      // Bounded like renewals, so one hung request cannot stall the campaign.
      const attempt = AbortSignal.any([signal, AbortSignal.timeout(Math.ceil(this.#renewDeadlineMs))]);
      if ((await this.#attempt(attempt)) === 'ok') await this.#lead(signal);
      else await sleep(this.#retryMs * (1 + Math.random() * 1.2), signal);
    }
  }

  async #lead(signal: AbortSignal): Promise<void> {
    const label = { name: this.#o.store.name };
    const term = new AbortController();
    this.#leading = true;
    this.#metrics?.leading.set(label, 1);
    this.#metrics?.transitions.inc({ ...label, event: 'started' });
    this.#log.info('started leading');
    const work = Promise.resolve()
      .then(() => this.#o.onStartedLeading(term.signal))
      .catch((err: unknown) => this.#log.error({ err }, 'onStartedLeading failed'));

    let lastRenew = performance.now();
    let lost = false;
    while (!signal.aborted && !lost) {
      await sleep(this.#retryMs, signal);
      if (signal.aborted) break;
      // Bound the attempt so a hung request cannot carry us past the renew deadline.
      const remaining = Math.max(1, Math.ceil(this.#renewDeadlineMs - (performance.now() - lastRenew)));
      const result = await this.#attempt(AbortSignal.any([signal, AbortSignal.timeout(remaining)]));
      if (result === 'ok') lastRenew = performance.now();
      else if (result === 'held')
        lost = true; // someone else legitimately holds it: stop at once
      else if (performance.now() - lastRenew >= this.#renewDeadlineMs) lost = true;
    }

    term.abort(new Error(lost ? 'leader election lost' : 'shutting down'));
    this.#leading = false;
    this.#metrics?.leading.set(label, 0);
    this.#metrics?.transitions.inc({ ...label, event: 'stopped' });
    if (lost) {
      this.#log.warn({ renewDeadlineMs: this.#renewDeadlineMs }, 'leader election lost; term aborted');
      await work;
    } else {
      // The lease stays ours for at least renewDeadline after the last renewal: let the work finish
      // within that before handing over. Releasing while it still runs would let terms overlap.
      const budget = Math.max(0, this.#renewDeadlineMs - (performance.now() - lastRenew));
      let timer: ReturnType<typeof setTimeout> | undefined;
      const timedOut = new Promise<boolean>((resolve) => (timer = setTimeout(resolve, budget, false)));
      const finished = await Promise.race([work.then(() => true), timedOut]);
      clearTimeout(timer);
      if (finished) await this.#release();
      else
        this.#log.warn('term work did not stop in time; leaving the lease to expire instead of releasing it');
    }
    this.#log.info('stopped leading');
    try {
      this.#o.onStoppedLeading?.();
    } catch (err) {
      this.#log.error({ err }, 'onStoppedLeading threw');
    }
  }

  /** One tryAcquireOrRenew: read, decide, compare-and-swap. Never throws. */
  async #attempt(signal: AbortSignal): Promise<Attempt> {
    const { store, identity } = this.#o;
    const now = new Date();
    let current: Lease | undefined;
    try {
      current = await store.get(signal);
      if (current === undefined) {
        const created = await store.create(
          {
            metadata: { name: store.name, namespace: store.namespace },
            spec: {
              holderIdentity: identity,
              leaseDurationSeconds: this.#leaseMs / 1000,
              acquireTime: microTime(now),
              renewTime: microTime(now),
              leaseTransitions: 0,
            },
          },
          signal,
        );
        this.#observe(created);
        return 'ok';
      }
    } catch (err) {
      this.#logAttemptError(err);
      return 'failed';
    }

    this.#observe(current);
    const holder = current.spec.holderIdentity ?? '';
    const leaseMs = (current.spec.leaseDurationSeconds ?? this.#leaseMs / 1000) * 1000;
    const expired = performance.now() >= this.#observedAt + leaseMs;
    if (holder !== '' && holder !== identity && !expired) return 'held';

    const spec: Lease['spec'] =
      holder === identity
        ? { ...current.spec, leaseDurationSeconds: this.#leaseMs / 1000, renewTime: microTime(now) }
        : {
            holderIdentity: identity,
            leaseDurationSeconds: this.#leaseMs / 1000,
            acquireTime: microTime(now),
            renewTime: microTime(now),
            leaseTransitions: (current.spec.leaseTransitions ?? 0) + 1,
          };
    try {
      // `current.metadata.resourceVersion` travels with it: the server refuses (409) if it moved on.
      this.#observe(await store.update({ metadata: current.metadata, spec }, signal));
      return 'ok';
    } catch (err) {
      this.#logAttemptError(err);
      return 'failed';
    }
  }

  async #release(): Promise<void> {
    const mine = this.#observed;
    if (!mine || mine.spec.holderIdentity !== this.#o.identity) return;
    const signal = AbortSignal.timeout(Math.ceil(this.#renewDeadlineMs));
    try {
      try {
        await this.#releaseFrom(mine, signal);
      } catch (err) {
        // 409: the record moved on since we last saw it. Our own renewal does that when the stop
        // aborted it after the server applied it (its answer, with the new resourceVersion, never
        // reached us: seen in the e2e, SIGTERM during a renewal). Read it again and release it only
        // while it still names us; anyone else's write makes it not ours to release.
        if (!isConflict(err)) throw err;
        const current = await this.#o.store.get(signal);
        if (current?.spec.holderIdentity !== this.#o.identity) {
          this.#log.info('lease no longer ours; nothing to release');
          return;
        }
        this.#observe(current);
        await this.#releaseFrom(current, signal);
      }
      this.#log.info('lease released');
    } catch (err) {
      this.#log.warn({ err }, 'could not release the lease; it will expire');
    }
  }

  /** Compare-and-swap of `lease` (its resourceVersion) to an unheld, one-second record. */
  async #releaseFrom(lease: Lease, signal: AbortSignal): Promise<void> {
    const now = microTime(new Date());
    const released = await this.#o.store.update(
      {
        metadata: lease.metadata,
        spec: {
          holderIdentity: '',
          leaseDurationSeconds: 1,
          acquireTime: now,
          renewTime: now,
          leaseTransitions: lease.spec.leaseTransitions ?? 0,
        },
      },
      signal,
    );
    this.#observe(released);
  }

  #observe(lease: Lease): void {
    const before = this.#observed;
    if (before?.metadata.resourceVersion !== lease.metadata.resourceVersion) {
      this.#observed = lease;
      this.#observedAt = performance.now();
    }
    const holder = lease.spec.holderIdentity ?? '';
    if (holder !== '' && holder !== (before?.spec.holderIdentity ?? '')) {
      this.#log.info({ leader: holder }, 'new leader observed');
      try {
        this.#o.onNewLeader?.(holder);
      } catch (err) {
        this.#log.error({ err }, 'onNewLeader threw');
      }
    }
  }

  #logAttemptError(err: unknown): void {
    if (isConflict(err))
      this.#log.debug('lease changed concurrently (409); another candidate won this round');
    else this.#log.warn({ err }, 'lease request failed');
  }
}
