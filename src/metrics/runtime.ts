import { Counter, Gauge, Histogram, type Registry } from 'prom-client';

/**
 * Prometheus metrics of the controller runtime. Names follow controller-runtime and client-go
 * (`controller_runtime_reconcile_*`, `workqueue_*`, `leader_election_master_status`) so existing
 * dashboards and alerts apply. A Registry rejects a second metric of the same name, so each family is
 * created once per Registry and shared by every queue, informer and elector wired to it.
 */

function perRegistry<T>(make: (r: Registry) => T): (r: Registry) => T {
  const cache = new WeakMap<Registry, T>();
  return (r) => {
    let m = cache.get(r);
    if (m === undefined) {
      m = make(r);
      cache.set(r, m);
    }
    return m;
  };
}

const durationBuckets = [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60];

export const workqueueMetrics = perRegistry((r) => ({
  depth: new Gauge({
    name: 'workqueue_depth',
    help: 'Keys waiting in the queue',
    labelNames: ['name'],
    registers: [r],
  }),
  adds: new Counter({
    name: 'workqueue_adds_total',
    help: 'Keys added',
    labelNames: ['name'],
    registers: [r],
  }),
  retries: new Counter({
    name: 'workqueue_retries_total',
    help: 'Rate-limited requeues',
    labelNames: ['name'],
    registers: [r],
  }),
  queueDuration: new Histogram({
    name: 'workqueue_queue_duration_seconds',
    help: 'Time a key waits in the queue before a worker takes it',
    labelNames: ['name'],
    buckets: durationBuckets,
    registers: [r],
  }),
}));

export const reconcileMetrics = perRegistry((r) => ({
  total: new Counter({
    name: 'controller_runtime_reconcile_total',
    help: 'Reconciliations by result (success, error, requeue, requeue_after, more)',
    labelNames: ['controller', 'result'],
    registers: [r],
  }),
  errors: new Counter({
    name: 'controller_runtime_reconcile_errors_total',
    help: 'Reconciliations that threw',
    labelNames: ['controller'],
    registers: [r],
  }),
  duration: new Histogram({
    name: 'controller_runtime_reconcile_time_seconds',
    help: 'Reconcile latency',
    labelNames: ['controller'],
    buckets: durationBuckets,
    registers: [r],
  }),
  active: new Gauge({
    name: 'controller_runtime_active_workers',
    help: 'Workers currently reconciling',
    labelNames: ['controller'],
    registers: [r],
  }),
}));

export const informerMetrics = perRegistry((r) => ({
  events: new Counter({
    name: 'informer_watch_events_total',
    help: 'Watch events received, by type (ADDED, MODIFIED, DELETED, BOOKMARK, ERROR)',
    labelNames: ['informer', 'type'],
    registers: [r],
  }),
  restarts: new Counter({
    name: 'informer_watch_restarts_total',
    help: 'Watch restarts by reason (closed: server timeout; watchdog: no event or bookmark in time; error; expired: 410)',
    labelNames: ['informer', 'reason'],
    registers: [r],
  }),
  relists: new Counter({
    name: 'informer_relists_total',
    help: 'Full lists (the first one and every one after 410 Gone)',
    labelNames: ['informer'],
    registers: [r],
  }),
  synced: new Gauge({
    name: 'informer_synced',
    help: '1 once the first list is in the cache',
    labelNames: ['informer'],
    registers: [r],
  }),
}));

export const leaderMetrics = perRegistry((r) => ({
  leading: new Gauge({
    name: 'leader_election_master_status',
    help: '1 while this process holds the lease',
    labelNames: ['name'],
    registers: [r],
  }),
  transitions: new Counter({
    name: 'leader_election_transitions_total',
    help: 'Times this process started or stopped leading',
    labelNames: ['name', 'event'],
    registers: [r],
  }),
}));
