import { Registry } from 'prom-client';
import { beforeAll, describe, expect, it } from 'vitest';
import type { KubeClient } from '../../../src/kube/client.ts';
import { LeaderElector, kubeLeaseStore, type Lease, type LeaseStore } from '../../../src/kube/leader.ts';
import { uniqueName } from '../../helpers/stack.ts';
import { adminClient, freshNamespace, logger, metric, waitFor } from './helpers.ts';

/**
 * Two electors on one real Lease. Timings are shortened (lease 4 s, renew deadline 2.5 s, retry
 * 0.5 s) but keep the production ratios; assertions are about order and about which mechanism
 * (release vs expiry) handed the lease over, with margins wide enough for a loaded machine.
 */
const timings = { leaseDurationSeconds: 4, renewDeadlineSeconds: 2.5, retryPeriodSeconds: 0.5 };

let client: KubeClient;
let ns: string;
beforeAll(async () => {
  client = adminClient();
  ns = await freshNamespace(client, 'leader');
});

/** The real store, plus a switch that makes every request hang until its deadline (a partition). */
function pausable(store: LeaseStore): LeaseStore & { paused: boolean } {
  const hang = (signal: AbortSignal) =>
    new Promise<never>((_, reject) =>
      signal.addEventListener('abort', () => reject(signal.reason as Error), { once: true }),
    );
  const s = {
    paused: false,
    namespace: store.namespace,
    name: store.name,
    get: (signal: AbortSignal) => (s.paused ? hang(signal) : store.get(signal)),
    create: (l: Lease, signal: AbortSignal) => (s.paused ? hang(signal) : store.create(l, signal)),
    update: (l: Lease, signal: AbortSignal) => (s.paused ? hang(signal) : store.update(l, signal)),
  };
  return s;
}

interface Term {
  who: string;
  start: number;
  end?: number;
  signal: AbortSignal;
}

function elector(leaseName: string, who: string, terms: Term[], registry?: Registry) {
  const store = pausable(kubeLeaseStore(client, ns, leaseName));
  const stop = new AbortController();
  const e = new LeaderElector({
    store,
    identity: who,
    logger,
    ...(registry ? { registry } : {}),
    ...timings,
    onStartedLeading: async (signal) => {
      const t: Term = { who, start: performance.now(), signal };
      terms.push(t);
      await new Promise((r) => signal.addEventListener('abort', r, { once: true }));
      t.end = performance.now();
    },
  });
  const run = e.run(stop.signal);
  return { e, store, stop, run };
}

const readLease = (name: string) =>
  client.request<Lease>({
    method: 'GET',
    path: `/apis/coordination.k8s.io/v1/namespaces/${ns}/leases/${name}`,
  });

function neverOverlap(terms: Term[]): void {
  const sorted = [...terms].sort((a, b) => a.start - b.start);
  for (let i = 1; i < sorted.length; i++) {
    expect(
      sorted[i - 1]!.end,
      `${sorted[i - 1]!.who}'s term must end before ${sorted[i]!.who}'s starts`,
    ).toBeLessThanOrEqual(sorted[i]!.start);
  }
}

describe('LeaderElector against the real API server', () => {
  it('one leader at a time; a graceful stop releases the lease and the other takes over at once', async () => {
    const lease = uniqueName('lease');
    const terms: Term[] = [];
    const registry = new Registry();
    const a = elector(lease, 'replica-a', terms, registry);
    await waitFor(() => a.e.isLeader(), 20_000, 'a leads');
    const b = elector(lease, 'replica-b', terms);

    // Several lease durations: b must stay a follower while a renews.
    await new Promise((r) => setTimeout(r, timings.leaseDurationSeconds * 1000 * 2));
    expect(a.e.isLeader()).toBe(true);
    expect(b.e.isLeader()).toBe(false);
    expect(b.e.leader).toBe('replica-a');
    const held = await readLease(lease);
    expect(held.spec.holderIdentity).toBe('replica-a');
    expect(held.spec.leaseDurationSeconds).toBe(4);
    expect(held.spec.renewTime).toMatch(/\.\d{6}Z$/);
    expect(metric(await registry.metrics(), 'leader_election_master_status', 'name="' + lease + '"')).toBe(1);

    a.stop.abort();
    await a.run;
    expect(terms[0]!.signal.aborted).toBe(true);
    expect((await readLease(lease)).spec.holderIdentity ?? '').toBe('');
    await waitFor(() => b.e.isLeader(), 20_000, 'b takes over');
    // Released (empty holder, checked above), not expired: b acquired an unheld lease.
    const taken = await readLease(lease);
    expect(taken.spec.holderIdentity).toBe('replica-b');
    expect(taken.spec.leaseTransitions).toBe(1);
    expect(metric(await registry.metrics(), 'leader_election_master_status', 'name="' + lease + '"')).toBe(0);
    neverOverlap(terms);
    b.stop.abort();
    await b.run;
  });

  it('a paused leader aborts its term after renewDeadline; the other acquires only after the lease expired', async () => {
    const lease = uniqueName('lease');
    const terms: Term[] = [];
    const a = elector(lease, 'replica-a', terms);
    await waitFor(() => a.e.isLeader(), 20_000, 'a leads');
    const b = elector(lease, 'replica-b', terms);
    await waitFor(() => b.e.leader === 'replica-a', 20_000, 'b sees a');
    await new Promise((r) => setTimeout(r, 1500));

    a.store.paused = true;
    const lastRenewSeen = Date.parse((await readLease(lease)).spec.renewTime!);
    await waitFor(() => b.e.isLeader(), 30_000, 'b takes over');
    const aTerm = terms.find((t) => t.who === 'replica-a')!;
    const bTerm = terms.find((t) => t.who === 'replica-b')!;

    expect(aTerm.signal.aborted).toBe(true);
    expect(a.e.isLeader()).toBe(false);
    expect(aTerm.end!).toBeLessThanOrEqual(bTerm.start); // a stopped before b started
    // b waited out the lease: it acquired no earlier than leaseDuration after a's last renewal.
    const acquired = await readLease(lease);
    expect(acquired.spec.holderIdentity).toBe('replica-b');
    expect(Date.parse(acquired.spec.acquireTime!) - lastRenewSeen).toBeGreaterThanOrEqual(
      timings.leaseDurationSeconds * 1000 - 50,
    );
    neverOverlap(terms);

    // Unpaused, a finds a valid lease held by b and stays a follower.
    // Its first observation after the partition may wait out a request deadline on a loaded
    // machine, so wait (bounded) for it to see b, then check it never took a term meanwhile.
    a.store.paused = false;
    await waitFor(() => a.e.leader === 'replica-b', 20_000, 'a sees b after the partition');
    expect(a.e.isLeader()).toBe(false);
    expect(terms.filter((t) => t.who === 'replica-a')).toHaveLength(1);
    expect((await readLease(lease)).spec.holderIdentity).toBe('replica-b');
    for (const x of [a, b]) x.stop.abort();
    await Promise.all([a.run, b.run]);
  });
});
